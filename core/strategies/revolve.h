// Binomial checkpointing counts (Griewank & Walther), shared by revolve.cpp
// and its tests.
#pragma once
#include <cstdint>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

// Minimal number of forward advances to reverse n steps with c slots
// (Griewank & Walther): r·n − β(c+1, r−1), β(c, r) = binom(c+r, c), r the
// least integer with β(c, r) >= n.
int64_t revolve_advances(int64_t n, int c);

// revolve:C's compute program (fwd/bwd, no frees) for a chain whose loss is
// op `loss`: t(loss-1, slots) + 2 forward steps within slots + 4 tensors on a
// chain of equal Dense layers.
std::vector<Instr> revolve_program(int64_t loss, int slots);

}  // namespace remat
