// Gradient accumulation: a step split into K micro-batches runs K forward and
// backward passes of batch/K each; the activations any strategy schedules are
// those of one micro-batch, the parameter gradients accumulate in place (the
// baseline is unchanged) and the step's compute is K passes.
#pragma once

#include "core/model/model.h"

namespace remat {

// `model` with batch/k samples: every activation's leading dimension (the
// batch, or a multiple of it such as batch x heads) divided by k; bytes, aux
// and the layout re-derived by the op rules, FLOPs scaled by 1/k (every kind's
// count is linear in the batch), saved sets and parameters unchanged. Generic
// ops keep their given bytes and aux, divided by k. Throws InputError when k
// does not divide the batch (the input's first dimension) or an activation
// does not lead with a multiple of the batch (the assumption above fails).
// Taken by value so that k = 1 hands the model back without a copy (every
// `remat simulate` goes through here; a million-op model is 176 MB).
Model micro_batch(Model model, int k);

}  // namespace remat
