#include "widgets/views/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>
#include <algorithm>
#include <limits>

#include "core/base/errors.h"
#include "widgets/controllers/parallel_controller.h"
#include "widgets/controllers/playback_controller.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/controllers/sweep_controller.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/grouped_header.h"
#include "widgets/document/run_blockers.h"
#include "widgets/views/activity_bar.h"
#include "widgets/views/elided_label.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/micro_batch_dialog.h"
#include "widgets/views/side_by_side_view.h"
#include "widgets/views/snapshot_dialog.h"
#include "widgets/views/step_memory_bar.h"
#include "widgets/views/strategy_panel.h"
#include "widgets/views/timeline_chart.h"
#include "widgets/views/tradeoff_chart.h"
#include "widgets/views/transport_bar.h"

namespace remat {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("Remat Studio"));
  doc_ = new StudioDocument(this);
  player_ = new PlaybackController(doc_, this);
  runner_ = new RunController(this);
  sweeper_ = new SweepController(this);
  parallel_ = new ParallelController(this);
  buildCentre();
  buildToolbar();
  connectWork();
  buildMenus();
  addTradeoffTab();

  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  // Schedules longer than this are refused ("too large to simulate"); the
  // default follows the memory (StudioDocument::defaultMaxInstructions).
  if (const qulonglong max = settings.value("simulation/maxInstructions").toULongLong(); max > 0)
    doc_->setMaxInstructions(max);
  // The saved strategies belong to the saved model: opened first, then chosen.
  if (!openModel(settings.value("model", "chain:16").toString(), true)) openModel("chain:16", true);
  const QStringList specs = settings.value("strategies", StudioDocument::defaultSpecs()).toStringList();
  doc_->setSpecs(specs.isEmpty() ? StudioDocument::defaultSpecs() : specs);
  panel_->setSpecs(doc_->specs());
  resize(settings.contains("window/geometry") ? size() : QSize(1400, 900));
}

MainWindow::~MainWindow() = default;

void MainWindow::buildCentre() {
  // Top: the graph or the side-by-side lanes, caption, transport.
  auto* top = new QWidget(this);
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->setSpacing(2);
  graphStack_ = new QStackedWidget(top);
  graph_ = new GraphView(doc_, graphStack_);
  sideBySide_ = new SideBySideView(doc_, graphStack_);
  graphStack_->addWidget(graph_);
  graphStack_->addWidget(sideBySide_);
  tl->addWidget(graphStack_, 1);
  caption_ = new QLabel(top);
  caption_->setWordWrap(true);
  caption_->setMinimumHeight(36);
  caption_->setStyleSheet("QLabel { font-size: 13px; padding: 4px 8px; background: #f1f3f6; }");
  tl->addWidget(caption_);
  transport_ = new TransportBar(doc_, player_, top);
  tl->addWidget(transport_);

  // Bottom: timeline (with its x-axis choice), table, trade-off.
  tabs_ = new QTabWidget(this);
  timelineTab_ = new QWidget(tabs_);
  auto* tv = new QVBoxLayout(timelineTab_);
  tv->setContentsMargins(0, 2, 0, 0);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("x axis:"), timelineTab_));
  auto* xMode = new QComboBox(timelineTab_);
  xMode->addItem(tr("instructions"));
  xMode->addItem(tr("own length"));  // short: the box shows it whole
  xMode->setToolTip(tr("own length: each strategy scaled to its own length (% of its steps), so recompute-all "
                       "does not squeeze the others; instructions: one x unit per instruction"));
  xMode->setObjectName("xMode");
  // As wide as its short entry: the long one would hold the window wider.
  xMode->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  xMode->setMinimumContentsLength(12);
  controls->addWidget(xMode);
  auto* reset = new QPushButton(tr("Whole schedule"), timelineTab_);
  reset->setToolTip(tr("Undo the zoom (double-click the chart does it too)"));
  controls->addWidget(reset);
  auto* hint = new ElidedLabel(tr("drag or wheel to zoom · click to show that step · hover for values"), timelineTab_);
  hint->setObjectName("timelineHint");
  controls->addWidget(hint, 1);
  // Gradient accumulation: simulate one micro-batch of batch/K.
  controls->addWidget(new QLabel(tr("micro-batches K:"), timelineTab_));
  microK_ = new QComboBox(timelineTab_);
  microK_->setObjectName("microBatches");
  controls->addWidget(microK_);
  auto* kSweep = new QPushButton(tr("K sweep…"), timelineTab_);
  kSweep->setObjectName("microBatchSweep");
  kSweep->setToolTip(tr("Activations, whole step and FLOPs of the compared strategies for each K (remat simulate "
                        "--micro-batches 1,2,4,8)"));
  controls->addWidget(kSweep);
  connect(kSweep, &QPushButton::clicked, this, [this] { openMicroBatchSweep(); });
  tv->addLayout(controls);
  // The timeline, and beside it the whole step's memory per strategy.
  auto* beside = new QSplitter(Qt::Horizontal, timelineTab_);
  chart_ = new TimelineChart(beside);
  stepBar_ = new StepMemoryBar(beside);
  beside->addWidget(chart_);
  beside->addWidget(stepBar_);
  // In proportion, and resized in proportion: on a narrow window the bars
  // give up width too, not the timeline alone.
  beside->setStretchFactor(0, 7);
  beside->setStretchFactor(1, 3);
  beside->setSizes({1000, 430});
  tv->addWidget(beside, 1);
  if (Optimizer o; parse_optimizer(QSettings().value("step/optimizer", "adam").toString().toStdString(), o))
    stepBar_->setOptimizer(o);
  connect(stepBar_, &StepMemoryBar::optimizerChanged, this, [](Optimizer o) {
    QSettings().setValue("step/optimizer", QString::fromUtf8(optimizer_name(o).data(), int(optimizer_name(o).size())));
  });
  tabs_->addTab(timelineTab_, tr("Memory timeline"));
  connect(xMode, &QComboBox::currentIndexChanged, this, [this](int i) {
    chart_->setXMode(i == 1 ? TimelineChart::XMode::OwnLength : TimelineChart::XMode::Steps);
    QSettings().setValue("timeline/ownLength", i == 1);
  });
  // Each strategy on its own length by default: on the instruction axis
  // recompute-all squeezes the others into its first tenth.
  xMode->setCurrentIndex(QSettings().value("timeline/ownLength", true).toBool() ? 1 : 0);
  connect(reset, &QPushButton::clicked, chart_, &TimelineChart::resetZoom);
  connect(chart_, &TimelineChart::stepClicked, doc_, &StudioDocument::setStep);
  table_ = new ComparisonModel(this);
  tableView_ = new QTableView(tabs_);
  // Predicted | Measured, each under its band; in the measured group the
  // time and the gradient match come first, so that they stay in view at
  // 1400 px (the allocator's figures follow).
  auto* header = new GroupedHeader(tableView_);
  tableView_->setHorizontalHeader(header);
  tableView_->setModel(table_);
  setComparisonGroups(false);
  header->moveSection(header->visualIndex(ComparisonModel::Time), header->visualIndex(ComparisonModel::MeasuredPeak) + 1);
  header->moveSection(header->visualIndex(ComparisonModel::Match), header->visualIndex(ComparisonModel::Time) + 1);
  // The host tier's predictions last, a band of their own when shown: in the
  // predicted band they pushed the measured time and match out of view at
  // 1400 px.
  header->moveSection(header->visualIndex(ComparisonModel::HostPeak), ComparisonModel::ColumnCount - 1);
  header->moveSection(header->visualIndex(ComparisonModel::Stall), ComparisonModel::ColumnCount - 1);
  header->setSectionResizeMode(QHeaderView::ResizeToContents);
  header->setHighlightSections(false);
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
  dock_ = new QDockWidget(tr("Strategies"), this);
  dock_->setObjectName("strategies");
  dock_->setWidget(panel_);
  // The status column shown whole beside the editors ("ok, peak 714.43 MiB").
  panel_->setMinimumWidth(530);
  addDockWidget(Qt::LeftDockWidgetArea, dock_);
}

void MainWindow::buildToolbar() {
  auto* bar = addToolBar(tr("Model"));
  bar->setObjectName("model");
  bar->addWidget(new QLabel(tr(" Model: "), bar));
  specEdit_ = new QLineEdit(bar);
  specEdit_->setObjectName("modelSpec");
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
  bar->addSeparator();
  // Find a layer: op names (with their module path) and kinds.
  findEdit_ = new QLineEdit(bar);
  findEdit_->setObjectName("findOp");
  findEdit_->setPlaceholderText(tr("Find op (Ctrl+F)"));
  findEdit_->setClearButtonEnabled(true);
  findEdit_->setMaximumWidth(220);
  findEdit_->setToolTip(tr("An op's name or part of it (h3.attn, layer2.0.conv1) or its kind; Enter: next match"));
  bar->addWidget(findEdit_);
  connect(findEdit_, &QLineEdit::returnPressed, this, [this] { findOp(findEdit_->text().trimmed()); });
  bar->addSeparator();
  sideBySideAction_ = bar->addAction(tr("Side by side"));
  sideBySideAction_->setCheckable(true);
  sideBySideAction_->setShortcut(Qt::Key_S);
  sideBySideAction_->setToolTip(tr("Up to three strategies at the same phase of the step (S)"));
  connect(sideBySideAction_, &QAction::toggled, this, &MainWindow::setSideBySide);
  addAction(sideBySideAction_);
}

void MainWindow::connectWork() {
  activity_ = new ActivityBar(this);
  statusBar()->addPermanentWidget(activity_);
  connect(activity_, &ActivityBar::cancelRequested, this, &MainWindow::cancelAll);
  connect(runner_, &RunController::progress, this, [this](double f) { activity_->set("run", runningText(), f); });
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
            const QString on = RunController::backendLabel(runner_->lastBackend());
            statusBar()->showMessage(runner_->lastNoGpu().isEmpty()
                                         ? tr("Run finished on %1").arg(on)
                                         : tr("Run finished on %1 (no GPU: %2)").arg(on, runner_->lastNoGpu()),
                                     8000);
          });
  connect(doc_, &StudioDocument::computingChanged, this, [this](int n) {
    if (n) activity_->set("strategies", n == 1 ? tr("Computing 1 strategy") : tr("Computing %1 strategies").arg(n));
    else activity_->clear("strategies");
    updateTabTitles();
  });
  connect(&exportJobs_, &JobTracker::progress, this, [this](int id, double f) {
    if (id == animationJob_) activity_->set("animation", tr("Exporting the animation"), f);
  });

  connect(doc_, &StudioDocument::runsChanged, this, &MainWindow::onRunsChanged);
  connect(doc_, &StudioDocument::stepChanged, this, [this] {
    syncCursor();
    caption_->setText(doc_->caption());
  });
  connect(doc_, &StudioDocument::currentRunChanged, this, [this](int run) {
    const int i = shownRun_->findData(run);
    if (i >= 0) shownRun_->setCurrentIndex(i);
    caption_->setText(doc_->caption());
    syncCursor();
  });
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    specEdit_->setText(doc_->source());
    setWindowTitle(tr("Remat Studio: %1").arg(doc_->source()));
    table_->setMeasured({});  // measurements of another model
    panel_->setModel(doc_->model());
    panel_->setSpecs(doc_->specs());
    fillMicroBatchChoices();
    const int64_t batch = model_batch(doc_->loadedModel());
    stepBar_->setMicroBatches(doc_->microBatches(), batch / doc_->microBatches(), batch);
    updateRunAction();
  });
  connect(panel_, &StrategyPanel::specsChanged, this,
          [this](const std::vector<StrategyRequest>& s) { doc_->setSpecs(s); });
  connect(microK_, &QComboBox::activated, this, [this](int i) { doc_->setMicroBatches(microK_->itemData(i).toInt()); });
  connect(doc_, &StudioDocument::microBatchesChanged, this, [this](int k) {
    fillMicroBatchChoices();
    const int64_t batch = model_batch(doc_->loadedModel());
    stepBar_->setMicroBatches(k, batch / k, batch);
  });
  connect(doc_, &StudioDocument::microBatchesFailed, this,
          [this](const QString& m) { statusBar()->showMessage(tr("Micro-batches: %1").arg(m), 8000); });
  connect(graph_, &GraphView::nodeClicked, doc_, &StudioDocument::toggleCheckpoint);
}

void MainWindow::showStrategy(const StrategySpec& spec) {
  doc_->showSpec(spec);
  panel_->setSpecs(doc_->specs());
}

void MainWindow::setSpecs(std::vector<StrategyRequest> specs) {
  doc_->setSpecs(std::move(specs));
  panel_->setSpecs(doc_->specs());
}

void MainWindow::fillMicroBatchChoices() {
  const QSignalBlocker block(microK_);
  microK_->clear();
  const int64_t batch = model_batch(doc_->loadedModel());
  for (int k : micro_batch_choices(batch)) microK_->addItem(QString::number(k), k);
  microK_->setCurrentIndex(std::max(0, microK_->findData(doc_->microBatches())));
  microK_->setEnabled(microK_->count() > 1);
  microK_->setToolTip(microK_->count() > 1
                          ? tr("Simulate one micro-batch of batch/K (gradient accumulation: K passes per step)")
                          : tr("The batch is %1: nothing to split into micro-batches").arg(batch));
}

MicroBatchDialog* MainWindow::openMicroBatchSweep() {
  InstructionLimit limit;
  limit.max = doc_->maxInstructions();
  auto* d = new MicroBatchDialog(doc_->sharedLoadedModel(), doc_->specs(), stepBar_->optimizer(), limit, this);
  d->show();
  return d;
}

void MainWindow::cancelAll() {
  runner_->cancel();
  sweeper_->cancel();
  parallel_->cancel();
  doc_->cancelComputing();
  if (animationJob_) {
    exportJobs_.cancel(animationJob_);
    animationJob_ = 0;
    activity_->clear("animation");
    statusBar()->showMessage(tr("Animation export cancelled: no file written"), 5000);
  }
}

void MainWindow::closeEvent(QCloseEvent* e) {
  cancelAll();
  QSettings settings;
  if (presenting_) setPresentation(false);
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("model", doc_->source());
  std::vector<StrategyRequest> specs;
  for (const StrategyRequest& s : doc_->specs())
    if (!names_model_ops(s)) specs.push_back(s);  // another model's op ids
  settings.setValue("strategies", spec_texts(specs));
  e->accept();
}

bool MainWindow::openModel(const QString& specOrPath, bool quiet, QString* error) {
  if (specOrPath.isEmpty()) return false;
  try {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    doc_->loadModel(specOrPath);
    QApplication::restoreOverrideCursor();
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    specEdit_->setText(doc_->source());  // the box names the model that is drawn
    if (error) *error = QString::fromStdString(e.what());
    if (!quiet) QMessageBox::warning(this, tr("Open model"), QString::fromStdString(e.what()));
    return false;
  }
  if (QFileInfo::exists(specOrPath)) addRecent(QFileInfo(specOrPath).absoluteFilePath());
  return true;
}

void MainWindow::setComparisonGroups(bool hostTier) {
  auto* header = static_cast<GroupedHeader*>(tableView_->horizontalHeader());
  std::vector<GroupedHeader::Group> groups = {
      {tr("Predicted (simulator)"),
       {ComparisonModel::Peak, ComparisonModel::Tensors, ComparisonModel::ForwardSteps, ComparisonModel::Recomputed,
        ComparisonModel::Overhead}},
      {tr("Measured (Run)"),
       {ComparisonModel::MeasuredPeak, ComparisonModel::Time, ComparisonModel::Match, ComparisonModel::AllocatorPeak,
        ComparisonModel::ReservedPeak, ComparisonModel::Baseline}}};
  if (hostTier) groups.push_back({tr("Predicted: host tier"), {ComparisonModel::HostPeak, ComparisonModel::Stall}});
  header->setGroups(std::move(groups));
}

void MainWindow::onRunsChanged() {
  table_->setRuns(&doc_->model(), doc_->runs());
  // Offload's columns only when a compared strategy has a value there: two
  // empty columns pushed the measured time and match out of view at 1400 px.
  bool host = false;
  for (int c : {int(ComparisonModel::HostPeak), int(ComparisonModel::Stall)}) {
    bool empty = true;
    for (int r = 0; r < table_->rowCount() && empty; ++r) empty = !table_->data(table_->index(r, c)).isValid();
    tableView_->setColumnHidden(c, empty);
    host = host || !empty;
  }
  setComparisonGroups(host);
  chart_->setRuns(doc_->runs(), QString::fromStdString(doc_->model().name));
  std::map<std::string, std::vector<Stall>> stalls;
  for (int i = 0; i < doc_->runCount(); ++i)
    if (const auto p = doc_->prepared(i); p && !p->stalls.empty()) stalls[p->run.spec] = p->stalls;
  chart_->setStalls(stalls);
  stepBar_->setRuns(doc_->model(), doc_->runs());
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
  syncCursor();
  updateTabTitles();
}

void MainWindow::openSnapshot() {
  const StrategyRun* run = doc_->current();
  if (!run || !run->ok()) {
    QMessageBox::information(this, tr("PyTorch snapshot"), tr("Select a strategy to compare the snapshot with first."));
    return;
  }
  QSettings s;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open PyTorch memory snapshot"), s.value("lastDir").toString(),
                                                    tr("Snapshots (*.pickle *.pkl *.json);;All files (*)"));
  if (path.isEmpty()) return;
  (new SnapshotDialog(doc_->model(), *run, path, this))->show();
}

void MainWindow::syncCursor() {
  chart_->setCursor(doc_->step(), doc_->currentRun());
  // Every other curve shows where its strategy is at the same phase.
  std::vector<std::size_t> steps;
  for (int r = 0; r < doc_->runCount(); ++r)
    steps.push_back(doc_->phases(r) ? (r == doc_->currentRun() ? doc_->step() : doc_->stepAtPhase(r))
                                    : std::numeric_limits<std::size_t>::max());
  chart_->setPhaseDots(steps);
}

void MainWindow::updateTabTitles() {
  // A tab still computing says so.
  const int n = doc_->computing();
  tabs_->setTabText(tabs_->indexOf(timelineTab_), n ? tr("Memory timeline (computing %1…)").arg(n) : tr("Memory timeline"));
  tabs_->setTabText(tabs_->indexOf(tableView_), n ? tr("Comparison (computing %1…)").arg(n) : tr("Comparison"));
  if (tradeoff_)
    tabs_->setTabText(tabs_->indexOf(tradeoff_), sweeper_->running() ? tr("Trade-off (computing…)") : tr("Trade-off"));
}

int MainWindow::findOp(const QString& text) {
  const Model& m = doc_->model();
  if (text.isEmpty() || m.size() == 0) {
    graph_->markOp(-1);
    return -1;
  }
  // The next match after the marked one, round to the start.
  std::vector<int> matches;
  for (int v = 0; v < m.size(); ++v) {
    const std::string_view kind = kind_name(m.op(v).kind);
    if (QString::fromStdString(m.op(v).name).contains(text, Qt::CaseInsensitive) ||
        QString::fromUtf8(kind.data(), qsizetype(kind.size())).compare(text, Qt::CaseInsensitive) == 0)
      matches.push_back(v);
  }
  if (matches.empty()) {
    statusBar()->showMessage(tr("No op matches \"%1\"").arg(text), 5000);
    return -1;
  }
  const int after = graph_->markedOp();
  auto it = std::upper_bound(matches.begin(), matches.end(), after);
  const int op = it == matches.end() ? matches.front() : *it;
  if (sideBySide()) setSideBySide(false);  // the match is shown in the graph
  graph_->markOp(op);
  const std::size_t k = std::size_t(std::find(matches.begin(), matches.end(), op) - matches.begin());
  statusBar()->showMessage(tr("%1 (op %2, %3 of %4 matches; Enter: next)")
                               .arg(QString::fromStdString(m.op(op).name))
                               .arg(op)
                               .arg(k + 1)
                               .arg(matches.size()),
                           8000);
  return op;
}

void MainWindow::setSideBySide(bool on) {
  graphStack_->setCurrentWidget(on ? static_cast<QWidget*>(sideBySide_) : graph_);
  // Side by side takes two thirds of the height (three lanes), the graph half.
  // (Sizes in proportion: the splitter spreads its height by their weights.)
  if (auto* split = qobject_cast<QSplitter*>(centralWidget()); split && !presenting_)
    split->setSizes(on ? QList<int>{2000, 1000} : QList<int>{1000, 1000});
  if (sideBySideAction_ && sideBySideAction_->isChecked() != on) sideBySideAction_->setChecked(on);
}

bool MainWindow::sideBySide() const { return graphStack_->currentWidget() == sideBySide_; }

QString MainWindow::whyNotRunText() const {
  return run_blockers_html(doc_->model(), RunController::cannotRun(doc_->model()));
}

void MainWindow::showWhyNotRun() {
  if (RunController::cannotRun(doc_->model()).isEmpty()) return;
  QMessageBox box(QMessageBox::Information, tr("Why this model cannot run"), whyNotRunText(), QMessageBox::Ok, this);
  box.setTextFormat(Qt::RichText);
  box.exec();
}

void MainWindow::updateRunAction() {
  if (!runAction_) return;
  // Say why Run cannot execute this model before it is pressed, in a few
  // words (a long reason stretched the menu past the screen); Ctrl+R then
  // lists what blocks it.
  const QString why = RunController::cannotRun(doc_->model());
  runAction_->setEnabled(why.isEmpty() && !runner_->running());
  runAction_->setText(why.isEmpty() ? tr("Run selected strategies")
                                    : tr("Run (cannot: %1)").arg(run_blocker_summary(doc_->model(), why)));
  if (whyAction_) {
    whyAction_->setVisible(!why.isEmpty());
    whyAction_->setEnabled(!why.isEmpty());
    runAction_->setShortcut(why.isEmpty() ? QKeySequence(Qt::CTRL | Qt::Key_R) : QKeySequence());
    whyAction_->setShortcut(why.isEmpty() ? QKeySequence() : QKeySequence(Qt::CTRL | Qt::Key_R));
  }
  runAction_->setToolTip(why.isEmpty() ? tr("Execute the compared strategies for real on %1 and measure them")
                                             .arg(runner_->device() == RunDevice::Cpu   ? tr("the CPU")
                                                  : runner_->device() == RunDevice::Gpu ? tr("the GPU")
                                                                                        : tr("the GPU if one answers, else the CPU"))
                                       : why);
  runAction_->setStatusTip(runAction_->toolTip());
}

void MainWindow::startRun() {
  if (runner_->running() || !RunController::cannotRun(doc_->model()).isEmpty()) return;
  if (!runner_->start(doc_->model(), doc_->runs(), RunController::kRepeat, doc_->instructionLimit())) return;
  runAction_->setEnabled(false);
  activity_->set("run", runningText(), 0);
}

QString MainWindow::runningText() const {
  switch (runner_->device()) {
    case RunDevice::Cpu: return tr("Running on the CPU");
    case RunDevice::Gpu: return tr("Running on the GPU");
    case RunDevice::Auto: break;
  }
  return tr("Running");
}

void MainWindow::addTradeoffTab() {
  tradeoff_ = new TradeoffChart(tabs_);
  tabs_->addTab(tradeoff_, tr("Trade-off"));
  // A clicked point (a named strategy or a budget on the front) becomes a
  // compared strategy and is shown in the graph.
  connect(tradeoff_, &TradeoffChart::pointClicked, this, &MainWindow::showStrategy);
  // The sweep is computed for the tab when it is shown: a new model only marks it stale.
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    sweeper_->cancel();
    tradeoffStale_ = true;
    if (tabs_->currentWidget() == tradeoff_) startSweep();
  });
  // Its points are timed: other rates place them again.
  connect(doc_, &StudioDocument::timeModelChanged, this, [this] {
    sweeper_->cancel();
    tradeoffStale_ = true;
    if (tabs_->currentWidget() == tradeoff_) startSweep();
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == tradeoff_ && tradeoffStale_) startSweep();
  });
  connect(sweeper_, &SweepController::progress, this,
          [this](double f) { activity_->set("sweep", tr("Computing the trade-off"), f); });
  connect(sweeper_, &SweepController::ready, this,
          [this](const QString& title, const SweepResult& r, const std::vector<FamilyPoint>& families) {
    activity_->clear("sweep");
    tradeoff_->setSweep(title, r, families);
    updateTabTitles();
    // A strategy too large to simulate was left out: say which.
    if (!r.notes.empty()) statusBar()->showMessage(tr("Trade-off: %1").arg(QString::fromStdString(r.notes.front())), 8000);
  });
  connect(sweeper_, &SweepController::failed, this, [this](const QString& m) {
    activity_->clear("sweep");
    updateTabTitles();
    statusBar()->showMessage(tr("Trade-off: %1").arg(m), 8000);
  });
  connect(sweeper_, &SweepController::cancelled, this, [this] {
    activity_->clear("sweep");
    tradeoffStale_ = true;  // computed again when the tab is shown again
    updateTabTitles();
  });
}

void MainWindow::startSweep() {
  tradeoffStale_ = false;
  activity_->set("sweep", tr("Computing the trade-off"), 0);
  sweeper_->start(doc_->sharedModel(), doc_->maxInstructions(), doc_->timeModel());
  updateTabTitles();
}

}  // namespace remat
