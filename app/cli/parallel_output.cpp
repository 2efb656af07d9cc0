#include "app/cli/parallel_output.h"

#include <cstdio>
#include <iostream>
#include <ostream>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "core/io/atomic_file.h"
#include "core/parallel/parallel_plan.h"

namespace remat::cli {
namespace {

// "0-11", or the chunks of an interleaved stage "0-5,48-53".
std::string blocks_text(const StageReport& s) {
  std::string out;
  for (const RankSlice& c : s.chunks) {
    if (!out.empty()) out += ",";
    out += std::to_string(c.first_block);
    if (c.blocks > 1) out += "-" + std::to_string(c.first_block + c.blocks - 1);
  }
  return out;
}

nlohmann::json stage_json(const StageReport& s, const StageTimeline& t) {
  return {{"stage", s.stage},
          {"blocks", blocks_text(s)},
          {"in_flight", s.in_flight},
          {"held_per_micro_batch_bytes", s.held_per_micro_batch},
          {"micro_batch_peak_bytes", s.micro_batch_peak},
          {"weights_bytes", s.weights},
          {"gradients_bytes", s.gradients},
          {"optimizer_bytes", s.optimizer},
          {"activations_bytes", s.activations},
          {"buffers_bytes", s.buffers},
          {"peak_bytes", s.peak()},
          {"recompute_overhead", s.recompute_overhead},
          {"idle", s.idle},
          {"times", {{"forward_s", s.times.f}, {"backward_s", s.times.b}, {"weight_grad_s", s.times.w}}},
          {"weight_grad_held_per_micro_batch_bytes", s.chunk_memory.empty() ? 0 : s.chunk_memory[0].weight_grad_held},
          {"timeline",
           {{"peak_bytes", t.peak_bytes},
            {"peak_slot", t.peak_slot},
            {"baseline_bytes", t.baseline},
            {"bytes", t.bytes},
            {"waiting_backward", t.waiting_backward},
            {"waiting_weight_grad", t.waiting_weight_grad}}}};
}

// The schedule's grid: per device, its passes in slot order.
nlohmann::json grid_json(const PipelineGrid& g) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& list : g.passes) {
    nlohmann::json d = nlohmann::json::array();
    for (const PipelinePass& x : list)
      d.push_back({{"pass", std::string(1, pass_letter(x.kind))}, {"micro_batch", x.micro_batch}, {"chunk", x.chunk}, {"slot", x.slot}});
    devices.push_back(d);
  }
  return {{"slots", g.length}, {"devices", devices}};
}

// FILE.csv's timelines go to FILE.timeline.csv (FILE.timeline.csv for a name without .csv).
std::string timeline_path(const std::string& csv) {
  const std::string ext = ".csv";
  const bool has = csv.size() > ext.size() && csv.compare(csv.size() - ext.size(), ext.size(), ext) == 0;
  return (has ? csv.substr(0, csv.size() - ext.size()) : csv) + ".timeline.csv";
}

void write_stages_csv(std::ostream& out, const std::vector<ParallelReport>& reports) {
  out << "strategy,stage,blocks,in_flight,held_per_micro_batch_bytes,micro_batch_peak_bytes,weights_bytes,gradients_bytes,"
         "optimizer_bytes,activations_bytes,buffers_bytes,peak_bytes,timeline_peak_bytes,peak_slot,idle,recompute_overhead\n";
  for (const ParallelReport& r : reports)
    for (const StageReport& s : r.stages) {
      const StageTimeline& t = r.timelines[static_cast<std::size_t>(s.stage)];
      out << '"' << r.strategy << "\"," << s.stage << ",\"" << blocks_text(s) << "\"," << s.in_flight << ','
          << s.held_per_micro_batch << ',' << s.micro_batch_peak << ',' << s.weights << ',' << s.gradients << ','
          << s.optimizer << ',' << s.activations << ',' << s.buffers << ',' << s.peak() << ',' << t.peak_bytes << ','
          << t.peak_slot << ',' << s.idle << ',' << s.recompute_overhead << '\n';
    }
}

// A row per strategy, stage and slot: the pass run there (empty: idle) and the bytes.
void write_timelines_csv(std::ostream& out, const std::vector<ParallelReport>& reports) {
  out << "strategy,stage,slot,pass,micro_batch,chunk,waiting_backward,waiting_weight_grad,bytes\n";
  for (const ParallelReport& r : reports)
    for (const StageTimeline& t : r.timelines) {
      const std::vector<int> at = r.grid.at(t.stage);
      const auto& passes = r.grid.passes[static_cast<std::size_t>(t.stage)];
      for (std::size_t i = 0; i < t.bytes.size(); ++i) {
        out << '"' << r.strategy << "\"," << t.stage << ',' << i << ',';
        if (const int k = at[i]; k >= 0) {
          const PipelinePass& x = passes[static_cast<std::size_t>(k)];
          out << pass_letter(x.kind) << ',' << x.micro_batch << ',' << x.chunk << ',';
        } else {
          out << ",,,";
        }
        out << t.waiting_backward[i] << ',' << t.waiting_weight_grad[i] << ',' << t.bytes[i] << '\n';
      }
    }
}

void print_table(const ParallelReport& r, const TimeModel& time) {
  const ParallelSpec& p = r.spec;
  std::printf("\nstrategy %s: step %s (%d micro-batches, %.4g FLOP/s per device), bubble %.1f%% of the step\n",
              r.strategy.c_str(), format_seconds(r.step_s).c_str(), p.micro_batches, time.device_flops,
              100.0 * r.bubble_fraction);
  std::printf("%5s %-12s %9s %12s %12s %12s %12s %12s %12s %12s %7s %10s\n", "stage", "blocks",
              p.chunks > 1 ? "chunks" : "in-flight", "held/mb", "weights", "gradients", "optimizer", "activations",
              "buffers", "peak", "idle", "recompute");
  for (const StageReport& s : r.stages)
    std::printf("%5d %-12s %9d %12s %12s %12s %12s %12s %12s %12s %6.1f%% %9.1f%%\n", s.stage, blocks_text(s).c_str(),
                s.in_flight, format_bytes(s.held_per_micro_batch).c_str(), format_bytes(s.weights).c_str(),
                format_bytes(s.gradients).c_str(), format_bytes(s.optimizer).c_str(), format_bytes(s.activations).c_str(),
                format_bytes(s.buffers).c_str(), format_bytes(s.peak()).c_str(), 100.0 * s.idle,
                100.0 * s.recompute_overhead);
}

}  // namespace

void print_parallel(const std::string& model, const std::string& parallel, const std::vector<std::string>& strategies,
                    Optimizer optimizer, const TimeModel& time, const InstructionLimit& limit, bool json,
                    const std::string& csv) {
  const ParallelSpec p = parse_parallel_spec(parallel);
  std::vector<ParallelReport> reports;
  for (const std::string& s : strategies) reports.push_back(simulate_parallel(model, p, s, time, limit, optimizer));
  if (!csv.empty()) {  // after every simulation: a refused one leaves no file
    write_file_atomically(csv, [&](std::ostream& out) { write_stages_csv(out, reports); });
    write_file_atomically(timeline_path(csv), [&](std::ostream& out) { write_timelines_csv(out, reports); });
  }
  if (json) {
    nlohmann::json out = {{"model", model},
                          {"parallel", parallel_spec_text(p)},
                          {"optimizer", std::string(optimizer_name(optimizer))},
                          {"device_flops", time.device_flops},
                          {"grid", grid_json(reports.front().grid)},
                          {"strategies", nlohmann::json::array()}};
    for (const ParallelReport& r : reports) {
      nlohmann::json stages = nlohmann::json::array();
      for (const StageReport& s : r.stages) stages.push_back(stage_json(s, r.timelines[static_cast<std::size_t>(s.stage)]));
      out["strategies"].push_back(
          {{"name", r.strategy}, {"step_s", r.step_s}, {"bubble_fraction", r.bubble_fraction}, {"stages", stages}});
    }
    std::cout << out.dump() << "\n";
    return;
  }
  const int ranks = p.tp * p.pp * p.dp;
  const DType dtype = reports.front().dtype;
  const bool mixed = (optimizer == Optimizer::Adam || optimizer == Optimizer::AdamW) && (dtype == DType::F16 || dtype == DType::BF16);
  std::printf("model %s, %s: %d ranks (%d stages of %d tensor- x %d data-parallel); per rank of each stage, %s%s\n",
              model.c_str(), parallel_spec_text(p).c_str(), ranks, p.pp, p.tp, p.dp,
              std::string(optimizer_name(optimizer)).c_str(),
              mixed ? " (mixed precision: fp32 master weights beside the 16-bit ones)" : "");
  for (const ParallelReport& r : reports) {
    print_table(r, time);
    // Zero-bubble: the table's activations are 1F1B-like counts of B's
    // micro-batches; the timeline adds those waiting for their W.
    if (p.schedule == PipelineSchedule::ZbH1 || p.schedule == PipelineSchedule::ZbH2) {
      std::printf("with the micro-batches waiting for their W (the per-stage timeline):");
      for (const StageTimeline& t : r.timelines)
        std::printf("%s stage %d %s", t.stage ? "," : "", t.stage, format_bytes(t.peak_bytes).c_str());
      std::printf("\n");
    }
  }
  std::printf("\nheld/mb: what one micro-batch%s keeps from its forward to its backward; activations: (in-flight - 1) x "
              "held/mb + one micro-batch's own peak; buffers: %s\n",
              p.chunks > 1 ? " chunk" : "",
              p.sp ? (p.zero == 3 ? "the sequence-parallel all-gather buffer and ZeRO-3's gathered module"
                                  : "the sequence-parallel all-gather buffer")
                   : (p.zero == 3 ? "ZeRO-3's gathered module" : "none counted"));
}

}  // namespace remat::cli
