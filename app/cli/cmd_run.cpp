// remat run: execute strategies for real on a backend and put the measured
// memory and time beside the simulator's prediction (docs/run.md).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/backend_choice.h"
#include "app/cli/commands.h"
#include "app/cli/mixed_paths.h"
#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/exec/executor.h"
#include "core/exec/run_session.h"
#include "core/exec/safetensors.h"
#include "core/io/run_trace.h"
#include "core/exec/same_result.h"
#include "core/exec/instruction_gate.h"
#include "core/io/model_source.h"
#include "core/base/spec_parse.h"
#include "core/strategies/registry.h"

namespace remat::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string strategies = "all";
  std::string backend = "auto";
  int repeat = 3;
  uint64_t seed = 1;
  bool json = false;
  std::string dump;
  std::string memory_limit;
  bool sync_each = false;
  bool replay = false;  // --replay-decisions
  bool nondeterministic_backward = false;
  InstructionLimit limit;
  std::string trace;
  TimeModelFlags time;
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A bar on stderr: always on a terminal; elsewhere (logs, CI) only once a run
// has taken over a second, as a line per 10%.
class ProgressBar {
 public:
  ProgressBar(std::vector<std::string> labels) : labels_(std::move(labels)), tty_(::isatty(2) != 0) {}
  bool operator()(double f) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const std::size_t n = labels_.size();
    const std::string& label = labels_[std::min(n - 1, static_cast<std::size_t>(f * static_cast<double>(n)))];
    if (tty_) {
      if (f < 1.0 && now - last_ < std::chrono::milliseconds(100)) return true;
      last_ = now;
      const int width = 30, filled = static_cast<int>(f * width);
      std::fprintf(stderr, "\r[%s%s] %3d%% %-24s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), static_cast<int>(100 * f),
                   label.c_str());
      drawn_ = true;
    } else if (elapsed > 1.0 && static_cast<int>(f * 10) > last_decile_) {
      last_decile_ = static_cast<int>(f * 10);
      std::fprintf(stderr, "remat: run %3d%% (%s)\n", 10 * last_decile_, label.c_str());
    }
    return true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  std::vector<std::string> labels_;
  bool tty_;
  bool drawn_ = false;
  int last_decile_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

struct Row {
  const StrategyRun* sim;
  const ExecResult* exec;
  bool reference;  // store-all added only to compare against
};

// Strategies that offload: both tiers predicted and measured, and the time
// model's step beside the measured transfers.
void print_host_tier_table(const std::vector<Row>& rows) {
  if (std::none_of(rows.begin(), rows.end(), [](const Row& r) { return r.sim->sim.transfers > 0 && r.exec->ok(); }))
    return;
  std::printf("\nhost tier (offload): predicted and tracked per tier, the host pool's allocator, the time model\n");
  std::printf("%-16s %14s %14s %14s %14s %14s %11s %11s %11s %12s\n", "strategy", "device pred.", "device tracked",
              "host pred.", "host tracked", "host alloc.", "pred. step", "pred. stall", "transfers", "measured");
  for (const auto& r : rows) {
    const ExecResult& e = *r.exec;
    const Simulation& s = r.sim->sim;
    if (s.transfers == 0 || !e.ok()) continue;
    char measured[32];
    std::snprintf(measured, sizeof measured, "%.3f ms", e.transfer_ms);
    std::printf("%-16s %14s %14s %14s %14s %14s %11s %11s %11lld %12s\n", r.sim->name.c_str(),
                format_bytes(s.peak_bytes).c_str(), format_bytes(e.tracked_peak_bytes).c_str(),
                format_bytes(s.peak_host_bytes).c_str(), format_bytes(e.host_tracked_peak_bytes).c_str(),
                format_bytes(e.host_memory.allocator_peak).c_str(), format_seconds(s.time.step_s).c_str(),
                format_seconds(s.time.stall_s).c_str(), static_cast<long long>(s.transfers), measured);
  }
  std::printf("measured: the offload and fetch instructions' own time (the CPU copies synchronously)\n");
}

// --nondeterministic-backward: what the backend ran non-deterministically for
// this model (one backend, one load: the same list in every result that ran),
// empty when nothing; then every result is held to store-all's loss bits
// alone (the forward does not change) and its gradients' error is reported.
std::vector<std::string> nondeterministic_of(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    if (!r.exec->nondeterministic.empty()) return r.exec->nondeterministic;
  return {};
}

// The guarantees a non-deterministic backward drops, and those it keeps.
const char* const kDropped[] = {"parameter gradients bitwise equal across strategies",
                                "parameter gradients bitwise equal from run to run"};
const char* const kKept = "the forward, the loss and every recomputation stay bit-identical";

// What the run says of --nondeterministic-backward where nothing changed.
std::string nothing_nondeterministic(const std::string& backend) {
  return backend == "cpu" ? "the CPU backend has no non-deterministic backward; gradients stay bitwise reproducible"
                          : "nothing in this model has a non-deterministic backward on this backend; gradients stay "
                            "bitwise reproducible";
}

// "same" (same_result.h's sameness): bitwise equal to store-all ("yes"/"NO"),
// or for a compressed strategy, which is not expected to be, "~" (its error
// is the table below); under a non-deterministic backward, "loss" where the
// loss has store-all's bits and the gradients do not (their error is a table
// below too).
const char* same_column(const ExecResult& e, const ExecResult& ref) {
  switch (sameness(e, ref)) {
    case Sameness::NoReference: return "-";
    case Sameness::Bitwise: return "yes";
    case Sameness::Compressed: return "~";
    case Sameness::LossOnly: return "loss";
    case Sameness::Differs: break;
  }
  return "NO";
}

// Under a non-deterministic backward: the gradients' relative error against
// store-all's, strategy by strategy (compressed ones are in their own table).
void print_nondeterministic_table(const Model& model, const std::vector<Row>& rows, const ExecResult& ref) {
  auto listed = [&ref](const Row& r) {
    return r.exec != &ref && r.exec->ok() && !r.exec->compressed &&
           (!r.exec->nondeterministic.empty() || !ref.nondeterministic.empty());
  };
  if (!ref.ok() || std::none_of(rows.begin(), rows.end(), listed)) return;
  const auto params = parameter_tensors(model);
  std::printf("\nnon-deterministic backward: gradients against store-all (the largest over parameter tensors of "
              "||g - g_ref||2 / ||g_ref||2); the loss must keep store-all's bits\n");
  int w = 16;
  for (const auto& r : rows) w = std::max(w, static_cast<int>(r.sim->name.size()) + 1);
  std::printf("%-*s %10s %14s  %s\n", w, "strategy", "loss", "grad error", "worst parameter");
  for (const auto& r : rows) {
    if (!listed(r)) continue;
    const ResultError e = relative_error(*r.exec, ref);
    std::printf("%-*s %10s %14.3e  %s\n", w, r.sim->name.c_str(), same_loss(*r.exec, ref) ? "same bits" : "DIFFERS",
                e.grad, params.empty() || e.grad == 0 ? "-" : params[e.worst].name.c_str());
  }
  std::printf("loss (in 'same'): the loss has store-all's bits, the gradients differ by the order of the backward's "
              "sums\n");
}

// Compressed strategies: how far their loss and gradients are from store-all's,
// and their conversions: the time model's prediction beside the measured time.
void print_error_table(const Model& model, const std::vector<Row>& rows, const ExecResult& ref) {
  if (!ref.ok() || std::none_of(rows.begin(), rows.end(), [](const Row& r) { return r.exec->ok() && r.exec->compressed; }))
    return;
  const auto params = parameter_tensors(model);
  std::printf("\ncompressed checkpoints: relative error against store-all (loss: |l - l_ref| / |l_ref|; gradients: the "
              "largest over parameter tensors of ||g - g_ref||2 / ||g_ref||2)\n");
  int w = 16;
  for (const auto& r : rows) w = std::max(w, static_cast<int>(r.sim->name.size()) + 1);
  std::printf("%-*s %14s %14s %11s %13s %12s  %s\n", w, "strategy", "loss error", "grad error", "conversions",
              "pred. convert", "measured", "worst parameter");
  for (const auto& r : rows) {
    if (!r.exec->ok() || !r.exec->compressed) continue;
    const ResultError e = relative_error(*r.exec, ref);
    char measured[32];
    std::snprintf(measured, sizeof measured, "%.3f ms", r.exec->convert_ms);
    std::printf("%-*s %14.3e %14.3e %11lld %13s %12s  %s\n", w, r.sim->name.c_str(), e.loss, e.grad,
                static_cast<long long>(r.exec->conversions), format_seconds(r.sim->sim.time.convert_s).c_str(), measured,
                params.empty() ? "-" : params[e.worst].name.c_str());
  }
  std::printf("~: compressed, not expected to be bitwise equal; exactly reproducible run to run\n");
  std::printf("conversions: compress and decompress instructions; pred. convert: the time model's (bytes read and "
              "written over --device-bandwidth); measured: their own time on this backend\n");
}

// An f16 model runs with GradScaler's loss scale: say so, and which steps it would skip.
void print_loss_scale(const std::vector<Row>& rows) {
  const ExecResult* scaled = nullptr;
  std::string skipped;
  for (const auto& r : rows) {
    if (!r.exec->ok() || (r.exec->loss_scale == 1.0f && r.exec->loss_scale_backoffs == 0)) continue;
    scaled = r.exec;
    if (r.exec->step_skipped) skipped += (skipped.empty() ? "" : ", ") + r.sim->name;
  }
  if (!scaled) return;
  std::printf("loss scale %g: GradScaler's 65536 for f16, halved %d time(s) in the warm-up while gradients "
              "overflowed; gradients shown unscaled; %s\n",
              static_cast<double>(scaled->loss_scale), scaled->loss_scale_backoffs,
              skipped.empty() ? "every gradient is finite"
                              : ("still non-finite, a step GradScaler skips: " + skipped).c_str());
}

void print_table(const Model& model, const std::string& backend, const RunOptions& o, const std::vector<Row>& rows,
                 const ExecResult& ref) {
  std::printf("model %s: %d ops; backend %s; seed %llu; median of %d run%s after a warm-up\n", model.name.c_str(),
              model.size(), backend.c_str(), static_cast<unsigned long long>(o.seed), o.repeat,
              o.repeat == 1 ? "" : "s");
  for (const MixedPathReport& p : mixed_path_reports(model, backend))
    if (!p.line.empty()) std::printf("%s\n", p.line.c_str());
  if (o.nondeterministic_backward) {
    const std::vector<std::string> what = nondeterministic_of(rows);
    if (what.empty()) {
      std::printf("--nondeterministic-backward: %s\n", nothing_nondeterministic(backend).c_str());
    } else {
      std::printf("--nondeterministic-backward: dropped: %s, %s; kept: %s\n", kDropped[0], kDropped[1], kKept);
      for (const std::string& line : what) std::printf("  %s\n", line.c_str());
    }
  }
  std::printf("baseline outside the strategies (parameters, their gradients, target, loss, constants): %s\n",
              format_bytes(baseline_bytes_of(model)).c_str());
  // The strategy column fits the longest name (offload+sqrt+compress:f16).
  int w = 16;
  for (const auto& r : rows) w = std::max(w, static_cast<int>(r.sim->name.size()) + 1);
  std::printf("%-*s %14s %14s %14s %14s %11s %9s %9s %13s %16s %5s\n", w, "strategy", "predicted peak", "tracked peak",
              "allocator peak", "reserved peak", "time", "vs store", "recompute", "loss", "grad hash", "same");
  for (const auto& r : rows) {
    const ExecResult& e = *r.exec;
    const std::string name = r.sim->name + (r.reference ? "*" : "");
    if (!e.ok()) {
      std::printf("%-*s %14s  %s\n", w, name.c_str(), format_bytes(r.sim->sim.peak_bytes).c_str(), e.message.c_str());
      continue;
    }
    char time[32], ratio[32] = "-", rec[32];
    std::snprintf(time, sizeof time, "%.3f ms", e.time_ms);
    if (ref.ok() && ref.time_ms > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", e.time_ms / ref.time_ms);
    std::snprintf(rec, sizeof rec, "%.1f%%", 100 * e.recompute_share);
    std::printf("%-*s %14s %14s %14s %14s %11s %9s %9s %13.7g %16s %5s\n", w, name.c_str(),
                format_bytes(r.sim->sim.peak_bytes).c_str(), format_bytes(e.tracked_peak_bytes).c_str(),
                format_bytes(e.memory.allocator_peak).c_str(), format_bytes(e.memory.reserved_peak).c_str(), time,
                ratio, rec, static_cast<double>(e.loss), hex64(e.grad_hash).c_str(), same_column(e, ref));
  }
  if (rows.front().reference) std::printf("* store-all: added as the reference for 'vs store' and 'same'\n");
  std::string live;
  for (const Row& r : rows)
    if (r.exec->ok() && r.exec->decided_live) live += (live.empty() ? "" : ", ") + r.sim->name;
  if (!live.empty())
    std::printf("%s: decided inside the run from the allocator's count, as simulated (--replay-decisions replays)\n",
                live.c_str());
  print_loss_scale(rows);
  print_error_table(model, rows, ref);
  print_nondeterministic_table(model, rows, ref);

  print_host_tier_table(rows);

  // Where each allocator peak goes: the prediction is the tensors part.
  if (std::none_of(rows.begin(), rows.end(), [](const Row& r) { return r.exec->ok(); })) return;
  std::printf("\nallocator peak, part by part (bytes as asked; rounding: the allocator's own)\n");
  std::printf("%-*s %14s %14s %14s %12s %12s %12s %14s\n", w, "strategy", "allocator peak", "baseline", "tensors",
              "scratch", "workspace", "rounding", "device used");
  for (const auto& r : rows) {
    const ExecResult& e = *r.exec;
    if (!e.ok()) continue;
    const MemoryStats& m = e.memory;
    std::printf("%-*s %14s %14s %14s %12s %12s %12s %14s\n", w, (r.sim->name + (r.reference ? "*" : "")).c_str(),
                format_bytes(m.allocator_peak).c_str(), format_bytes(m.baseline).c_str(),
                format_bytes(m.tensors).c_str(), format_bytes(m.scratch).c_str(), format_bytes(m.workspace).c_str(),
                format_bytes(m.rounding()).c_str(), m.device_used ? format_bytes(m.device_used).c_str() : "-");
  }
}

nlohmann::json run_json(const Model& model, const std::string& backend, const RunOptions& o, uint64_t limit,
                        const std::vector<Row>& rows, const ExecResult& ref) {
  nlohmann::json strategies = nlohmann::json::array();
  for (const auto& r : rows) {
    const ExecResult& e = *r.exec;
    nlohmann::json j = {{"name", r.sim->name},
                        {"status", exec_status_name(e.status)},
                        {"backend", e.backend},
                        {"reference_only", r.reference},
                        {"predicted_peak_bytes", r.sim->sim.peak_bytes},
                        {"baseline_bytes", e.baseline_bytes}};
    if (!e.ok()) {
      j["message"] = e.message;
      if (e.status == ExecStatus::OutOfMemory)
        j["oom"] = {{"instruction", e.oom_instruction}, {"needed_bytes", e.oom_needed}, {"free_bytes", e.oom_free}};
      strategies.push_back(std::move(j));
      continue;
    }
    const MemoryStats& m = e.memory;
    j["tracked_peak_bytes"] = e.tracked_peak_bytes;
    j["allocator_peak_bytes"] = m.allocator_peak;
    j["reserved_peak_bytes"] = m.reserved_peak;
    j["device_used_bytes"] = m.device_used ? nlohmann::json(m.device_used) : nlohmann::json();
    j["allocator_parts"] = {{"baseline_bytes", m.baseline},   {"tensor_bytes", m.tensors},
                            {"scratch_bytes", m.scratch},     {"workspace_bytes", m.workspace},
                            {"rounding_bytes", m.rounding()}};
    j["time_ms"] = e.time_ms;
    j["run_ms"] = e.run_ms;
    j["issue_ms"] = e.issue_time_ms;
    j["overhead_vs_store_all"] = ref.ok() && ref.time_ms > 0 ? nlohmann::json(e.time_ms / ref.time_ms) : nlohmann::json();
    j["recompute_ms"] = e.recompute_ms;
    j["recompute_share"] = e.recompute_share;
    j["loss"] = e.loss;
    j["grad_hash"] = hex64(e.grad_hash);
    j["loss_scale"] = e.loss_scale;
    j["step_skipped"] = e.step_skipped;
    j["loss_scale_backoffs"] = e.loss_scale_backoffs;
    j["matches_store_all"] = ref.ok() ? nlohmann::json(same_loss_and_grads(e, ref)) : nlohmann::json();
    j["loss_matches_store_all"] = ref.ok() ? nlohmann::json(same_loss(e, ref)) : nlohmann::json();
    j["compressed"] = e.compressed;
    j["decided_at_run_time"] = e.decided_live;
    if ((e.compressed || !e.nondeterministic.empty() || !ref.nondeterministic.empty()) && ref.ok()) {
      const ResultError err = relative_error(e, ref);
      const auto params = parameter_tensors(model);
      j["relative_error"] = {{"loss", err.loss},
                             {"grad", err.grad},
                             {"grad_norm", "l2"},
                             {"worst_parameter", params.empty() ? nlohmann::json() : nlohmann::json(params[err.worst].name)}};
    } else {
      j["relative_error"] = nullptr;
    }
    j["instr_ms"] = e.instr_ms;
    const Simulation& s = r.sim->sim;
    j["predicted_peak_host_bytes"] = s.peak_host_bytes;
    j["tracked_peak_host_bytes"] = e.host_tracked_peak_bytes;
    j["host_allocator_peak_bytes"] = e.host_memory.allocator_peak;
    j["transfers"] = s.transfers;
    j["transfer_ms"] = e.transfer_ms;
    j["conversions"] = e.conversions;
    j["convert_ms"] = e.convert_ms;
    j["predicted_time"] = {{"compute_s", s.time.compute_s}, {"convert_s", s.time.convert_s},
                           {"transfer_s", s.time.transfer_s}, {"stall_s", s.time.stall_s}, {"step_s", s.time.step_s}};
    strategies.push_back(std::move(j));
  }
  nlohmann::json out = {{"model", model_json(model)},
          {"backend", backend},
          {"seed", o.seed},
          {"repeat", o.repeat},
          {"memory_limit_bytes", limit ? nlohmann::json(limit) : nlohmann::json()},
          {"sync_each", o.sync_each}};
  for (MixedPathReport& p : mixed_path_reports(model, backend)) out[p.key] = std::move(p.json);
  // --nondeterministic-backward: what ran that way and which guarantees it
  // dropped (both empty when nothing did), with the run's note then.
  const std::vector<std::string> what = nondeterministic_of(rows);
  nlohmann::json dropped = nlohmann::json::array();
  if (!what.empty())
    for (const char* d : kDropped) dropped.push_back(d);
  out["nondeterministic_backward"] = {
      {"requested", o.nondeterministic_backward},
      {"algorithms", what},
      {"dropped_guarantees", std::move(dropped)},
      {"kept_guarantees", what.empty() ? nlohmann::json::array() : nlohmann::json::array({kKept})},
      {"note", o.nondeterministic_backward && what.empty() ? nlohmann::json(nothing_nondeterministic(backend))
                                                           : nlohmann::json()}};
  out["strategies"] = std::move(strategies);
  return out;
}

void run_run(const RunOptions& o) {
  const BackendKind kind = parse_backend_kind(o.backend);
  if (kind != BackendKind::Cpu) {  // a bad REMAT_CUDA_GEMM, _CONV, _POINTWISE or _GATE fails before any work
    (void)gemm_mode_from_env();
    (void)conv_mode_from_env();
    (void)pointwise_mode_from_env();
    (void)gate_from_env();
  }
  if (o.repeat < 1 || o.repeat > 10000) throw InputError("--repeat must be between 1 and 10000");
  // Larger seeds could alias another (seed, op) pair in the dropout RNG (core/kernels/rng.h).
  if (o.seed >= (uint64_t{1} << 32)) throw InputError("--seed must be below 2^32 (4294967296)");
  // A share (--memory-limit 50%) is of store-all's peak, known once the model
  // is loaded; checked here against a stand-in, so that it fails before any work.
  if (!o.memory_limit.empty() && parse_budget(o.memory_limit, "--memory-limit", uint64_t{1} << 50) == 0)
    throw InputError("--memory-limit must be positive");
  if (!o.trace.empty()) check_trace_path(o.trace);
  const TimeModel tm = time_model_of(o.time);
  const Model model = load_model(o.model);
  // The session checks the model and makes each strategy (a bad name fails
  // before any work), store-all first as the reference for time overhead and
  // bitwise equality when it was not asked for.
  const std::vector<std::string> specs = resolve_budget_shares(model, expand_strategy_list(o.strategies));
  const uint64_t limit = o.memory_limit.empty() ? 0
                         : parse_budget(o.memory_limit, "--memory-limit",
                                        o.memory_limit.back() == '%' ? store_all_peak(model) : 0);
  if (!o.memory_limit.empty() && limit == 0) throw InputError("--memory-limit must be positive (" + o.memory_limit + " of store-all's peak is 0 bytes)");
  RunSessionOptions so;
  so.backend = kind;
  so.limit = o.limit;
  so.time = tm;
  so.record_trace = !o.trace.empty();  // --trace: what each instruction allocated and measured
  so.decide_live = !o.replay;
  RunSession session(model, specs, so);
  if (specs.empty()) throw InputError("--strategy: no strategy given");
  // Before the (possibly long) simulations: an explicit --backend cuda without
  // a device fails at once.
  try {
    (void)session.open_backend();
  } catch (const NoUsableGpu& e) {
    throw no_cuda_error(e);
  }
  if (!session.no_gpu().empty()) std::cerr << no_gpu_notice(session.no_gpu());
  session.plan();

  ProgressBar bar(session.names());
  std::atomic<bool>& cancel = g_interrupted;
  cancel = false;
  auto previous = std::signal(SIGINT, on_sigint);
  ExecOptions eo;
  eo.seed = o.seed;
  eo.repeat = o.repeat;
  eo.memory_limit = limit;
  eo.cancel = &cancel;
  eo.progress = [&bar](double f) { return bar(f); };
  eo.sync_each = o.sync_each;
  eo.nondeterministic_backward = o.nondeterministic_backward;
  RunSessionResult run;
  try {
    run = session.run(eo);
  } catch (...) {
    bar.finish();
    std::signal(SIGINT, previous);
    throw;
  }
  bar.finish();
  std::signal(SIGINT, previous);

  const std::vector<StrategyRun>& sims = run.plans;
  const std::vector<ExecResult>& results = run.results;
  const bool added_reference = run.reference_added;
  const ExecResult& ref = run.reference_result();
  std::vector<Row> rows;
  for (std::size_t i = 0; i < sims.size(); ++i) rows.push_back({&sims[i], &results[i], added_reference && i == 0});

  if (!o.dump.empty()) {
    // The first strategy the user asked for that ran and does not compress;
    // all of those agree bit for bit anyway (but for the gradients' last bits
    // under a non-deterministic backward). A compressed one only when no
    // other ran (its gradients carry its rounding: the cross-check would fail).
    const ExecResult* chosen = nullptr;
    for (bool compressed : {false, true}) {
      for (std::size_t i = added_reference ? 1 : 0; i < results.size() && !chosen; ++i) {
        if (results[i].ok() && results[i].compressed == compressed) chosen = &results[i];
      }
      if (!chosen && added_reference && results[0].ok() && !compressed) chosen = &results[0];
    }
    if (!chosen) throw InputError("--dump: no strategy ran to completion, nothing to dump");
    const std::string warning = write_execution_dump(o.dump, model, run.data, *chosen);
    if (!warning.empty()) std::cerr << "remat: warning: " << warning << "\n";
  }

  if (!o.trace.empty()) write_run_trace(o.trace, model, run.backend, sims, results, run.recorded);
  if (o.json) std::cout << run_json(model, run.backend, o, limit, rows, ref).dump() << "\n";
  else print_table(model, run.backend, o, rows, ref);
  std::cout.flush();

  if (cancel.load()) {
    std::cerr << "remat: interrupted\n";
    std::exit(130);
  }
  for (const auto& r : results) {
    if (r.status == ExecStatus::Failed || r.status == ExecStatus::NotRun)
      throw Failure("strategy '" + r.strategy + "' " + (r.status == ExecStatus::Failed ? "failed: " : "") + r.message);
  }
  for (const auto& r : results) {
    if (!r.ok() || sameness(r, ref) != Sameness::Differs) continue;
    // A non-deterministic backward keeps the forward: the loss's bits still must match.
    if (!r.nondeterministic.empty())
      throw std::runtime_error("strategy '" + r.strategy +
                               "' gave a different loss than store-all: the forward is not deterministic on this "
                               "backend (--nondeterministic-backward changes only the backward)");
    throw std::runtime_error("strategy '" + r.strategy +
                             "' gave a different loss or gradients than store-all: recomputation is not "
                             "deterministic on this backend");
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Execute strategies on the CPU or GPU and measure memory and time");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16:256, mlp:8:1024:64, transformer:2) or a .json/.onnx file")
      ->required();
  const std::string names = strategy_help();
  cmd->add_option("-s,--strategy", o->strategies,
                  "Comma-separated strategies, 'all' among them standing for every one that takes no argument (all,offload):" + names)
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, "auto (CUDA when a GPU answers, else the CPU), cpu or cuda")->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "Timed runs per strategy after one warm-up; the median is reported")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the input, target, parameters and dropout masks")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON {model, backend, strategies:[{name, predicted_peak_bytes, ...}]}");
  cmd->add_option("--dump", o->dump,
                  "Write DIR/model.json and DIR/tensors.safetensors (input, target/labels, parameters, dropout masks, "
                  "loss, parameter gradients) to rebuild the step elsewhere (docs/run.md)");
  cmd->add_option("--memory-limit", o->memory_limit,
                  "Activation bytes allowed (e.g. 1048576, 512K, 1.5M, 2G, or 50% of store-all's peak); a strategy that needs more reports "
                  "out-of-memory");
  cmd->add_flag("--sync-each", o->sync_each,
                "Wait for the device after every instruction, so that a kernel fault names the instruction that "
                "launched it (slower; CUDA)");
  cmd->add_flag("--replay-decisions", o->replay,
                "A strategy that decides while the step runs (dtr) replays its simulated schedule instead of "
                "deciding inside the run from the allocator's count (to time what deciding costs)");
  cmd->add_flag("--nondeterministic-backward", o->nondeterministic_backward,
                "Let the backward run faster non-deterministic algorithms (CUDA: cuDNN's fastest convolution "
                "backward, atomic embedding gradients): gradients may then differ in their last bits between "
                "strategies and runs; the forward, the loss and every recomputation stay bit-identical, and the run "
                "says what it dropped (the CPU has none: nothing changes)");
  add_max_instructions_option(cmd, o->limit);
  add_time_model_options(cmd, o->time);
  cmd->add_option("--trace", o->trace,
                  "Write a Chrome/Perfetto trace (.json): a slice per instruction with measured times, counters of "
                  "resident bytes predicted and measured (docs/pytorch.md)");
  cmd->callback([o] { run_run(*o); });
}

}  // namespace remat::cli
