// Shared by the gradient-sharing tests (test_add_gradient.cpp,
// test_view_gradient.cpp): the resident index restores aliased gradients.
#pragma once
#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"

namespace remat::testing {

// At every instruction the index's resident gradients are the replayed set's.
inline void expect_index_counts_resident_grads(const Model& m, const Schedule& s) {
  const ResidentIndex index(m, s);
  ResidentSet r(m);
  for (std::size_t t = 0; t < s.code.size(); ++t) {
    r.apply(m, s.code[t]);
    std::size_t grads = 0;
    for (const TensorRef& ref : index.resident_at(t)) grads += ref.grad;
    std::size_t expected = 0;
    for (uint8_t g : r.grad) expected += g;
    EXPECT_EQ(grads, expected) << "instruction " << t;
  }
}

}  // namespace remat::testing
