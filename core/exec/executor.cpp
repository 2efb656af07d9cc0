#include "core/exec/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/sim/compression.h"
#include "core/base/errors.h"
#include "core/exec/op_exec.h"
#include "core/exec/schedule_run.h"
#include "core/sim/instr_reads.h"
#include "core/kernels/rng.h"
#include "core/model/op_rules.h"
#include "core/sim/simulator.h"
#include "core/strategies/strategy.h"

namespace remat {
namespace {

struct Cancelled {};

std::string bytes_str(uint64_t b) { return std::to_string(b) + " bytes"; }

}  // namespace

std::string_view exec_status_name(ExecStatus s) {
  switch (s) {
    case ExecStatus::Ok: return "ok";
    case ExecStatus::OutOfMemory: return "out-of-memory";
    case ExecStatus::Cancelled: return "cancelled";
    case ExecStatus::Failed: return "failed";
    case ExecStatus::NotRun: return "not-run";
  }
  return "failed";
}

ExecResult execute(const Model& model, const Schedule& schedule, Backend& backend, const ExecOptions& options) {
  const HostData data = make_host_data(model, options.seed);
  backend.compute().allow_nondeterministic_backward(options.nondeterministic_backward);
  backend.compute().load(model, data);
  return execute_loaded(model, schedule, backend, data, options);
}

namespace {

// Which fwd instructions recompute (their op was computed before).
std::vector<uint8_t> recompute_flags(const Model& model, const Schedule& schedule) {
  std::vector<uint8_t> recompute(schedule.code.size(), 0);
  std::vector<uint8_t> computed(static_cast<std::size_t>(model.size()), 0);
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    if (schedule.code[i].kind != InstrKind::Fwd) continue;
    auto& c = computed[static_cast<std::size_t>(schedule.code[i].op)];
    recompute[i] = c;
    c = 1;
  }
  return recompute;
}

std::string where_str(int64_t instruction, const Schedule& schedule, const Model& model) {
  return instruction < 0 ? std::string("before the first instruction")
                         : "at instruction " + std::to_string(instruction) + " (" +
                               to_string(schedule.code[static_cast<std::size_t>(instruction)], model) + ")";
}

std::string oom_message(const TensorOutOfMemory& oom, const std::string& what, const Schedule& schedule,
                        const Model& model, uint64_t limit) {
  std::string free_part;
  if (limit) free_part = ", " + bytes_str(oom.free) + " free under the limit of " + bytes_str(limit);
  else if (oom.free == std::numeric_limits<uint64_t>::max()) free_part = ", the device could not provide it";
  else free_part = ", " + bytes_str(oom.free) + " free on the device";
  const std::string needed = oom.needed ? "needed " + bytes_str(oom.needed) + " " : std::string("needed more memory ");
  return "out of memory: " + needed + what + where_str(oom.instruction, schedule, model) + free_part;
}

// What the executor needs of the backend and the options before a schedule
// runs (the schedule itself is valid: `sim` is simulate()'s result for it):
// the host tier and the conversions it uses.
void check_runnable(const Schedule& schedule, const Simulation& sim, Backend& backend, const ExecOptions& options) {
  if (options.repeat < 1) throw InputError("repeat must be at least 1, got " + std::to_string(options.repeat));
  if (sim.transfers > 0 && !backend.host().has_host_tier())
    throw InputError("the " + backend.name() + " backend has no host tier: strategy '" + schedule.strategy +
                     "' offloads tensors to host memory");
  if (sim.conversions > 0 && !backend.host().can_compress())
    throw InputError("the " + backend.name() + " backend cannot convert tensors: strategy '" + schedule.strategy +
                     "' compresses checkpoints");
}

// Progress over all runs of one schedule, in units of marks, and cancellation.
class RunProgress {
 public:
  RunProgress(const ExecOptions& options, std::size_t runs, std::size_t instructions)
      : options_(options), instructions_(instructions),
        total_units_(static_cast<double>(runs * (instructions + 1))),
        report_every_(std::max<std::size_t>(1, instructions / 100)) {}
  void check_cancel() const {
    if (options_.cancel && options_.cancel->load(std::memory_order_relaxed)) throw Cancelled{};
  }
  // After instruction i of run `run`: reported every 1/100 of the schedule.
  void after_instruction(std::size_t run, std::size_t i) {
    if (options_.progress && (i + 1) % report_every_ == 0)
      report(static_cast<double>(run * (instructions_ + 1) + i + 1));
  }
  void after_run(std::size_t run) { report(static_cast<double>((run + 1) * (instructions_ + 1))); }

 private:
  void report(double units) {
    const double f = std::min(1.0, units / total_units_);
    if (options_.progress && f >= last_fraction_) {
      last_fraction_ = f;
      if (!options_.progress(f)) throw Cancelled{};
    }
  }
  const ExecOptions& options_;
  std::size_t instructions_;
  double total_units_;
  std::size_t report_every_;
  double last_fraction_ = 0;
};

// A strategy deciding at run time handed over another instruction than its
// simulated schedule has: the run stops (ExecStatus::Failed, this message).
struct LiveDecisionDiffers {
  std::string what;
};

// One run (the warm-up or a timed one): every instruction between marks,
// then the memory figures into `res`. `at` follows the running instruction
// for the error messages. Returns the mark times.
std::vector<double> run_once(const Model& model, const Schedule& schedule, Backend& backend,
                             const std::vector<uint8_t>& input, const std::vector<int64_t>& view_offset,
                             const ExecOptions& options, RunProgress& progress, std::size_t run, int64_t& at,
                             ExecResult& res, const Strategy* live, double& issue_ms,
                             std::vector<double>& instr_issue_ms) {
  const auto& code = schedule.code;
  DeviceMemory& memory = backend.memory();
  Timing& timing = backend.timing();
  ScheduleRun r(model, backend, view_offset, options.memory_limit);
  at = -1;
  backend.compute().zero_param_grads();
  memory.reset_peaks();
  timing.begin_marks(code.size() + 1);
  progress.check_cancel();
  r.load_input(input);
  const auto issue_start = std::chrono::steady_clock::now();
  timing.mark(0);
  instr_issue_ms.assign(code.size(), 0.0);
  auto step = [&](std::size_t i, Instr ins) {
    at = static_cast<int64_t>(i);
    const auto issued = std::chrono::steady_clock::now();
    r.run(ins, at);
    instr_issue_ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - issued).count();
    if (options.sync_each) timing.synchronize();
    timing.mark(i + 1);
    progress.check_cancel();
    progress.after_instruction(run, i);
  };
  if (live) {
    // The strategy decides now, from the allocator's count; what it decides
    // must be what was simulated (marks, times and messages index it).
    std::size_t i = 0;
    const std::string simulated = " than its simulated schedule has (" + std::to_string(code.size()) + ")";
    live->play_live(model, LiveRun{[&](Instr ins) {
                                     if (i >= code.size())
                                       throw LiveDecisionDiffers{"decided more instructions at run time" + simulated};
                                     if (!(ins == code[i]))
                                       throw LiveDecisionDiffers{"decided at run time to " + to_string(ins, model) +
                                                                 " at instruction " + std::to_string(i) +
                                                                 ", where its simulated schedule has " +
                                                                 to_string(code[i], model)};
                                     step(i, ins);
                                     ++i;
                                   },
                                   [&] { return backend.memory().live_bytes(); }});
    if (i != code.size()) throw LiveDecisionDiffers{"decided fewer instructions at run time" + simulated};
  } else {
    for (std::size_t i = 0; i < code.size(); ++i) step(i, code[i]);
  }
  at = static_cast<int64_t>(code.size());  // past the last: the final synchronisation
  issue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - issue_start).count();
  auto marks = timing.mark_times_ms();  // synchronises
  r.release_all();
  res.tracked_peak_bytes = memory.peak_bytes();
  res.memory = memory.memory_stats();
  res.host_tracked_peak_bytes = backend.host().host_peak_bytes();
  res.host_memory = backend.host().host_memory_stats();
  return marks;
}

// The executor's own allocation did not fit (tracked, or under the limit).
ExecResult& out_of_memory(ExecResult& res, const TensorOutOfMemory& oom, const Model& model, const Schedule& schedule,
                          Backend& backend, uint64_t limit) {
  res.status = ExecStatus::OutOfMemory;
  res.oom_instruction = oom.instruction;
  res.oom_needed = oom.needed;
  res.oom_free = oom.free;
  res.tracked_peak_bytes = backend.memory().peak_bytes();
  res.message = oom_message(oom, "", schedule, model, limit);
  return res;
}

// The backend's own memory (scratch, a library's workspace) did not fit.
ExecResult& kernel_out_of_memory(ExecResult& res, const DeviceOutOfMemory& e, int64_t at, const Model& model,
                                 const Schedule& schedule, Backend& backend) {
  const int64_t where = std::min<int64_t>(at, static_cast<int64_t>(schedule.code.size()) - 1);
  res.status = ExecStatus::OutOfMemory;
  res.oom_instruction = where;
  res.oom_needed = e.needed();
  res.oom_free = e.free_bytes();
  res.tracked_peak_bytes = backend.memory().peak_bytes();
  res.message = oom_message({where, e.needed(), e.free_bytes()}, std::string("(") + e.what() + ") ", schedule,
                            model, 0);
  return res;
}

// Kernels run asynchronously: without sync_each the fault names where it was
// reported, which may be after the instruction that caused it.
std::string device_fault_message(const DeviceFault& e, int64_t at, bool sync_each, const Model& model,
                                 const Schedule& schedule) {
  const auto count = static_cast<int64_t>(schedule.code.size());
  if (sync_each && at >= 0 && at < count) return "device fault " + where_str(at, schedule, model) + ": " + e.what();
  const std::string where = at < count ? where_str(at, schedule, model) : std::string("after the last instruction");
  return "device fault reported " + where +
         " (kernels run asynchronously: it may come from an earlier one; rerun with --sync-each to name the "
         "instruction that launched it): " +
         e.what();
}

bool gradients_finite(const Model& model, Compute& compute) {
  const std::size_t count = parameter_tensors(model).size();
  for (std::size_t k = 0; k < count; ++k) {
    const std::vector<float> g = compute.read_param_grad(k);
    if (!std::all_of(g.begin(), g.end(), [](float x) { return std::isfinite(x); })) return false;
  }
  return true;
}

// Loss and gradients, read back after the last run.
void read_back(ExecResult& res, const Model& model, Compute& compute) {
  res.loss = compute.read_loss();
  const std::size_t count = parameter_tensors(model).size();
  res.param_grads.reserve(count);
  for (std::size_t k = 0; k < count; ++k) res.param_grads.push_back(compute.read_param_grad(k));
  res.grad_hash = fnv1a64(res.param_grads);
  res.loss_scale = compute.loss_scale();
  if (res.loss_scale != 1.0f || res.loss_scale_backoffs > 0)
    res.step_skipped = std::any_of(res.param_grads.begin(), res.param_grads.end(), [](const std::vector<float>& g) {
      return std::any_of(g.begin(), g.end(), [](float x) { return !std::isfinite(x); });
    });
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size();
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

// The median run and the per-instruction means, split into recomputation,
// transfers and conversions.
void summarise_times(ExecResult& res, const Model& model, const Schedule& schedule,
                     const std::vector<double>& instr_sum, const std::vector<double>& issue_sum, int repeat) {
  const auto& code = schedule.code;
  const std::vector<uint8_t> recompute = recompute_flags(model, schedule);
  res.time_ms = median(res.run_ms);
  res.issue_time_ms = median(res.issue_ms);
  res.instr_ms.resize(code.size());
  res.instr_issue_ms.resize(code.size());
  double sum = 0;
  for (std::size_t i = 0; i < code.size(); ++i) {
    res.instr_ms[i] = instr_sum[i] / static_cast<double>(repeat);
    res.instr_issue_ms[i] = issue_sum[i] / static_cast<double>(repeat);
    sum += res.instr_ms[i];
    if (recompute[i]) res.recompute_ms += res.instr_ms[i];
    if (code[i].kind == InstrKind::Offload || code[i].kind == InstrKind::Fetch) res.transfer_ms += res.instr_ms[i];
    if (is_compress(code[i].kind) || code[i].kind == InstrKind::Decompress) {
      res.convert_ms += res.instr_ms[i];
      ++res.conversions;
    }
  }
  res.recompute_share = sum > 0 ? res.recompute_ms / sum : 0;
}

}  // namespace

namespace {

// execute_loaded for a checked model and a schedule simulated on it.
ExecResult execute_simulated_loaded(const Model& model, const Schedule& schedule, const Simulation& sim,
                                   Backend& backend, const HostData& data, const ExecOptions& options,
                                   const Strategy* live = nullptr) {
  check_runnable(schedule, sim, backend, options);
  const auto& code = schedule.code;
  ExecResult res;
  res.strategy = schedule.strategy;
  res.backend = backend.name();
  res.baseline_bytes = backend.compute().baseline_bytes();
  res.compressed = sim.conversions > 0;
  res.nondeterministic = backend.compute().nondeterministic_backward();
  std::vector<int64_t> view_offset(static_cast<std::size_t>(model.size()), 0);  // elements into the storage
  for (int v = 0; v < model.size(); ++v) view_offset[static_cast<std::size_t>(v)] = storage_offset(model, v);

  const std::vector<uint8_t> input = input_bytes(model, data);
  if (input.size() > model.op(0).bytes) throw InputError("the input batch does not fit A(0)");

  const std::size_t runs = static_cast<std::size_t>(options.repeat) + 1;
  RunProgress progress(options, runs, code.size());
  std::vector<double> instr_sum(code.size(), 0.0), issue_sum(code.size(), 0.0), instr_issue;
  int64_t at = -1;  // the instruction running now
  try {
    backend.memory().begin_strategy();
    for (std::size_t run = 0; run < runs; ++run) {
      double issue = 0;
      auto marks = run_once(model, schedule, backend, input, view_offset, options, progress, run, at, res, live, issue,
                          instr_issue);
      // Under a loss scale, the warm-up is GradScaler's first steps: halved and
      // run again while its gradients overflow, so the timed runs use a scale
      // that fits (the same for every strategy: their gradients are the same).
      while (run == 0 && backend.compute().loss_scale() > 1.0f &&
             !gradients_finite(model, backend.compute())) {
        backend.compute().back_off_loss_scale();
        ++res.loss_scale_backoffs;
        marks = run_once(model, schedule, backend, input, view_offset, options, progress, run, at, res, live, issue,
                          instr_issue);
      }
      if (run > 0) {  // timed
        res.run_ms.push_back(marks.back());
        res.issue_ms.push_back(issue);
        for (std::size_t i = 0; i < code.size(); ++i) {
          instr_sum[i] += marks[i + 1] - marks[i];
          issue_sum[i] += instr_issue[i];
        }
      }
      progress.after_run(run);
    }
  } catch (const TensorOutOfMemory& oom) {
    return out_of_memory(res, oom, model, schedule, backend, options.memory_limit);
  } catch (const DeviceOutOfMemory& e) {
    return kernel_out_of_memory(res, e, at, model, schedule, backend);
  } catch (const Cancelled&) {
    res.status = ExecStatus::Cancelled;
    res.message = "cancelled";
    return res;
  } catch (const DeviceFault& e) {
    res.status = ExecStatus::Failed;
    res.message = device_fault_message(e, at, options.sync_each, model, schedule);
    return res;
  } catch (const LiveDecisionDiffers& e) {
    res.status = ExecStatus::Failed;
    res.message = schedule.strategy + ": " + e.what;
    return res;
  }
  res.decided_live = live != nullptr;
  read_back(res, model, backend.compute());
  summarise_times(res, model, schedule, instr_sum, issue_sum, options.repeat);
  return res;
}

// Simulated without its timeline: the validation every read below relies on
// (every tensor read is resident), and the transfers and conversions counted.
Simulation validate_for_execution(const Model& model, const Schedule& schedule) {
  return simulate(model, schedule, {.timeline = false});
}

}  // namespace

ExecResult execute_loaded(const Model& model, const Schedule& schedule, Backend& backend, const HostData& data,
                          const ExecOptions& options) {
  check_executable(model);
  return execute_simulated_loaded(model, schedule, validate_for_execution(model, schedule), backend, data, options);
}

namespace {

ExecResult result_without_run(const Schedule& s, Backend& backend, ExecStatus status, std::string message) {
  ExecResult r;
  r.strategy = s.strategy;
  r.backend = backend.name();
  r.status = status;
  r.message = std::move(message);
  r.baseline_bytes = backend.compute().baseline_bytes();
  return r;
}

// One strategy of a batch on the loaded backend: its result, or an exception
// that makes it Failed.
using RunOne = std::function<ExecResult(std::size_t index, const HostData& data, const ExecOptions& options)>;

// Each schedule in turn on one backend, the baseline loaded once, for a
// model already checked (execute_strategies, execute_simulated).
std::vector<ExecResult> execute_batch(const Model& model, const std::vector<const Schedule*>& schedules,
                                      Backend& backend, const ExecOptions& options, HostData* data_out,
                                      const RunOne& run_one) {
  std::vector<ExecResult> out;
  // Nothing can run when the baseline does not fit: every strategy gets the same row.
  auto all_out_of_memory = [&](uint64_t needed, uint64_t free, const std::string& what) {
    for (const Schedule* s : schedules) {
      ExecResult r = result_without_run(*s, backend, ExecStatus::OutOfMemory,
                                        "out of memory: needed " + bytes_str(needed) + " for " + what +
                                            " before the first instruction" +
                                            (free == std::numeric_limits<uint64_t>::max()
                                                 ? std::string()
                                                 : ", " + bytes_str(free) + " free on the device"));
      r.oom_needed = needed;
      r.oom_free = free;
      out.push_back(std::move(r));
    }
    return out;
  };
  const uint64_t baseline = baseline_bytes_of(model);
  if (const uint64_t free = backend.memory().device_free_bytes(); baseline > free)
    return all_out_of_memory(baseline, free, "the baseline (parameters, their gradients, target, loss, constants)");
  HostData generated = make_host_data_unchecked(model, options.seed);
  const HostData& data = data_out ? (*data_out = std::move(generated)) : generated;
  try {
    backend.compute().allow_nondeterministic_backward(options.nondeterministic_backward);
    backend.compute().load(model, data);
  } catch (const DeviceOutOfMemory& e) {
    return all_out_of_memory(e.needed(), e.free_bytes(), e.what());
  } catch (const DeviceFault& e) {
    for (const Schedule* s : schedules)
      out.push_back(result_without_run(*s, backend, ExecStatus::NotRun,
                                       std::string("not run: the device is unusable: ") + e.what()));
    return out;
  }
  const double share = schedules.empty() ? 1.0 : 1.0 / static_cast<double>(schedules.size());
  bool cancelled = false;
  std::string unusable;  // why the device cannot run the rest, once it cannot
  for (std::size_t s = 0; s < schedules.size(); ++s) {
    if (cancelled) {
      out.push_back(result_without_run(*schedules[s], backend, ExecStatus::Cancelled, "cancelled"));
      continue;
    }
    if (!unusable.empty()) {
      out.push_back(result_without_run(*schedules[s], backend, ExecStatus::NotRun, unusable));
      continue;
    }
    ExecOptions o = options;
    const double base = share * static_cast<double>(s);
    if (options.progress) o.progress = [&, base](double f) { return options.progress(base + share * f); };
    try {
      out.push_back(run_one(s, data, o));
    } catch (const std::exception& e) {
      out.push_back(result_without_run(*schedules[s], backend, ExecStatus::Failed, e.what()));
    }
    cancelled = out.back().status == ExecStatus::Cancelled;
    if (!backend.timing().healthy()) {
      const std::string why = backend.timing().recover(model, data);
      if (!why.empty())
        unusable = "not run: the device is unusable after the fault in strategy '" + schedules[s]->strategy +
                   "' (" + why + ")";
    }
  }
  if (!cancelled && options.progress) (void)options.progress(1.0);
  return out;
}

}  // namespace

std::vector<ExecResult> execute_strategies(const Model& model, const std::vector<Schedule>& schedules, Backend& backend,
                                           const ExecOptions& options, HostData* data_out) {
  check_executable(model);
  std::vector<const Schedule*> list;
  for (const Schedule& s : schedules) list.push_back(&s);
  return execute_batch(model, list, backend, options, data_out,
                       [&](std::size_t i, const HostData& data, const ExecOptions& o) {
                         const Schedule& s = schedules[i];
                         return execute_simulated_loaded(model, s, validate_for_execution(model, s), backend, data, o);
                       });
}

std::vector<ExecResult> execute_simulated(const Model& model, const std::vector<SimulatedSchedule>& schedules,
                                          Backend& backend, const ExecOptions& options, HostData* data_out) {
  std::vector<const Schedule*> list;
  for (const SimulatedSchedule& s : schedules) list.push_back(s.schedule);
  return execute_batch(model, list, backend, options, data_out,
                       [&](std::size_t i, const HostData& data, const ExecOptions& o) {
                         return execute_simulated_loaded(model, *schedules[i].schedule, *schedules[i].sim, backend,
                                                         data, o, schedules[i].live);
                       });
}

}  // namespace remat
