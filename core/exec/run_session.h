// One run: strategies executed for real on a backend, with everything a
// front-end shows beside the prediction. The CLI's `remat run` and the
// window's Run both go through it, so they check, choose, add and record in
// the same way (docs/run.md):
// - the model is checked once (check_executable);
// - each strategy is made once and simulated once, under the instruction
//   limit (the reference's too); the executor takes those simulations as
//   they are (execute_simulated);
// - store-all is the reference for the time overhead and bitwise equality:
//   added first, only to compare against, when it is not among the strategies;
// - the backend is chosen once (backend_choice.h): auto, cpu or cuda, with
//   the reason when auto finds no GPU;
// - recorders wrap the backend when asked: the allocation trace (RunRecorder,
//   `remat run --trace`) and the tracked bytes per instruction (the window's
//   chart).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/exec/backend_choice.h"
#include "core/exec/executor.h"
#include "core/sim/instruction_limit.h"
#include "core/io/run_recorder.h"
#include "core/sim/time_model.h"

namespace remat {

class Strategy;

struct RunSessionOptions {
  BackendKind backend = BackendKind::Auto;
  InstructionLimit limit;           // every schedule made here, the reference's included
  std::optional<TimeModel> time;    // predict each step's time (Simulation::time)
  bool record_trace = false;        // RunSessionResult::recorded
  bool record_tracked = false;      // RunSessionResult::tracked
  // A strategy that decides while the step runs (dtr) decides inside the
  // executor, from the allocator's count; false: its simulated schedule is
  // replayed like any other (to time what deciding costs).
  bool decide_live = true;
};

struct RunSessionResult {
  std::string backend;                // Backend::name(): "cpu", "cuda: <device>"
  std::vector<StrategyRun> plans;     // in the order they ran: the reference first when added
  std::vector<ExecResult> results;    // parallel to plans
  bool reference_added = false;       // plans[0] is store-all, added only to compare against
  std::size_t reference = 0;          // store-all's index
  HostData data;                      // what the backend loaded (remat run --dump)
  // record_trace: what each strategy that started allocated and measured (its last run).
  std::vector<RecordedRun> recorded;
  // record_tracked: parallel to plans, the tracked bytes after each
  // instruction; empty for a strategy that did not run to completion.
  std::vector<std::vector<uint64_t>> tracked;

  const ExecResult& reference_result() const { return results[reference]; }
};

class RunSession {
 public:
  // Checks that `model` can execute (InputError naming its simulate-only ops)
  // and makes each strategy (InputError for a bad spec), store-all first when
  // it is not among them.
  RunSession(const Model& model, const std::vector<std::string>& specs, RunSessionOptions options);
  // Strategies already made and simulated on `model` under options.limit
  // (the window's, as prepare_run made them): taken as they are (the
  // executor reads each schedule and its simulated counts, not the
  // timelines, which the caller may leave out); those with an error are left
  // out. The model is checked all the same, and store-all made when missing.
  static RunSession of_simulated(const Model& model, std::vector<StrategyRun> simulated, RunSessionOptions options);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  // Canonical names in run order ("sqrt", "every-k:4"), known once made.
  std::vector<std::string> names() const;

  // Chooses the backend, once: NoUsableGpu when Cuda was asked for and none
  // can be had. After it, no_gpu() says why Auto fell back to the CPU.
  Backend& open_backend();
  const std::string& no_gpu() const { return no_gpu_; }

  // Schedules and simulates the strategies made here (once): InputError
  // "strategy 'SPEC': why" for the first that does not apply or is over the
  // limit.
  void plan();

  // plan() and open_backend() when not done yet, then every strategy once on
  // the backend (execute_simulated). The session is spent afterwards.
  RunSessionResult run(const ExecOptions& options);

 private:
  struct Simulated {};
  RunSession(const Model& model, Simulated, std::vector<StrategyRun> simulated, RunSessionOptions options);
  void find_reference();

  const Model& model_;
  RunSessionOptions options_;
  std::vector<StrategyRun> plans_;
  std::vector<std::unique_ptr<Strategy>> unplanned_;  // parallel to plans_; null once planned
  bool reference_added_ = false;
  std::size_t reference_ = 0;
  bool planned_ = false;
  std::unique_ptr<Backend> backend_;
  std::string no_gpu_;
};

}  // namespace remat
