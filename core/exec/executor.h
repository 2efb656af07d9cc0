// Executes a validated schedule for real, instruction by instruction, on a
// Backend, under the memory model of docs/memory-model.md: fwd v allocates exactly
// bytes(v) for A(v); a bwd allocates bytes(u) for G(u) of each input u with a
// gradient tensor that is not yet resident (then overwrites it, otherwise adds
// into it); frees release. A(0) is allocated before the first instruction.
// So the backend's tracked peak equals simulate(model, schedule).peak_bytes.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/exec/backend.h"
#include "core/sim/schedule.h"
#include "core/sim/simulator.h"

namespace remat {

class Strategy;

struct ExecOptions {
  uint64_t seed = 1;          // input, target/labels, parameters, dropout masks (< 2^32, see rng.h)
  int repeat = 3;             // timed runs after one untimed warm-up (>= 1)
  uint64_t memory_limit = 0;  // tracked activation bytes allowed; 0 = no limit
  // Called with a fraction in [0, 1], non-decreasing, last call exactly 1 on
  // success; returning false cancels. May be empty.
  std::function<bool(double fraction)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set to true to cancel; may be null
  // Wait for the device after every instruction, so that an asynchronous
  // kernel fault is reported at the instruction that launched it (slower).
  bool sync_each = false;
  // remat run --nondeterministic-backward: handed to the backend before it
  // loads the model (Compute::allow_nondeterministic_backward); what it then
  // runs non-deterministically is each result's `nondeterministic`.
  bool nondeterministic_backward = false;
};

// NotRun: an earlier strategy left the device unusable (the message says which).
enum class ExecStatus { Ok, OutOfMemory, Cancelled, Failed, NotRun };
std::string_view exec_status_name(ExecStatus s);  // "ok", "out-of-memory", "cancelled", "failed", "not-run"

struct ExecResult {
  std::string strategy;            // Schedule::strategy
  std::string backend;             // Backend::name()
  ExecStatus status = ExecStatus::Ok;
  std::string message;             // OOM / failure text; empty when ok

  // Out of memory: the first instruction whose allocation did not fit (-1:
  // before the first instruction: the baseline or the input), bytes asked and
  // still free (UINT64_MAX when the device does not say).
  int64_t oom_instruction = -1;
  uint64_t oom_needed = 0;
  uint64_t oom_free = 0;

  float loss = 0;
  std::vector<std::vector<float>> param_grads;  // parallel to parameter_tensors(model)
  uint64_t grad_hash = 0;                       // FNV-1a 64 over the gradients' bytes, in order
  // The loss scale the backward ran with (Compute::loss_scale; 1: none) and,
  // under one, whether a gradient came out infinite or NaN: GradScaler would
  // skip the optimizer step and halve the scale for the next one.
  // The untimed warm-up is repeated, the scale halved each time, while its
  // gradients are not finite and the scale is above 1 (GradScaler's first
  // steps): loss_scale_backoffs counts those halvings.
  float loss_scale = 1.0f;
  bool step_skipped = false;
  int loss_scale_backoffs = 0;
  // The schedule compresses checkpoints (compress/decompress): its loss and
  // gradients carry the conversions' rounding, so they are compared with
  // store-all's by relative error (same_result.h), not bit for bit.
  bool compressed = false;
  // The strategy decided at run time (SimulatedSchedule::live): the
  // instructions run are the ones it handed over, each equal to the schedule's.
  bool decided_live = false;
  // What the backward ran non-deterministically (Compute::nondeterministic_backward,
  // under ExecOptions::nondeterministic_backward): empty where the gradients
  // are bitwise reproducible. Where not, only the loss is held to store-all's
  // bits (the forward does not change); the gradients are compared by
  // relative error (same_result.h).
  std::vector<std::string> nondeterministic;

  // The executor's own count of the tensors it allocated (activations and
  // their gradients, exactly bytes(v) each): equal to the simulated peak by
  // construction, a bookkeeping check rather than a measurement.
  uint64_t tracked_peak_bytes = 0;
  // Measured by the allocator underneath the backend and by the device over the
  // last timed run (backend.h: MemoryStats; docs/run.md).
  MemoryStats memory;
  uint64_t baseline_bytes = 0;      // parameters, their gradients, target, loss (as asked)
  // The host tier (schedules that offload): the executor's count of bytes in
  // the backend's host pool (equal to the simulated peak_host_bytes by
  // construction) and what that pool's allocator measured.
  uint64_t host_tracked_peak_bytes = 0;
  MemoryStats host_memory;

  std::vector<double> run_ms;       // total time of each timed run
  double time_ms = 0;               // median of run_ms
  // The host's wall time to issue each timed run's instructions (from the first
  // mark to the last instruction's return, before the final synchronisation),
  // and its median. On the CPU it is the run; on a device, near run_ms where
  // the step waits on the host's launches rather than on its kernels.
  std::vector<double> issue_ms;
  double issue_time_ms = 0;
  std::vector<double> instr_ms;     // per instruction index, mean over the timed runs
  // The host's time in each instruction's call (mean over the timed runs): on
  // a device, what issuing its kernels cost; where it is near instr_ms the
  // device waited for the host there.
  std::vector<double> instr_issue_ms;
  double recompute_ms = 0;          // of fwd instructions that recompute (from instr_ms)
  double recompute_share = 0;       // recompute_ms / sum(instr_ms)
  double transfer_ms = 0;           // of offload and fetch instructions (from instr_ms)
  // Compressed checkpoints: the compress and decompress instructions of one
  // run and their time (from instr_ms), the conversions measured.
  int64_t conversions = 0;
  double convert_ms = 0;

  bool ok() const { return status == ExecStatus::Ok; }
};

// Host values for a model and seed (deterministic): input uniform in [-1, 1),
// MSE target uniform in [-1, 1), CE labels uniform in [0, classes), Linear and
// Dense weights and biases uniform in ±1/sqrt(fan_in), LayerNorm gamma
// 1 + U(±0.1) and beta U(±0.1); Op::param_init replaces the generated values.
// Throws InputError when the model is not executable or param_init has the
// wrong sizes.
HostData make_host_data(const Model& model, uint64_t seed);
// The same for a model the caller has checked (check_executable) already.
HostData make_host_data_unchecked(const Model& model, uint64_t seed);
// A(0)'s bytes as uploaded: the f32 input, or the ids in the input's integer dtype.
std::vector<uint8_t> input_bytes(const Model& model, const HostData& data);

// Throws InputError "model X has simulate-only ops: ..." when it cannot run.
void check_executable(const Model& model);

// Runs `schedule` (validated here with simulate(); a ScheduleError propagates)
// 1 + repeat times. A schedule that offloads needs a backend with a host tier
// (InputError otherwise): offload copies A(v) into the host pool and releases
// its device storage; fetch allocates it again and copies it back. One that
// compresses needs HostTier::can_compress(): compress allocates C(v) at its
// stored size and converts A(v) into it, decompress allocates A(v) and
// converts back. Out of memory and cancellation are results, not exceptions.
// Loads the model's baseline into the backend first (load()).
ExecResult execute(const Model& model, const Schedule& schedule, Backend& backend, const ExecOptions& options);
// Same, with the baseline already loaded by the caller: `data` is what
// backend.load(model, data) got (its input is uploaded as A(0) every run).
ExecResult execute_loaded(const Model& model, const Schedule& schedule, Backend& backend, const HostData& data,
                          const ExecOptions& options);

// Each schedule in turn on one backend, loading the baseline once. Progress is
// spread evenly over the schedules. An OOM or failure of one does not stop the
// others; cancellation marks the current and the remaining ones Cancelled. A
// baseline that does not fit makes every result OutOfMemory. A fault that
// leaves the device unusable is recovered from (Timing::recover) or the
// remaining strategies are NotRun, with the reason.
// The host data is generated here (make_host_data) unless the baseline cannot
// fit the backend at all (baseline_bytes_of > device_free_bytes: every result
// is then OutOfMemory and nothing is generated); `data_out` receives it.
std::vector<ExecResult> execute_strategies(const Model& model, const std::vector<Schedule>& schedules,
                                           Backend& backend, const ExecOptions& options,
                                           HostData* data_out = nullptr);

// A schedule and what simulate() returned for it on the same model; `live`:
// the strategy that made it, when it decides while the step runs
// (StrategyInfo::decides_live, dtr): each run then lets it decide again from the
// allocator's count, and every instruction it hands over must be the
// schedule's (else the run fails, naming the first that differs).
struct SimulatedSchedule {
  const Schedule* schedule;
  const Simulation* sim;
  const Strategy* live = nullptr;
};

// execute_strategies for a caller that has checked the model
// (check_executable) and simulated each schedule on it, as the run session
// does (run_session.h): neither is done again here.
std::vector<ExecResult> execute_simulated(const Model& model, const std::vector<SimulatedSchedule>& schedules,
                                          Backend& backend, const ExecOptions& options, HostData* data_out = nullptr);

// The baseline a backend will hold for `model` (Compute::baseline_bytes() after
// load): 8 bytes per parameter (value and gradient), the MSE target or the
// labels, 4 for the loss. Computed from shapes, without generating anything.
uint64_t baseline_bytes_of(const Model& model);

// FNV-1a 64 over the raw bytes of the gradients, in order.
uint64_t fnv1a64(const std::vector<std::vector<float>>& tensors);

}  // namespace remat
