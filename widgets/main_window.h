// Remat Studio's window: graph with caption and transport on top, memory
// timeline / comparison table below, strategy panel docked at the left.
// Menus: open model (file or preset spec), recent files, exports, Run.
// Logic lives in StudioDocument, PlaybackController, ComparisonModel and
// RunController; this class wires them to widgets and remembers settings.
#pragma once
#include <QMainWindow>
#include <QPointer>
#include <QThread>
#include <atomic>
#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTableView;

namespace remat {
class ComparisonModel;
class GraphView;
class PlaybackController;
class RunController;
class StrategyPanel;
class StudioDocument;
class TimelineChart;
class TransportBar;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads a preset spec or a file; errors go to a dialog (or, with
  // `quiet`, only to the return value) and the current model stays.
  bool openModel(const QString& specOrPath, bool quiet = false);
  StudioDocument* document() const { return doc_; }
  PlaybackController* player() const { return player_; }
  GraphView* graphView() const { return graph_; }
  TimelineChart* timeline() const { return chart_; }
  ComparisonModel* comparison() const { return table_; }
  StrategyPanel* strategyPanel() const { return panel_; }
  QLabel* captionLabel() const { return caption_; }
  QTabWidget* tabs() const { return tabs_; }
  QWidget* tradeoffTab() const { return tradeoff_; }  // nullptr when the build has none
  RunController* runner() const { return runner_; }
  // The Run action: executes the valid strategies on the CPU in a worker.
  void startRun();
  // File › Open PyTorch snapshot: against the current strategy (SnapshotDialog).
  void openSnapshot();

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildMenus();
  void onRunsChanged();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void exportTimeline(const QString& ext);
  void exportGraph(const QString& ext);
  void exportData(const QString& ext);
  QString askExportPath(const QString& what, const QString& ext);
  void maybeAddTradeoffTab();

  StudioDocument* doc_;
  PlaybackController* player_;
  GraphView* graph_;
  QLabel* caption_;
  TransportBar* transport_;
  TimelineChart* chart_;
  ComparisonModel* table_;
  QTableView* tableView_;
  StrategyPanel* panel_;
  QTabWidget* tabs_;
  QLineEdit* specEdit_;
  QComboBox* shownRun_;
  QMenu* recentMenu_ = nullptr;
  RunController* runner_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  QAction* runAction_ = nullptr;
  // Trade-off tab (widgets/tradeoff_chart.h, when the build has it): the sweep
  // runs in a worker per model; older sweeps are cancelled.
  QWidget* tradeoff_ = nullptr;
  void startSweep();
  std::vector<QPointer<QThread>> sweeps_;
  std::shared_ptr<std::atomic<bool>> sweepCancel_;
  int sweepGeneration_ = 0;
};

}  // namespace remat
