#include "core/exec/run_session.h"

#include <algorithm>

#include "core/exec/tracked_recorder.h"
#include "core/strategies/registry.h"
#include "core/strategies/strategy.h"

namespace remat {
namespace {

constexpr const char* kReference = "store-all";

}  // namespace

RunSession::RunSession(const Model& model, const std::vector<std::string>& specs, RunSessionOptions options)
    : model_(model), options_(std::move(options)) {
  check_executable(model_);
  for (const std::string& spec : specs) {
    StrategySpec parsed = parse_strategy(spec);  // a bad spec fails before any work
    auto strategy = make_strategy(parsed);
    StrategyRun run;
    run.spec = spec;
    run.name = strategy->name();
    run.parsed = std::move(parsed);
    plans_.push_back(std::move(run));
    unplanned_.push_back(std::move(strategy));
  }
  find_reference();
}

RunSession RunSession::of_simulated(const Model& model, std::vector<StrategyRun> simulated,
                                    RunSessionOptions options) {
  return RunSession(model, Simulated{}, std::move(simulated), std::move(options));
}

RunSession::RunSession(const Model& model, Simulated, std::vector<StrategyRun> simulated, RunSessionOptions options)
    : model_(model), options_(std::move(options)) {
  check_executable(model_);
  for (StrategyRun& r : simulated) {
    if (!r.ok()) continue;
    plans_.push_back(std::move(r));
    unplanned_.push_back(nullptr);
  }
  find_reference();
}

// store-all is the reference: the chosen one, else one made and put first.
void RunSession::find_reference() {
  const auto it =
      std::find_if(plans_.begin(), plans_.end(), [](const StrategyRun& r) { return r.spec == kReference; });
  if (it != plans_.end()) {
    reference_ = static_cast<std::size_t>(it - plans_.begin());
    return;
  }
  StrategySpec parsed = strategy_spec(kReference);
  auto strategy = make_strategy(parsed);
  StrategyRun run;
  run.spec = kReference;
  run.name = strategy->name();
  run.parsed = std::move(parsed);
  plans_.insert(plans_.begin(), std::move(run));
  unplanned_.insert(unplanned_.begin(), std::move(strategy));
  reference_ = 0;
  reference_added_ = true;
}

RunSession::~RunSession() = default;

std::vector<std::string> RunSession::names() const {
  std::vector<std::string> out;
  for (const StrategyRun& r : plans_) out.push_back(r.name);
  return out;
}

Backend& RunSession::open_backend() {
  if (!backend_) {
    ChosenBackend chosen = choose_backend(options_.backend);
    backend_ = std::move(chosen.backend);
    no_gpu_ = std::move(chosen.no_gpu);
  }
  return *backend_;
}

void RunSession::plan() {
  if (planned_) return;
  const SimulateStrategiesOptions so{.limit = options_.limit, .timelines = true, .time = options_.time};
  for (std::size_t i = 0; i < plans_.size(); ++i) {
    if (!unplanned_[i]) continue;
    StrategyRun run = simulate_strategy(model_, *unplanned_[i], plans_[i].spec, so);
    if (!run.ok()) throw InputError("strategy '" + run.spec + "': " + run.error);
    run.parsed = std::move(plans_[i].parsed);
    plans_[i] = std::move(run);
    unplanned_[i].reset();
  }
  planned_ = true;
}

RunSessionResult RunSession::run(const ExecOptions& options) {
  plan();
  Backend& backend = open_backend();
  RunSessionResult out;
  out.backend = backend.name();
  out.reference_added = reference_added_;
  out.reference = reference_;

  std::vector<SimulatedSchedule> schedules;
  std::vector<std::unique_ptr<Strategy>> live;  // the strategies that decide inside the run
  for (const StrategyRun& r : plans_) {
    schedules.push_back({&r.schedule, &r.sim});
    // Only a strategy whose entry decides live is made again (the others
    // were made once, to simulate them).
    if (!options_.decide_live || !r.parsed || !strategy_info(*r.parsed).decides_live) continue;
    live.push_back(make_strategy(*r.parsed));
    schedules.back().live = live.back().get();
  }
  // The recorders wrap the backend, the trace's outermost.
  Backend* target = &backend;
  std::optional<TrackedRecorder> tracked;
  if (options_.record_tracked) target = &tracked.emplace(*target);
  std::optional<RunRecorder> recorder;
  if (options_.record_trace) target = &recorder.emplace(*target);

  out.results = execute_simulated(model_, schedules, *target, options, &out.data);
  if (recorder) out.recorded = recorder->strategies();
  if (tracked) {
    out.tracked.resize(plans_.size());
    for (std::size_t i = 0; i < plans_.size() && i < tracked->timelines.size(); ++i)
      if (out.results[i].ok() && tracked->timelines[i].size() == plans_[i].schedule.code.size())
        out.tracked[i] = std::move(tracked->timelines[i]);
  }
  out.plans = std::move(plans_);
  plans_.clear();
  return out;
}

}  // namespace remat
