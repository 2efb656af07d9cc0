// A strategy that rewrites another's schedule without changing its compute
// (offload, compressed checkpoints): the inner strategy's schedule, then a
// rewrite, under its own spec. The inner search's solver records pass
// through (`offload+optimal:...` keeps what the optimal search proved).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/strategies/strategy.h"

namespace remat {

struct Model;

// `rewrite` adds instructions to a valid schedule of `inner`; it adds at most
// `added_per_op` per op of the model, so the stated size is the inner's plus
// that (an upper bound: which tensors the rewrite touches is known only from
// the inner schedule).
using ScheduleRewrite = std::function<Schedule(const Model&, Schedule)>;
std::unique_ptr<Strategy> make_rewriting(std::unique_ptr<Strategy> inner, std::string spec, uint64_t added_per_op,
                                         ScheduleRewrite rewrite);

}  // namespace remat
