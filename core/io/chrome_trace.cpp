#include "core/io/chrome_trace.h"

#include "core/model/model.h"

namespace remat {

nlohmann::json chrome_trace(const Model& model, const std::string& backend, const std::vector<TracedStrategy>& runs) {
  using nlohmann::json;
  json events = json::array();
  for (std::size_t s = 0; s < runs.size(); ++s) {
    const StrategyRun& sim = *runs[s].sim;
    const ExecResult& exec = *runs[s].exec;
    const int pid = static_cast<int>(s) + 1;
    const std::string status = exec.ok() ? "" : " [" + std::string(exec_status_name(exec.status)) + ": " + exec.message + "]";
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", "remat run " + sim.name + " (" + backend + ")" + status}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", "instructions"}}}});
    if (!exec.ok() || exec.instr_ms.size() != sim.schedule.code.size()) continue;
    const auto& code = sim.schedule.code;
    // Measured resident bytes per instruction: the allocator's high-water mark
    // of bytes in use while it ran, less the baseline (what the prediction leaves out).
    const RecordedRun* rec = runs[s].recorded;
    const bool measured = rec && rec->intervals.size() >= code.size() + 1;
    std::vector<uint8_t> computed(static_cast<std::size_t>(model.size()), 0);
    computed[0] = 1;
    double ts = 0;  // µs: the mean time of each instruction over the timed runs, end to end
    for (std::size_t i = 0; i < code.size(); ++i) {
      const Instr ins = code[i];
      const Op& op = model.op(ins.op);
      const bool recompute = ins.kind == InstrKind::Fwd && computed[static_cast<std::size_t>(ins.op)];
      if (ins.kind == InstrKind::Fwd) computed[static_cast<std::size_t>(ins.op)] = 1;
      const double dur = 1000.0 * exec.instr_ms[i];
      json args = {{"instruction", i},
                   {"op", op.name},
                   {"op_id", ins.op},
                   {"op_kind", std::string(kind_name(op.kind))},
                   {"kind", std::string(instr_kind_name(ins.kind))},
                   {"recompute", recompute},
                   {"predicted_bytes", sim.sim.timeline[i]}};
      if (exec.instr_issue_ms.size() == code.size()) args["issue_us"] = 1000.0 * exec.instr_issue_ms[i];
      uint64_t m = 0;
      if (measured) {
        const MemoryStats& st = rec->intervals[i + 1];
        m = st.allocator_peak > st.baseline ? st.allocator_peak - st.baseline : 0;
        args["measured_bytes"] = m;
      }
      events.push_back({{"name", to_string(ins, model) + (recompute ? " (recompute)" : "")},
                        {"cat", std::string(instr_kind_name(ins.kind)) + (recompute ? ",recompute" : "")},
                        {"ph", "X"}, {"ts", ts}, {"dur", dur}, {"pid", pid}, {"tid", 1}, {"args", std::move(args)}});
      events.push_back({{"name", "resident bytes (predicted)"}, {"ph", "C"}, {"ts", ts}, {"pid", pid}, {"tid", 0},
                        {"args", {{"bytes", sim.sim.timeline[i]}}}});
      if (measured)
        events.push_back({{"name", "resident bytes (measured)"}, {"ph", "C"}, {"ts", ts}, {"pid", pid}, {"tid", 0},
                          {"args", {{"bytes", m}}}});
      ts += dur;
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"tool", "remat run --trace"}, {"model", model.name}, {"backend", backend}}}};
}

}  // namespace remat
