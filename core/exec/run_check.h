// Whether `remat run` accepts a model, and if not, every op that blocks it and
// why: the one answer `remat model`, the window, Model::executable() and the
// executor give (check_executable throws the first of them).
#pragma once
#include <string>
#include <vector>

#include "core/model/model.h"

namespace remat {

struct RunBlocker {
  int op = 0;
  // An op no kernel runs as it is (its kind, dtype or attributes: exec_problem
  // in core/model/op_rules.h), or, when false, one whose kernel cannot read what the
  // model hands it (an input's dtype, strides, a saved set that leaves out
  // what its backward reads).
  bool simulate_only = true;
  std::string why;  // simulate_only: the reason; else the whole sentence after "model NAME: "
};

// In op order, simulate-only ops first; at most `limit` of them.
std::vector<RunBlocker> run_blockers(const Model& model, std::size_t limit = 1u << 30);

}  // namespace remat
