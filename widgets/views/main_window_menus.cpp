// The window's menus, recent files, help and presentation mode.
#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QImage>
#include <QPainter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <cmath>
#include <QActionGroup>
#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>
#include <QSignalBlocker>
#include <QTabWidget>
#include <QToolBar>

#include "widgets/controllers/playback_controller.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/graph_painter.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/main_window.h"
#include "widgets/views/node_style.h"
#include "widgets/views/side_by_side_view.h"
#include "widgets/views/time_model_dialog.h"
#include "widgets/views/timeline_chart.h"
#include "widgets/views/transport_bar.h"

namespace remat {
namespace {
constexpr double kPresentationFontScale = 1.8;
}

QAction* MainWindow::action(const QString& text) const {
  for (QAction* a : findChildren<QAction*>())
    if (QString(a->text()).remove('&') == text) return a;
  return nullptr;
}

void MainWindow::buildMenus() {
  // Every shortcut works while the menu bar is hidden (presentation mode).
  auto shortcut = [this](QAction* a, QKeySequence key) {
    a->setShortcut(key);
    a->setShortcutContext(Qt::WindowShortcut);
    addAction(a);
    return a;
  };

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
                        "transformer:84", "", "gpt:2", "gpt:12", "resnet:18", "resnet:50"}) {
    if (!*p) {
      presets->addSeparator();  // real architectures: GPT-2 (causal attention), torchvision's ResNets
      continue;
    }
    presets->addAction(p, this, [this, p] { openModel(p); });
  }
  presets->addSeparator();
  presets->addAction(tr("Other spec..."), this, [this] {
    bool ok = false;
    const QString s = QInputDialog::getText(this, tr("Model spec"), tr("Spec (chain:N, mlp:N, transformer:L, gpt:L, resnet:18 ...):"),
                                            QLineEdit::Normal, doc_->source(), &ok);
    if (ok) openModel(s.trimmed());
  });
  file->addAction(tr("Open PyTorch &snapshot..."), this, &MainWindow::openSnapshot);
  file->addSeparator();
  QMenu* exp = file->addMenu(tr("&Export"));
  exp->addAction(tr("Timeline as PNG..."), this, [this] { exportTimeline("png"); });
  exp->addAction(tr("Timeline as SVG..."), this, [this] { exportTimeline("svg"); });
  exp->addAction(tr("Graph at this step as PNG..."), this, [this] { exportGraph("png"); });
  exp->addAction(tr("Graph at this step as SVG..."), this, [this] { exportGraph("svg"); });
  exp->addSeparator();
  exp->addAction(tr("Data as CSV (timelines)..."), this, [this] { exportData("csv"); });
  exp->addAction(tr("Data as JSON (comparison)..."), this, [this] { exportData("json"); });
  exp->addSeparator();
  exp->addAction(tr("PyTorch plan (current strategy)..."), this, &MainWindow::exportTorchPlan)
      ->setToolTip(tr("What PyTorch keeps and recomputes under the current strategy, for remat_capture.apply "
                      "(models captured by remat_capture)"));
  QAction* anim = file->addAction(tr("Export &animation..."), this, &MainWindow::exportAnimation);
  anim->setToolTip(tr("The graph through every step as GIF, MP4 or WebM, side by side, with the chart"));
  file->addSeparator();
  file->addAction(tr("&Quit"), this, &QWidget::close)->setShortcut(QKeySequence::Quit);

  QMenu* play = menuBar()->addMenu(tr("&Playback"));
  auto add = [&](const QString& text, QKeySequence key, auto slot) {
    return shortcut(play->addAction(text, player_, slot), key);
  };
  add(tr("Play/pause"), Qt::Key_Space, &PlaybackController::togglePlay);
  add(tr("Step back"), Qt::Key_Left, &PlaybackController::stepBack);
  add(tr("Step forward"), Qt::Key_Right, &PlaybackController::stepForward);
  add(tr("To start"), Qt::Key_Home, &PlaybackController::toStart);
  add(tr("To end"), Qt::Key_End, &PlaybackController::toEnd);
  add(tr("Jump to peak"), Qt::Key_P, &PlaybackController::toPeak);
  play->addSeparator();
  QAction* hide = play->addAction(tr("Hide free instructions"));
  hide->setCheckable(true);
  hide->setToolTip(tr("Count only fwd and bwd instructions as steps; frees happen between them"));
  connect(hide, &QAction::toggled, doc_, &StudioDocument::setHideFrees);
  shortcut(hide, Qt::Key_H);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  shortcut(view->addAction(tr("Fit graph"), graph_, &GraphView::fitToView), Qt::Key_F);
  // Ctrl+= (the key under +), Ctrl++ and Ctrl+- zoom, in presentation mode too.
  auto zoom = [this](double f) { graph_->zoomBy(f, graph_->rect().center()); };
  QAction* zoomIn = view->addAction(tr("Zoom in"), this, [zoom] { zoom(1.25); });
  shortcut(zoomIn, QKeySequence::ZoomIn);
  zoomIn->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Equal), QKeySequence(Qt::CTRL | Qt::Key_Plus)});
  QAction* zoomOut = view->addAction(tr("Zoom out"), this, [zoom] { zoom(0.8); });
  shortcut(zoomOut, QKeySequence::ZoomOut);
  zoomOut->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Minus)});
  QAction* find = view->addAction(tr("Find op..."), this, [this] {
    if (presenting_) setPresentation(false);  // the box lives in the toolbar
    findEdit_->setFocus(Qt::ShortcutFocusReason);
    findEdit_->selectAll();
  });
  shortcut(find, QKeySequence::Find);
  view->addSeparator();
  view->addAction(sideBySideAction_);
  presentAction_ = view->addAction(tr("Presentation mode"));
  presentAction_->setCheckable(true);
  presentAction_->setToolTip(tr("Full-screen graph, large text, keyboard stepping (F5; Esc leaves)"));
  connect(presentAction_, &QAction::toggled, this, &MainWindow::setPresentation);
  shortcut(presentAction_, Qt::Key_F5);
  view->addSeparator();
  QAction* panel = dock_->toggleViewAction();
  panel->setText(tr("Strategies panel"));
  view->addAction(panel);
  QAction* own = view->addAction(tr("Timeline: each strategy scaled to its own length"));
  own->setObjectName("ownLength");
  own->setCheckable(true);
  own->setChecked(chart_->xMode() == TimelineChart::XMode::OwnLength);
  connect(own, &QAction::toggled, this, [this](bool on) {
    if (auto* box = timelineTab_->findChild<QComboBox*>("xMode")) box->setCurrentIndex(on ? 1 : 0);
  });
  // The chart's own combo box moves the menu's check too: the two agree.
  if (auto* box = timelineTab_->findChild<QComboBox*>("xMode"))
    connect(box, &QComboBox::currentIndexChanged, own, [own](int i) {
      const QSignalBlocker block(own);
      own->setChecked(i == 1);
    });

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  runAction_ = run->addAction(tr("Run selected strategies"), this, &MainWindow::startRun);
  runAction_->setShortcut(Qt::CTRL | Qt::Key_R);
  // On a model that cannot run, Ctrl+R lists why (updateRunAction swaps the key).
  whyAction_ = run->addAction(tr("Why this model cannot run..."), this, &MainWindow::showWhyNotRun);
  whyAction_->setObjectName("whyNotRun");
  addAction(whyAction_);
  addAction(runAction_);
  addRunDeviceMenu(run);
  QAction* cancel = run->addAction(tr("Cancel what is computing"), this, [this] {
    if (presenting_) setPresentation(false);
    else cancelAll();
  });
  shortcut(cancel, Qt::Key_Escape);
  run->addSeparator();
  run->addAction(tr("Parallel: per-stage memory..."), this, [this] { openParallel(); })
      ->setToolTip(tr("Split a gpt: or transformer: preset over devices (tensor, sequence, pipeline, data "
                      "parallelism, ZeRO): each pipeline stage's memory over the schedule, and the schedule's grid"));
  run->addAction(tr("Time model rates..."), this, &MainWindow::editTimeModel)
      ->setToolTip(tr("Device throughput, host link and device memory bandwidth: where a fetch stalls the step"));
  updateRunAction();

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("What the picture shows"), this, &MainWindow::showPictureHelp);
  help->addAction(tr("Keyboard shortcuts"), this, &MainWindow::showShortcuts)->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("About Remat Studio"), this, [this] {
    QMessageBox::about(this, tr("About Remat Studio"),
                       tr("<b>Remat Studio %1</b><p>Gradient (activation) checkpointing, step by step: which tensors "
                          "a training step keeps in memory under each strategy, simulated and measured.</p>"
                          "<p>Every number in the window can be reproduced with the <tt>remat</tt> command "
                          "(<tt>remat --help</tt>).</p>")
                           .arg(QApplication::applicationVersion()));
  });
}

void MainWindow::showShortcuts() {
  QString rows;
  for (QAction* a : findChildren<QAction*>()) {
    if (a->shortcut().isEmpty() || a->text().isEmpty()) continue;
    rows += QString("<tr><td><b>%1</b></td><td>%2</td></tr>")
                .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(),
                     QString(a->text()).remove('&').toHtmlEscaped());
  }
  QMessageBox::information(this, tr("Keyboard shortcuts"), "<table cellspacing=6>" + rows + "</table>");
}

void MainWindow::editTimeModel() {
  TimeModelDialog d(doc_->timeModel(), this);
  if (d.exec() == QDialog::Accepted) doc_->setTimeModel(d.timeModel());
}

QImage legend_symbol(int entry, double radius) {
  // Entry i < NodeLook::Count: that look; Count: the view ring; Count + 1: the
  // simulate-only badge: drawn by the graph's own painter (paint_legend).
  const int side = int(std::ceil(radius * 2 + 6));
  QImage img(side, side, QImage::Format_ARGB32);
  img.fill(Qt::transparent);
  QPainter p(&img);
  p.setRenderHint(QPainter::Antialiasing);
  const LegendMask mask = entry < int(NodeLook::Count) ? legend_bit(NodeLook(entry))
                          : entry == int(NodeLook::Count) ? kViewLegendBit
                                                          : kSimulateOnlyLegendBit;
  // paint_legend draws the symbol at (8 + 7 fs, row / 2) with radius 6.5 fs.
  const double fs = radius / 6.5;
  p.translate(side / 2.0 - (8 + 7 * fs), side / 2.0 - 2 - 10 * fs);
  paint_legend(p, QRectF(0, 0, 4000, 40 * fs), fs, nullptr, mask);
  return img;
}

void MainWindow::showPictureHelp() {
  // The legend with the graph's real symbols (a filled grey dot for "not
  // computed yet" contradicted "filled = in memory").
  auto* dlg = new QDialog(this);
  dlg->setObjectName("pictureHelp");
  dlg->setAttribute(Qt::WA_DeleteOnClose);
  dlg->setWindowTitle(tr("What the picture shows"));
  auto* text = new QTextBrowser(dlg);
  QString rows;
  const std::vector<QString> labels = legend_labels(kFullLegend);
  for (int i = 0; i <= int(NodeLook::Count) + 1; ++i) {
    const QString label = i < int(NodeLook::Count) ? QString(node_style(NodeLook(i)).legend)
                          : i == int(NodeLook::Count) ? labels[labels.size() - 2]
                                                      : labels.back();
    text->document()->addResource(QTextDocument::ImageResource, QUrl(QString("legend:%1").arg(i)),
                                  legend_symbol(i, 9));
    rows += QString("<tr><td><img src='legend:%1'></td><td valign='middle'>%2</td></tr>").arg(i).arg(label.toHtmlEscaped());
  }
  text->setHtml(
      tr("<p>The top row holds the forward activations (circles), the bottom row their gradients and backward steps "
         "(squares). <b>A filled node is in memory</b>; a pale dashed one was computed and freed (a strategy that "
         "recomputes it makes it again later, as planned); a cross-hatched one "
         "with a down arrow waits in host memory (offload) and comes back at its fetch (up arrow); a yellow one with a "
         "small blue core is held only as its compressed copy (smaller, decompressed before the recompute that "
         "reads it). Under dtr, which decides while the step runs, a white one hatched and dotted in vermillion was "
         "evicted by its heuristic because memory was full, and is recomputed when it is read again; dtr's other "
         "frees, those of its recompute-all fallback included, are drawn freed, as the caption words them. The "
         "graph's legend lists only the states that occur in the compared strategies.</p>"
         "<table cellspacing=4>%1</table><p>Arrows go from the running instruction to the tensors it reads "
         "(highlighted). The readout gives the bytes resident now and the strategy's peak; <b>P</b> jumps to the "
         "peak. View › Side by side plays up to three strategies at the same phase of the step; Ctrl+F finds an op "
         "by name.</p>")
          .arg(rows));
  auto* v = new QVBoxLayout(dlg);
  v->addWidget(text);
  auto* ok = new QDialogButtonBox(QDialogButtonBox::Ok, dlg);
  connect(ok, &QDialogButtonBox::accepted, dlg, &QDialog::accept);
  v->addWidget(ok);
  dlg->resize(620, 640);
  dlg->show();
}

void MainWindow::setPresentation(bool on) {
  if (on == presenting_) return;
  presenting_ = on;
  if (presentAction_ && presentAction_->isChecked() != on) presentAction_->setChecked(on);
  const double scale = on ? kPresentationFontScale : 1;
  if (on) {
    savedState_ = saveState();
    wasMaximized_ = isMaximized();
    menuBar()->hide();
    for (QToolBar* t : findChildren<QToolBar*>()) t->hide();
    dock_->hide();
    tabs_->hide();
    statusBar()->hide();
    transport_->hide();
    showFullScreen();
  } else {
    menuBar()->show();
    tabs_->show();
    statusBar()->show();
    transport_->show();
    restoreState(savedState_);
    if (wasMaximized_) showMaximized();
    else showNormal();
  }
  graph_->setFontScale(scale);
  sideBySide_->setFontScale(scale);
  caption_->setStyleSheet(QString("QLabel { font-size: %1px; padding: 4px 8px; background: #f1f3f6; }")
                              .arg(int(13 * scale)));
  graph_->setFocus();
}

// Run › Run on: the GPU when one answers (else the CPU, saying why), the CPU,
// or the GPU only; as `remat run --backend auto|cpu|cuda`, kept in the settings.
void MainWindow::addRunDeviceMenu(QMenu* run) {
  QMenu* on = run->addMenu(tr("Run &on"));
  auto* group = new QActionGroup(on);
  const bool gpu = RunController::gpuBuilt();
  const QString noModule = tr("This build has no CUDA backend (configure with nvcc found, or -DREMAT_CUDA=ON)");
  const struct {
    RunDevice device;
    QString text, key;
  } choices[] = {{RunDevice::Auto, tr("The GPU when one answers, else the CPU"), "auto"},
                 {RunDevice::Cpu, tr("The CPU"), "cpu"},
                 {RunDevice::Gpu, tr("The GPU only"), "gpu"}};
  const QString saved = QSettings().value("runDevice", gpu ? "auto" : "cpu").toString();
  for (const auto& c : choices) {
    QAction* a = on->addAction(c.text);
    a->setObjectName("runOn_" + c.key);
    a->setCheckable(true);
    group->addAction(a);
    if (c.device != RunDevice::Cpu && !gpu) {
      a->setEnabled(false);
      a->setToolTip(noModule);
    }
    connect(a, &QAction::triggered, this, [this, device = c.device, key = c.key] {
      runner_->setDevice(device);
      QSettings().setValue("runDevice", key);
      updateRunAction();
    });
    if (c.key == saved && a->isEnabled()) {
      a->setChecked(true);
      runner_->setDevice(c.device);
    }
  }
  if (!group->checkedAction()) {  // a saved GPU choice in a build without one
    group->actions().at(1)->setChecked(true);
    runner_->setDevice(RunDevice::Cpu);
  }
  on->setToolTipsVisible(true);
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

}  // namespace remat
