#include "core/parallel/parallel_spec.h"

#include <set>

#include "core/base/errors.h"
#include "core/base/spec_parse.h"

namespace remat {

namespace {

constexpr const char* kGrammar =
    "tp=T[,sp],pp=P[,schedule=gpipe|1f1b|interleaved:V|zb-h1|zb-h2],micro-batches=M[,dp=D,zero=0|1|2|3][,stages=N0:N1:...]";

[[noreturn]] void bad(std::string_view item, const std::string& why) {
  throw InputError("--parallel: '" + std::string(item) + "': " + why + " (" + kGrammar + ")");
}

}  // namespace

ParallelSpec parse_parallel_spec(std::string_view text) {
  ParallelSpec p;
  if (text.empty()) bad(text, "empty");
  std::set<std::string> seen;
  for (const std::string& item : split(text, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (!seen.insert(key).second) bad(item, "'" + key + "' is given twice");
    const std::string what = "--parallel " + key;
    if (key == "sp") {
      if (eq != std::string::npos) bad(item, "sp takes no value");
      p.sp = true;
      continue;
    }
    if (eq == std::string::npos) bad(item, "expected KEY=VALUE");
    if (key == "tp") p.tp = static_cast<int>(parse_int(value, what, 1, 1 << 12));
    else if (key == "pp") p.pp = static_cast<int>(parse_int(value, what, 1, 1 << 12));
    else if (key == "dp") p.dp = static_cast<int>(parse_int(value, what, 1, 1 << 20));
    else if (key == "micro-batches") p.micro_batches = static_cast<int>(parse_int(value, what, 1, 1 << 20));
    else if (key == "zero") p.zero = static_cast<int>(parse_int(value, what, 0, 3));
    else if (key == "stages") {
      for (const std::string& n : split(value, ':')) p.stages.push_back(static_cast<int>(parse_int(n, what + " (blocks of a stage)", 1, 100'000)));
    }
    else if (key == "schedule") {
      if (value == "gpipe") p.schedule = PipelineSchedule::GPipe;
      else if (value == "1f1b") p.schedule = PipelineSchedule::OneFOneB;
      else if (value == "zb-h1") p.schedule = PipelineSchedule::ZbH1;
      else if (value == "zb-h2") p.schedule = PipelineSchedule::ZbH2;
      else if (value.starts_with("interleaved:")) {
        p.schedule = PipelineSchedule::Interleaved;
        p.chunks = static_cast<int>(parse_int(value.substr(12), "--parallel schedule=interleaved:V", 1, 1 << 10));
      } else bad(item, "unknown schedule '" + value + "'");
    } else bad(item, "unknown key '" + key + "'");
  }
  if (p.sp && p.tp == 1) bad("sp", "sequence parallelism splits along the tensor-parallel group: it needs tp=T with T > 1");
  if (p.schedule == PipelineSchedule::Interleaved && p.micro_batches % p.pp != 0)
    bad("schedule=interleaved:" + std::to_string(p.chunks),
        "Megatron's interleaved schedule needs micro-batches (" + std::to_string(p.micro_batches) + ") to be a multiple of pp (" +
            std::to_string(p.pp) + ")");
  return p;
}

std::string schedule_name(const ParallelSpec& p) {
  switch (p.schedule) {
    case PipelineSchedule::GPipe: return "gpipe";
    case PipelineSchedule::OneFOneB: return "1f1b";
    case PipelineSchedule::Interleaved: return "interleaved:" + std::to_string(p.chunks);
    case PipelineSchedule::ZbH1: return "zb-h1";
    case PipelineSchedule::ZbH2: return "zb-h2";
  }
  return "?";
}

std::string parallel_spec_text(const ParallelSpec& p) {
  std::string stages;
  for (std::size_t i = 0; i < p.stages.size(); ++i) stages += (i ? ":" : ",stages=") + std::to_string(p.stages[i]);
  return "tp=" + std::to_string(p.tp) + (p.sp ? ",sp" : "") + ",pp=" + std::to_string(p.pp) + ",schedule=" + schedule_name(p) +
         ",micro-batches=" + std::to_string(p.micro_batches) + ",dp=" + std::to_string(p.dp) + ",zero=" + std::to_string(p.zero) +
         stages;
}

}  // namespace remat
