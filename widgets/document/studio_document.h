// The window's state without any widget: the model, the strategies compared,
// their simulations (core's simulate_strategies), a resident index and phase
// map per run, the run shown in the graph, the current step and the manual
// checkpoints. Widgets observe its signals; tests drive it directly.
//
// Strategies on a small model are simulated at once; on a larger model, and
// every search (optimal:...), they are computed by background jobs
// (widgets/controllers/job_tracker.h): their run is `pending` ("computing...") until the
// result comes back, and can be cancelled; a result for an older model is
// dropped.
#pragma once
#include <QObject>
#include <QStringList>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/model/model.h"
#include "core/sim/instruction_limit.h"
#include "core/sim/resident_index.h"
#include "core/sim/time_model.h"
#include "core/strategies/registry.h"
#include "widgets/controllers/job_tracker.h"
#include "widgets/document/node_states.h"
#include "widgets/document/phase_map.h"
#include "widgets/document/run_list.h"
#include "widgets/document/step_numbering.h"
#include "widgets/views/legend_looks.h"

namespace remat {
struct PreparedRun;

class StudioDocument : public QObject {
  Q_OBJECT
 public:
  explicit StudioDocument(QObject* parent = nullptr);
  ~StudioDocument() override;

  // A strategy whose schedule is longer (its stated length, Strategy::size) is
  // shown as "too large to simulate (N instructions)" instead of being made:
  // the window keeps an index, the facts and the chart per run (about
  // kBytesPerInstruction). The default is the lesser of kMaxWindowInstructions
  // and what a quarter of the available memory holds; QSettings
  // "simulation/maxInstructions" overrides it (main_window).
  static constexpr uint64_t kMaxWindowInstructions = 20'000'000;
  static constexpr uint64_t kBytesPerInstruction = 40;
  static uint64_t defaultMaxInstructions();
  void setMaxInstructions(uint64_t max);
  uint64_t maxInstructions() const { return limit_.max; }
  const InstructionLimit& instructionLimit() const { return limit_; }
  // Up to this many ops every strategy but a search takes well under 0.1 s
  // (recompute-all: 20k instructions; the budget DP at 200 layers): computed
  // at once. Larger models compute in the background.
  static constexpr int kInlineOps = 200;
  static QStringList defaultSpecs() { return {"store-all", "recompute-all", "sqrt"}; }

  // Throws InputError (core's message) and leaves the document as it was.
  void loadModel(const QString& specOrPath);
  void setModel(Model model, const QString& source);
  // The model simulated: the loaded one, or one micro-batch of it.
  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> sharedModel() const { return model_; }

  // Gradient accumulation (`--micro-batches K`, core/analysis/micro_batch.h): the
  // strategies are simulated on the loaded model at batch/K, made by a
  // background job; the compared strategies stay. A K that does not divide
  // the batch comes back as microBatchesFailed (core's message) and K stays.
  // A new model starts at K = 1.
  void setMicroBatches(int k);
  int microBatches() const { return microBatches_; }
  int pendingMicroBatches() const { return microJob_ ? pendingK_ : 0; }
  const Model& loadedModel() const { return *loaded_; }
  std::shared_ptr<const Model> sharedLoadedModel() const { return loaded_; }
  QString source() const { return source_; }

  // The time model's rates (core/sim/time_model.h; the CLI's --device-flops,
  // --link-bandwidth, --device-bandwidth) under which strategies that
  // offload are timed: their stalls. A change recomputes those runs (in the
  // background where the model is large) and leaves the others as they are.
  void setTimeModel(const TimeModel& time);
  const TimeModel& timeModel() const { return time_; }

  // The strategies compared, as values (a request that does not parse stays,
  // and its run says why); from text (the settings), each parsed once.
  void setSpecs(std::vector<StrategyRequest> specs);
  void setSpecs(const QStringList& texts);
  // {"store-all", "sqrt"}: text (a braced pair would otherwise read as iterators).
  void setSpecs(std::initializer_list<QString> texts) { setSpecs(QStringList(texts)); }
  const std::vector<StrategyRequest>& specs() const { return specs_; }
  RunList runs() const;
  int runCount() const { return static_cast<int>(entries_.size()); }
  // Index of a valid run, or nullptr for an invalid or pending one.
  const ResidentIndex* residentIndex(int run) const;
  const ScheduleFacts* facts(int run) const;
  const PhaseMap* phases(int run) const;
  // The run with its index, shared: a background job (the animation export)
  // keeps it alive while the document moves on.
  std::shared_ptr<const PreparedRun> prepared(int run) const;

  // Strategies still computing in the background, and their cancellation
  // (they then show "cancelled"; changing the strategies starts them again).
  int computing() const { return static_cast<int>(jobOf_.size()) + (microJob_ ? 1 : 0); }
  void cancelComputing();
  JobTracker* jobs() { return &jobs_; }

  int currentRun() const { return current_; }
  // Shows another run at the same phase of the training step (phase_map.h).
  void setCurrentRun(int run);
  const StrategyRun* current() const;
  std::size_t step() const { return step_; }  // instruction index in the current run
  std::size_t stepCount() const;              // instructions of the current run
  void setStep(std::size_t instruction);      // snapped to a shown step

  // Steps as the user counts them: with `free` instructions hidden, only fwd
  // and bwd instructions are steps (step_numbering.h).
  void setHideFrees(bool hide);
  bool hideFrees() const { return hideFrees_; }
  std::size_t shownStep() const;       // 0-based
  std::size_t shownStepCount() const;
  void setShownStep(std::size_t number);
  void stepForward();
  void stepBack();
  void jumpToPeak();  // the current run's first instruction at its peak

  // Where the current step is on the phase axis, and the step of `run` there.
  double phase() const;
  std::size_t stepAtPhase(int run) const;

  NodeStates nodeStates() const;  // current run, current step
  NodeStates nodeStates(int run, std::size_t step) const;
  QString caption() const;
  // "resident 9 B · peak 9 B" of the current run at the current step.
  QString memoryReadout() const;
  // The legend's entries: the looks the compared strategies show (the view
  // ring where the model has views); everything while none is ready.
  LegendMask legendMask() const;
  uint64_t residentBytes() const;

  // Adds `spec` to the compared strategies if it is not there and shows it in
  // the graph (the trade-off chart's clicks), now or when it is computed.
  void showSpec(const StrategySpec& spec);

  // Toggles op `op` in the manual checkpoint set, starting from the current
  // run's checkpoints; the "manual:" run is added (or replaced) and shown.
  void toggleCheckpoint(int op);
  std::vector<int> manualCheckpoints() const { return manual_; }
  int manualRun() const;

 signals:
  void modelChanged();
  void runsChanged();
  void currentRunChanged(int run);
  void stepChanged(std::size_t step);
  void computingChanged(int count);
  void microBatchesChanged(int k);
  void microBatchesFailed(const QString& message);
  void timeModelChanged();

 private:
  void resimulate();
  void clearRuns();
  void arrived(const StrategyRequest& request, std::shared_ptr<PreparedRun> run);
  std::shared_ptr<const PreparedRun> compute(const StrategyRequest& request);
  // The run shown, by its text, and whether it is the manual one (kept
  // across a change of the manual set).
  struct Shown {
    std::string text;
    bool manual = false;
  };
  Shown shown() const;
  void applyEntries(const Shown& keep, double keepPhase);
  void rebuildNumbering();
  const PreparedRun* entry(int run) const;

  InstructionLimit limit_;
  TimeModel time_;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Model> loaded_;  // model_ at K = 1
  int microBatches_ = 1;
  int microJob_ = 0, pendingK_ = 0;
  QString source_;
  std::vector<StrategyRequest> specs_;
  // Every run computed or computing for this model, by its request's text;
  // entries_ are the compared ones in specs_ order.
  std::map<std::string, std::shared_ptr<const PreparedRun>> cache_;
  std::vector<std::shared_ptr<const PreparedRun>> entries_;
  struct Job {
    int id;
    StrategyRequest request;
  };
  std::map<std::string, Job> jobOf_;  // text -> the job still computing it
  std::string showWhenReady_;         // showSpec/toggleCheckpoint of a run still computing
  std::vector<int> manual_;
  int current_ = 0;
  std::size_t step_ = 0;
  bool hideFrees_ = false;
  StepNumbering numbering_;
  JobTracker jobs_;  // last member: destroyed (joined) first
};

}  // namespace remat
