#include "core/parallel/pipeline.h"

#include <algorithm>

namespace remat {

int in_flight(const ParallelSpec& p, int stage) {
  const int m = p.micro_batches, left = p.pp - stage;
  switch (p.schedule) {
    case PipelineSchedule::GPipe: return m;
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZbH1: return std::min(left, m);
    case PipelineSchedule::ZbH2: return std::min(2 * left - 1, m);
    case PipelineSchedule::Interleaved: return std::min(2 * (left - 1) + (p.chunks - 1) * p.pp + 1, m * p.chunks);
  }
  return m;
}

double bubble_seconds(const ParallelSpec& p, const StageTimes& t) {
  const double gaps = p.pp - 1;
  switch (p.schedule) {
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB: return gaps * t.total();
    case PipelineSchedule::Interleaved: return gaps * t.total() / p.chunks;
    case PipelineSchedule::ZbH1: return gaps * std::max(0.0, t.f + t.b - t.w);
    case PipelineSchedule::ZbH2: return gaps * std::max(0.0, t.f + t.b - 2 * t.w);
  }
  return 0;
}

double step_seconds(const ParallelSpec& p, const StageTimes& slowest) {
  return p.micro_batches * slowest.total() + bubble_seconds(p, slowest);
}

}  // namespace remat
