// A pipeline's spec as the pipeline tests write it: p stages, a schedule, m
// micro-batches and V chunks per stage, no tensor or data parallelism.
#pragma once
#include "core/parallel/parallel_plan.h"

namespace remat::testing {

inline ParallelSpec pipeline_spec(int p, PipelineSchedule s, int m, int chunks = 1) {
  ParallelSpec x;
  x.pp = p;
  x.schedule = s;
  x.micro_batches = m;
  x.chunks = chunks;
  return x;
}

}  // namespace remat::testing
