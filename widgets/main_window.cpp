#include "widgets/main_window.h"

#include <QAction>
#include <algorithm>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>

#include "core/errors.h"
#include "widgets/activity_bar.h"
#include "widgets/comparison_model.h"
#include "widgets/exporter.h"
#include "widgets/graph_view.h"
#include "widgets/playback_controller.h"
#include "widgets/run_controller.h"
#include "widgets/strategy_panel.h"
#include "widgets/studio_document.h"
#include "widgets/sweep_controller.h"
#include "widgets/timeline_chart.h"
#include "widgets/tradeoff_chart.h"
#include "widgets/transport_bar.h"

namespace remat {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("Remat Studio"));
  doc_ = new StudioDocument(this);
  player_ = new PlaybackController(doc_, this);
  runner_ = new RunController(this);
  sweeper_ = new SweepController(this);

  // Top: graph, caption, transport.
  auto* top = new QWidget(this);
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->setSpacing(2);
  graph_ = new GraphView(doc_, top);
  tl->addWidget(graph_, 1);
  caption_ = new QLabel(top);
  caption_->setWordWrap(true);
  caption_->setMinimumHeight(36);
  caption_->setStyleSheet("QLabel { font-size: 13px; padding: 4px 8px; background: #f1f3f6; }");
  tl->addWidget(caption_);
  transport_ = new TransportBar(doc_, player_, top);
  tl->addWidget(transport_);

  // Bottom: timeline and table.
  tabs_ = new QTabWidget(this);
  chart_ = new TimelineChart(tabs_);
  tabs_->addTab(chart_, tr("Memory timeline"));
  table_ = new ComparisonModel(this);
  tableView_ = new QTableView(tabs_);
  tableView_->setModel(table_);
  tableView_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tableView_->verticalHeader()->hide();
  tableView_->setSelectionBehavior(QAbstractItemView::SelectRows);
  tabs_->addTab(tableView_, tr("Comparison"));

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(top);
  split->addWidget(tabs_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  split->setSizes({420, 420});
  setCentralWidget(split);

  panel_ = new StrategyPanel(this);
  auto* dock = new QDockWidget(tr("Strategies"), this);
  dock->setObjectName("strategies");
  dock->setWidget(panel_);
  panel_->setMinimumWidth(340);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

  // Toolbar: model spec and the run shown in the graph.
  auto* bar = addToolBar(tr("Model"));
  bar->setObjectName("model");
  bar->addWidget(new QLabel(tr(" Model: "), bar));
  specEdit_ = new QLineEdit(bar);
  specEdit_->setPlaceholderText(tr("chain:16, mlp:8, transformer:12 or a file"));
  specEdit_->setMaximumWidth(260);
  bar->addWidget(specEdit_);
  connect(specEdit_, &QLineEdit::returnPressed, this, [this] {
    openModel(specEdit_->text().trimmed());
    graph_->setFocus();
  });
  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Show in graph: "), bar));
  shownRun_ = new QComboBox(bar);
  shownRun_->setMinimumWidth(160);
  shownRun_->setFocusPolicy(Qt::NoFocus);
  bar->addWidget(shownRun_);
  connect(shownRun_, &QComboBox::activated, this, [this](int i) { doc_->setCurrentRun(shownRun_->itemData(i).toInt()); });

  activity_ = new ActivityBar(this);
  statusBar()->addPermanentWidget(activity_);
  connect(activity_, &ActivityBar::cancelRequested, this, &MainWindow::cancelAll);
  connect(runner_, &RunController::progress, this,
          [this](double f) { activity_->set("run", tr("Running on the CPU"), f); });
  connect(runner_, &RunController::cancelled, this, [this] {
    activity_->clear("run");
    updateRunAction();
    statusBar()->showMessage(tr("Run cancelled"), 5000);
  });
  connect(runner_, &RunController::finished, this,
          [this](const std::map<std::string, MeasuredRun>& measured, const QString& error) {
            activity_->clear("run");
            updateRunAction();
            if (!error.isEmpty()) {
              statusBar()->showMessage(tr("Run: %1").arg(error), 8000);
              QMessageBox::warning(this, tr("Run"), error);
              return;
            }
            table_->setMeasured(measured);
            std::map<std::string, std::vector<uint64_t>> tl;
            for (const auto& [spec, m] : measured) tl[spec] = m.timeline;
            chart_->setMeasured(tl);
            tabs_->setCurrentWidget(tableView_);
            statusBar()->showMessage(tr("Run finished on the CPU"), 5000);
          });
  connect(doc_, &StudioDocument::computingChanged, this, [this](int n) {
    if (n) activity_->set("strategies", tr("Computing %n strateg(y/ies)", "", n));
    else activity_->clear("strategies");
  });

  connect(doc_, &StudioDocument::runsChanged, this, &MainWindow::onRunsChanged);
  connect(doc_, &StudioDocument::stepChanged, this, [this](std::size_t s) {
    chart_->setCursor(s);
    caption_->setText(doc_->caption());
  });
  connect(doc_, &StudioDocument::currentRunChanged, this, [this](int run) {
    const int i = shownRun_->findData(run);
    if (i >= 0) shownRun_->setCurrentIndex(i);
    caption_->setText(doc_->caption());
  });
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    specEdit_->setText(doc_->source());
    setWindowTitle(tr("Remat Studio: %1").arg(doc_->source()));
    table_->setMeasured({});  // measurements of another model
    updateRunAction();
  });
  connect(panel_, &StrategyPanel::specsChanged, this, [this](const QStringList& s) { doc_->setSpecs(s); });
  connect(graph_, &GraphView::nodeClicked, doc_, &StudioDocument::toggleCheckpoint);

  buildMenus();
  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  const QStringList specs = settings.value("strategies", StudioDocument::defaultSpecs()).toStringList();
  doc_->setSpecs(specs.isEmpty() ? StudioDocument::defaultSpecs() : specs);
  if (!openModel(settings.value("model", "chain:16").toString(), true)) openModel("chain:16", true);
  addTradeoffTab();
  resize(settings.contains("window/geometry") ? size() : QSize(1400, 900));
}

MainWindow::~MainWindow() = default;

void MainWindow::cancelAll() {
  runner_->cancel();
  sweeper_->cancel();
  doc_->cancelComputing();
}

void MainWindow::closeEvent(QCloseEvent* e) {
  cancelAll();
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("model", doc_->source());
  QStringList specs;
  for (const QString& s : doc_->specs())
    if (!s.startsWith("manual:")) specs << s;
  settings.setValue("strategies", specs);
  e->accept();
}

bool MainWindow::openModel(const QString& specOrPath, bool quiet) {
  if (specOrPath.isEmpty()) return false;
  try {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    doc_->loadModel(specOrPath);
    QApplication::restoreOverrideCursor();
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    specEdit_->setText(doc_->source());  // the box names the model that is drawn
    if (!quiet) QMessageBox::warning(this, tr("Open model"), QString::fromStdString(e.what()));
    return false;
  }
  if (QFileInfo::exists(specOrPath)) addRecent(QFileInfo(specOrPath).absoluteFilePath());
  return true;
}

void MainWindow::onRunsChanged() {
  table_->setRuns(&doc_->model(), doc_->runs());
  chart_->setRuns(doc_->runs(), QString::fromStdString(doc_->model().name));
  chart_->setCursor(doc_->step());
  panel_->setSpecs(doc_->specs());
  panel_->setRuns(doc_->runs());
  const QSignalBlocker block(shownRun_);
  shownRun_->clear();
  for (int i = 0; i < doc_->runCount(); ++i) {
    const StrategyRun& r = doc_->runs()[std::size_t(i)];
    if (r.ok()) shownRun_->addItem(QString::fromStdString(r.name), i);
  }
  const int i = shownRun_->findData(doc_->currentRun());
  if (i >= 0) shownRun_->setCurrentIndex(i);
  caption_->setText(doc_->caption());
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open model..."), this, [this] {
    QSettings s;
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), s.value("lastDir").toString(),
                                                      tr("Models (*.json *.onnx);;All files (*)"));
    if (path.isEmpty()) return;
    s.setValue("lastDir", QFileInfo(path).absolutePath());
    openModel(path);
  });
  open->setShortcut(QKeySequence::Open);
  recentMenu_ = file->addMenu(tr("Open &recent"));
  rebuildRecentMenu();
  QMenu* presets = file->addMenu(tr("&Presets"));
  for (const char* p : {"chain:16", "chain:64", "chain:1000", "mlp:8", "mlp:32", "transformer:4", "transformer:12",
                        "transformer:84"})
    presets->addAction(p, this, [this, p] { openModel(p); });
  presets->addSeparator();
  presets->addAction(tr("Other spec..."), this, [this] {
    bool ok = false;
    const QString s = QInputDialog::getText(this, tr("Model spec"), tr("Spec (chain:N, mlp:N, transformer:L ...):"),
                                            QLineEdit::Normal, doc_->source(), &ok);
    if (ok) openModel(s.trimmed());
  });
  file->addSeparator();
  QMenu* exp = file->addMenu(tr("&Export"));
  exp->addAction(tr("Timeline as PNG..."), this, [this] { exportTimeline("png"); });
  exp->addAction(tr("Timeline as SVG..."), this, [this] { exportTimeline("svg"); });
  exp->addAction(tr("Graph at this step as PNG..."), this, [this] { exportGraph("png"); });
  exp->addAction(tr("Graph at this step as SVG..."), this, [this] { exportGraph("svg"); });
  exp->addAction(tr("Data as CSV (timelines)..."), this, [this] { exportData("csv"); });
  exp->addAction(tr("Data as JSON (comparison)..."), this, [this] { exportData("json"); });
  file->addSeparator();
  file->addAction(tr("&Quit"), this, &QWidget::close)->setShortcut(QKeySequence::Quit);

  QMenu* play = menuBar()->addMenu(tr("&Playback"));
  auto add = [&](const QString& text, QKeySequence key, auto slot) {
    QAction* a = play->addAction(text, player_, slot);
    a->setShortcut(key);
    a->setShortcutContext(Qt::WindowShortcut);
    addAction(a);  // works while the menu bar is hidden too
    return a;
  };
  add(tr("Play/pause"), Qt::Key_Space, &PlaybackController::togglePlay);
  add(tr("Step back"), Qt::Key_Left, &PlaybackController::stepBack);
  add(tr("Step forward"), Qt::Key_Right, &PlaybackController::stepForward);
  add(tr("To start"), Qt::Key_Home, &PlaybackController::toStart);
  add(tr("To end"), Qt::Key_End, &PlaybackController::toEnd);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("Fit graph"), graph_, &GraphView::fitToView)->setShortcut(Qt::Key_F);
  view->addAction(tr("Zoom in"), this, [this] { graph_->zoomBy(1.25, graph_->rect().center()); })
      ->setShortcut(QKeySequence::ZoomIn);
  view->addAction(tr("Zoom out"), this, [this] { graph_->zoomBy(0.8, graph_->rect().center()); })
      ->setShortcut(QKeySequence::ZoomOut);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  runAction_ = run->addAction(tr("Run selected strategies on the CPU"), this, &MainWindow::startRun);
  runAction_->setShortcut(Qt::CTRL | Qt::Key_R);
  updateRunAction();
}

void MainWindow::updateRunAction() {
  if (!runAction_) return;
  // Say why Run cannot execute this model before it is pressed.
  const QString why = RunController::cannotRun(doc_->model());
  runAction_->setEnabled(why.isEmpty() && !runner_->running());
  runAction_->setText(why.isEmpty() ? tr("Run selected strategies on the CPU") : tr("Run (cannot: %1)").arg(why));
  runAction_->setToolTip(why.isEmpty() ? tr("Execute the compared strategies for real and measure them") : why);
  runAction_->setStatusTip(runAction_->toolTip());
}

void MainWindow::startRun() {
  if (runner_->running() || !RunController::cannotRun(doc_->model()).isEmpty()) return;
  if (!runner_->start(doc_->model(), doc_->runs())) return;
  runAction_->setEnabled(false);
  activity_->set("run", tr("Running on the CPU"), 0);
}

void MainWindow::addRecent(const QString& path) {
  QSettings s;
  QStringList r = s.value("recentFiles").toStringList();
  r.removeAll(path);
  r.prepend(path);
  while (r.size() > 8) r.removeLast();
  s.setValue("recentFiles", r);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  if (!recentMenu_) return;
  recentMenu_->clear();
  const QStringList r = QSettings().value("recentFiles").toStringList();
  for (const QString& p : r) recentMenu_->addAction(p, this, [this, p] { openModel(p); });
  recentMenu_->setEnabled(!r.isEmpty());
}

QString MainWindow::askExportPath(const QString& what, const QString& ext) {
  QSettings s;
  const QString dir = s.value("exportDir").toString();
  const QString base = QString::fromStdString(doc_->model().name).replace(':', '_') + "_" + what + "." + ext;
  const QString path = QFileDialog::getSaveFileName(this, tr("Export %1").arg(what), dir + "/" + base,
                                                    QString("%1 (*.%2)").arg(ext.toUpper(), ext));
  if (!path.isEmpty()) s.setValue("exportDir", QFileInfo(path).absolutePath());
  return path;
}

void MainWindow::exportTimeline(const QString& ext) {
  const QString path = askExportPath("timeline", ext);
  if (path.isEmpty()) return;
  QSettings s;
  bool ok = false;
  const QString size = QInputDialog::getText(this, tr("Picture size"), tr("Size in pixels (WIDTHxHEIGHT):"),
                                             QLineEdit::Normal, s.value("exportSize", "1200x600").toString(), &ok);
  if (!ok) return;
  try {
    TimelineExport o;
    o.size = parse_size(size.toStdString());
    o.devicePixelRatio = devicePixelRatioF();
    o.title = QString::fromStdString(doc_->model().name);
    std::map<std::string, std::vector<uint64_t>> measured;
    for (const auto& [spec, m] : table_->measured()) measured[spec] = m.timeline;
    o.measured = measured;
    export_timeline(doc_->runs(), path.toStdString(), o);
    s.setValue("exportSize", size);
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportGraph(const QString& ext) {
  if (!doc_->current()) return;
  const QString path = askExportPath("graph", ext);
  if (path.isEmpty()) return;
  try {
    export_graph(doc_->model(), *doc_->current(), doc_->step(), path.toStdString(), graph_->size().expandedTo({400, 200}),
                 devicePixelRatioF());
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportData(const QString& ext) {
  const QString path = askExportPath(ext == "csv" ? "timelines" : "comparison", ext);
  if (path.isEmpty()) return;
  try {
    if (ext == "csv") export_csv(doc_->model(), doc_->runs().copy(), path.toStdString());
    else export_json(doc_->model(), doc_->runs().copy(), path.toStdString());
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

void MainWindow::addTradeoffTab() {
  tradeoff_ = new TradeoffChart(tabs_);
  tabs_->addTab(tradeoff_, tr("Trade-off"));
  // A clicked point (a named strategy or a budget on the front) becomes a
  // compared strategy and is shown in the graph.
  connect(tradeoff_, &TradeoffChart::pointClicked, this, [this](const QString& spec) { doc_->showSpec(spec); });
  // The sweep is computed for the tab when it is shown: a new model only marks it stale.
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    sweeper_->cancel();
    tradeoffStale_ = true;
    if (tabs_->currentWidget() == tradeoff_) startSweep();
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == tradeoff_ && tradeoffStale_) startSweep();
  });
  connect(sweeper_, &SweepController::progress, this,
          [this](double f) { activity_->set("sweep", tr("Computing the trade-off"), f); });
  connect(sweeper_, &SweepController::ready, this, [this](const QString& title, const SweepResult& r) {
    activity_->clear("sweep");
    tradeoff_->setSweep(title, r);
  });
  connect(sweeper_, &SweepController::failed, this, [this](const QString& m) {
    activity_->clear("sweep");
    statusBar()->showMessage(tr("Trade-off: %1").arg(m), 8000);
  });
  connect(sweeper_, &SweepController::cancelled, this, [this] {
    activity_->clear("sweep");
    tradeoffStale_ = true;  // computed again when the tab is shown again
  });
}

void MainWindow::startSweep() {
  tradeoffStale_ = false;
  activity_->set("sweep", tr("Computing the trade-off"), 0);
  sweeper_->start(doc_->sharedModel());
}

}  // namespace remat
