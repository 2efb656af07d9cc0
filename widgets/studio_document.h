// The window's state without any widget: the model, the strategies compared,
// their simulations (core's simulate_strategies), a resident index per run,
// the run shown in the graph, the current step and the manual checkpoints.
// Widgets observe its signals; tests drive it directly. Searches (optimal:...)
// may use their whole time limit, so they run on a worker thread: their run is
// `pending` until the result comes back, the others show at once.
#pragma once
#include <QHash>
#include <QObject>
#include <QSet>
#include <QStringList>
#include <memory>
#include <vector>

#include "core/comparison.h"
#include "core/instruction_limit.h"
#include "core/model.h"
#include "core/resident_index.h"
#include "widgets/node_states.h"

namespace remat {

class StudioDocument : public QObject {
  Q_OBJECT
 public:
  explicit StudioDocument(QObject* parent = nullptr);
  ~StudioDocument() override;

  // A strategy whose schedule is longer (its stated length, Strategy::size) is
  // shown as "too large to simulate (N instructions)" instead of being made:
  // the window simulates on the GUI thread and keeps an index, the facts and
  // the chart per run (about kBytesPerInstruction). The default is the lesser
  // of kMaxWindowInstructions and what a quarter of the available memory
  // holds; QSettings "simulation/maxInstructions" overrides it (main_window).
  static constexpr uint64_t kMaxWindowInstructions = 20'000'000;
  static constexpr uint64_t kBytesPerInstruction = 40;
  static uint64_t defaultMaxInstructions();
  void setMaxInstructions(uint64_t max);
  uint64_t maxInstructions() const { return limit_.max; }
  static QStringList defaultSpecs() { return {"store-all", "recompute-all", "sqrt"}; }

  // Throws InputError (core's message) and leaves the document as it was.
  void loadModel(const QString& specOrPath);
  void setModel(Model model, const QString& source);
  const Model& model() const { return model_; }
  QString source() const { return source_; }

  void setSpecs(const QStringList& specs);
  QStringList specs() const { return specs_; }
  const std::vector<StrategyRun>& runs() const { return runs_; }
  int runCount() const { return static_cast<int>(runs_.size()); }
  // Index of a valid run, or nullptr for an invalid one.
  const ResidentIndex* residentIndex(int run) const;
  const ScheduleFacts* facts(int run) const;

  int currentRun() const { return current_; }
  void setCurrentRun(int run);
  const StrategyRun* current() const;
  std::size_t step() const { return step_; }
  std::size_t stepCount() const;  // of the current run
  void setStep(std::size_t step);
  NodeStates nodeStates() const;  // current run, current step
  QString caption() const;

  // Adds `spec` to the compared strategies if it is not there and shows it in
  // the graph (the trade-off chart's clicks).
  void showSpec(const QString& spec);

  // Toggles op `op` in the manual checkpoint set, starting from the current
  // run's checkpoints; the "manual:" run is added (or replaced) and shown.
  void toggleCheckpoint(int op);
  std::vector<int> manualCheckpoints() const { return manual_; }
  int manualRun() const;
  // Searches started and not yet back.
  int pendingSearches() const { return static_cast<int>(searching_.size()); }

 signals:
  void modelChanged();
  void runsChanged();
  void currentRunChanged(int run);
  void stepChanged(std::size_t step);

 private:
  void resimulate();
  // The search's run when it came back for this model; else starts it (once)
  // and returns a pending run.
  StrategyRun searched(const QString& spec);
  QHash<QString, StrategyRun> searched_;
  QSet<QString> searching_;
  int generation_ = 0;  // of the model: results for an older one are dropped
  InstructionLimit limit_;
  Model model_;
  QString source_;
  QStringList specs_;
  std::vector<StrategyRun> runs_;
  std::vector<std::unique_ptr<ResidentIndex>> indexes_;
  std::vector<std::unique_ptr<ScheduleFacts>> facts_;
  std::vector<int> manual_;
  int current_ = 0;
  std::size_t step_ = 0;
};

}  // namespace remat
