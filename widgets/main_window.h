// Remat Studio's window: graph with caption and transport on top, memory
// timeline / comparison table below, strategy panel docked at the left.
// Menus: open model (file or preset spec), recent files, exports, Run.
// Logic lives in StudioDocument, PlaybackController, ComparisonModel and
// RunController; this class wires them to widgets and remembers settings.
#pragma once
#include <QMainWindow>

class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QTabWidget;
class QTableView;

namespace remat {
class ActivityBar;
class ComparisonModel;
class GraphView;
class PlaybackController;
class RunController;
class StrategyPanel;
class StudioDocument;
class SweepController;
class TradeoffChart;
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
  TradeoffChart* tradeoffTab() const { return tradeoff_; }
  RunController* runner() const { return runner_; }
  SweepController* sweeper() const { return sweeper_; }
  ActivityBar* activity() const { return activity_; }
  QAction* runAction() const { return runAction_; }
  // The Run action: executes the valid strategies on the CPU in a worker.
  void startRun();
  // Stops the run, the sweep and the strategies still computing.
  void cancelAll();

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
  void addTradeoffTab();
  void startSweep();
  void updateRunAction();

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
  SweepController* sweeper_;
  ActivityBar* activity_;
  QAction* runAction_ = nullptr;
  // Trade-off tab: swept for the model when the tab is shown.
  TradeoffChart* tradeoff_ = nullptr;
  bool tradeoffStale_ = true;
};

}  // namespace remat
