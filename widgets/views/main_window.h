// Remat Studio's window: the graph (or the strategies side by side) with
// caption and transport on top, memory timeline / comparison / trade-off tabs
// below, the strategy panel docked at the left, background work in the status
// bar. Menus: File (models, exports, the animation), Playback, View (side by
// side, presentation mode, panels), Run, Help.
// Logic lives in StudioDocument, PlaybackController, RunController,
// SweepController and the exporters; this class wires them to widgets and
// remembers settings. main_window_menus.cpp builds the menus and the
// presentation mode, main_window_export.cpp the exports.
#pragma once
#include <QByteArray>
#include <QMainWindow>

#include "core/strategies/registry.h"
#include "widgets/controllers/job_tracker.h"

class QAction;
class QImage;
class QComboBox;
class QDockWidget;
class QLabel;
class QLineEdit;
class QMenu;
class QStackedWidget;
class QTabWidget;
class QTableView;

namespace remat {
// A legend entry's symbol as the graph draws it (Help › What the picture
// shows): entry i < NodeLook::Count a look, then the view ring, the simulate-only badge.
QImage legend_symbol(int entry, double radius);
class ActivityBar;
class MicroBatchDialog;
class ParallelController;
class ParallelDialog;
class ParallelView;
class ComparisonModel;
class GraphView;
class PlaybackController;
class RunController;
class SideBySideView;
class StepMemoryBar;
class StrategyPanel;
class StudioDocument;
class SweepController;
class TimelineChart;
class TradeoffChart;
class TransportBar;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads a preset spec or a file; errors go to a dialog (or, with
  // `quiet`, only to the return value and `error`) and the current model stays.
  bool openModel(const QString& specOrPath, bool quiet = false, QString* error = nullptr);
  StudioDocument* document() const { return doc_; }
  PlaybackController* player() const { return player_; }
  GraphView* graphView() const { return graph_; }
  SideBySideView* sideBySideView() const { return sideBySide_; }
  TimelineChart* timeline() const { return chart_; }
  StepMemoryBar* stepMemory() const { return stepBar_; }
  ComparisonModel* comparison() const { return table_; }
  StrategyPanel* strategyPanel() const { return panel_; }
  QDockWidget* strategyDock() const { return dock_; }
  QLabel* captionLabel() const { return caption_; }
  QTabWidget* tabs() const { return tabs_; }
  TradeoffChart* tradeoffTab() const { return tradeoff_; }
  RunController* runner() const { return runner_; }
  SweepController* sweeper() const { return sweeper_; }
  ActivityBar* activity() const { return activity_; }
  JobTracker* exportJobs() { return &exportJobs_; }
  QAction* runAction() const { return runAction_; }
  // Run › Why this model cannot run (Ctrl+R while Run cannot): the list of
  // what blocks it, in a dialog (run_blockers.h).
  QAction* whyNotRunAction() const { return whyAction_; }
  QString whyNotRunText() const;
  void showWhyNotRun();
  // The find box (Ctrl+F): marks the next op whose name (or kind) contains
  // `text`, scrolls the graph to it and returns it; -1 when none matches.
  int findOp(const QString& text);
  QLineEdit* findBox() const { return findEdit_; }
  // The micro-batch count K of the timeline tab (StudioDocument::setMicroBatches).
  QComboBox* microBatchBox() const { return microK_; }
  // The K sweep for the compared strategies, in a dialog computing in the background.
  MicroBatchDialog* openMicroBatchSweep();
  // Run › Parallel: the dialog for `remat simulate --parallel`; accepted, its
  // report is computed in the background and drawn in the Parallel tab
  // (added the first time). main_window_parallel.cpp.
  ParallelDialog* openParallel();
  ParallelView* parallelView() const { return parallelView_; }
  ParallelController* parallelRunner() const { return parallel_; }
  // The action of a menu entry by its text without '&' (tests, shortcuts help).
  QAction* action(const QString& text) const;

  // Compares `spec` (if it is not yet) and shows it in the graph; the
  // Strategies panel checks its row (the trade-off's clicks, --show).
  void showStrategy(const StrategySpec& spec);
  // Compares exactly these (the --strategies flag); the panel checks their rows.
  void setSpecs(std::vector<StrategyRequest> specs);
  // The Run action: executes the valid strategies in a worker, where Run › Run on says.
  void startRun();
  // Run › Time model rates: the dialog, then the document times its offloading runs again.
  void editTimeModel();
  // File › Open PyTorch snapshot: against the current strategy (SnapshotDialog).
  void openSnapshot();
  // Stops the run, the sweep, the animation export and the strategies still computing.
  void cancelAll();
  void setSideBySide(bool on);
  bool sideBySide() const;
  // Full-screen graph, large text, keyboard stepping; Esc or F5 leaves.
  void setPresentation(bool on);
  bool presenting() const { return presenting_; }
  // Writes the animation of the shown strategy (or the side-by-side lanes) in
  // the background; false when it could not start (the reason is shown).
  // `inPhase`: side by side, the shortest strategy drives the frames; every
  // frame has a caption and the GIF one palette (lecture_animation_options).
  bool startAnimationExport(const QString& path, bool sideBySide, bool withChart, QSize size, double scale,
                            double fontScale, double fps, bool hideFrees, bool inPhase = true);

 signals:
  void animationWritten(const QString& path, int frames);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  // main_window.cpp
  void buildCentre();
  void buildToolbar();
  void connectWork();
  void onRunsChanged();
  // The comparison header's bands: predicted, measured, and the host tier's
  // predictions when a compared strategy offloads.
  void setComparisonGroups(bool hostTier);
  void syncCursor();
  void updateRunAction();
  QString runningText() const;  // the activity bar's label while Run works
  void updateTabTitles();
  void addTradeoffTab();
  void startSweep();
  // main_window_menus.cpp
  void buildMenus();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void addRunDeviceMenu(QMenu* run);
  void showShortcuts();
  void showPictureHelp();
  // main_window_export.cpp
  void exportTimeline(const QString& ext);
  void exportGraph(const QString& ext);
  void exportData(const QString& ext);
  void exportAnimation();
  void exportTorchPlan();
  QString askExportPath(const QString& what, const QString& filter, const QString& ext);

  StudioDocument* doc_;
  PlaybackController* player_;
  QStackedWidget* graphStack_;
  GraphView* graph_;
  SideBySideView* sideBySide_;
  QLabel* caption_;
  TransportBar* transport_;
  QWidget* timelineTab_;
  TimelineChart* chart_;
  StepMemoryBar* stepBar_;
  ComparisonModel* table_;
  QTableView* tableView_;
  StrategyPanel* panel_;
  QDockWidget* dock_;
  QTabWidget* tabs_;
  QLineEdit* specEdit_;
  QComboBox* shownRun_;
  QComboBox* microK_;
  void fillMicroBatchChoices();
  QMenu* recentMenu_ = nullptr;
  RunController* runner_;
  SweepController* sweeper_;
  ParallelController* parallel_;
  ParallelView* parallelView_ = nullptr;
  void showParallel(const QString& model, const QString& spec, const QString& strategy);
  ActivityBar* activity_;
  QAction* runAction_ = nullptr;
  QAction* whyAction_ = nullptr;
  QLineEdit* findEdit_ = nullptr;
  QAction* sideBySideAction_ = nullptr;
  QAction* presentAction_ = nullptr;
  TradeoffChart* tradeoff_ = nullptr;
  bool tradeoffStale_ = true;
  // Presentation mode: what to restore.
  bool presenting_ = false;
  QByteArray savedState_;
  bool wasMaximized_ = false;
  int animationJob_ = 0;
  JobTracker exportJobs_;  // last member: joined first
};

}  // namespace remat
