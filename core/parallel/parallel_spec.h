// The --parallel spec: how a training step is split over devices.
//   tp=T[,sp],pp=P[,schedule=gpipe|1f1b|interleaved:V|zb-h1|zb-h2],micro-batches=M[,dp=D,zero=0|1|2|3]
// and stages=N0:N1:...: the blocks of each (virtual) stage, in place of the
// balanced split (a first stage given fewer blocks for the micro-batches it holds).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace remat {

enum class PipelineSchedule { GPipe, OneFOneB, Interleaved, ZbH1, ZbH2 };

struct ParallelSpec {
  int tp = 1;
  bool sp = false;
  int pp = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int chunks = 1;  // interleaved:V, the model chunks per device (1 for the others)
  int micro_batches = 1;
  int dp = 1;
  int zero = 0;
  std::vector<int> stages;  // blocks per stage (P x V of them under interleaved:V); empty: balanced
};

// Every key at most once, in any order; all optional but at least one. Throws
// InputError naming the item and what it takes.
ParallelSpec parse_parallel_spec(std::string_view text);
// The spec back as text, every key written ("tp=8,sp,pp=8,schedule=1f1b,...").
std::string parallel_spec_text(const ParallelSpec& p);
std::string schedule_name(const ParallelSpec& p);

}  // namespace remat
