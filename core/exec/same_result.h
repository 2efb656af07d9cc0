// The equality rule every strategy is held to (docs/memory-model.md): the loss
// and every parameter-gradient byte identical to the reference's (store-all on
// the same backend). `remat run` and the window's Run action both use it, so
// the window never calls "bit-identical" what the CLI would not.
#pragma once
#include "core/exec/executor.h"

namespace remat {

// False unless both ran to completion and agree bit for bit (a NaN loss equals
// a NaN loss of the same bits; 0.0 and -0.0 differ).
bool same_loss_and_grads(const ExecResult& a, const ExecResult& reference);
// The loss alone, bit for bit, both completed: what a run whose backward is
// non-deterministic (ExecResult::nondeterministic) is held to, its forward
// being unchanged.
bool same_loss(const ExecResult& a, const ExecResult& reference);

// What a completed result is held to against the reference's, as `remat
// run`'s `same` column, its JSON and its exit status say it:
enum class Sameness {
  NoReference,  // the reference did not complete: nothing to compare ("-")
  Bitwise,      // the loss and every gradient byte ("yes")
  Compressed,   // a compressed strategy, not expected to be bitwise equal ("~"): its relative_error instead
  // A non-deterministic backward (ExecResult::nondeterministic, on either
  // side): the loss has the reference's bits (the forward is unchanged), the
  // gradients not ("loss"): their relative_error instead.
  LossOnly,
  Differs,  // anything else, or `a` did not complete ("NO"): a failure of `remat run`
};
Sameness sameness(const ExecResult& a, const ExecResult& reference);

// How far a compressed strategy's result is from the reference's, where
// bitwise equality is not expected (ExecResult::compressed): the loss's
// relative error |l − l_ref| / |l_ref|, and the largest over parameter tensors
// of ||g − g_ref||₂ / ||g_ref||₂, the Euclidean (Frobenius) norm over each
// tensor's elements, summed in double. A reference of norm 0 divides by 1
// (the absolute error). Deterministic: two runs give the same figures.
struct ResultError {
  double loss = 0;
  double grad = 0;          // the largest relative gradient error
  std::size_t worst = 0;    // the parameter tensor it is of (parameter_tensors order)
};
// Both must have completed with the same parameter tensors (std::logic_error otherwise: an internal misuse).
ResultError relative_error(const ExecResult& a, const ExecResult& reference);

}  // namespace remat
