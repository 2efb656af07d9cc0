// The equality rule every strategy is held to (DESIGN.md, Executor): the loss
// and every parameter-gradient byte identical to the reference's (store-all on
// the same backend). `remat run` and the window's Run action both use it, so
// the window never calls "bit-identical" what the CLI would not.
#pragma once
#include "core/exec/executor.h"

namespace remat {

// False unless both ran to completion and agree bit for bit (a NaN loss equals
// a NaN loss of the same bits; 0.0 and -0.0 differ).
bool same_loss_and_grads(const ExecResult& a, const ExecResult& reference);

}  // namespace remat
