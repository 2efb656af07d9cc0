// The window's exports: pictures with a size/scale/text-size dialog, data,
// and the animation, written by a background job (job_tracker.h).
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>

#include "core/io/torch_plan.h"
#include "core/model/model.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/studio_document.h"
#include "widgets/export/animation_export.h"
#include "widgets/export/export_dialog.h"
#include "widgets/export/exporter.h"
#include "widgets/views/activity_bar.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/main_window.h"
#include "widgets/views/side_by_side_view.h"
#include "widgets/views/timeline_chart.h"

namespace remat {

QString MainWindow::askExportPath(const QString& what, const QString& filter, const QString& ext) {
  const QString base = QString::fromStdString(doc_->model().name).replace(':', '_') + "_" + what + "." + ext;
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export %1").arg(what), ExportDialog::startFolder() + "/" + base, filter);
  if (!path.isEmpty()) QSettings().setValue("exportDir", QFileInfo(path).absolutePath());
  return path;
}

void MainWindow::exportTimeline(const QString& ext) {
  ExportDialog dlg(ExportDialog::Kind::Picture, this);
  if (dlg.exec() != QDialog::Accepted) return;
  const QString path = askExportPath("timeline", QString("%1 (*.%2)").arg(ext.toUpper(), ext), ext);
  if (path.isEmpty()) return;
  try {
    TimelineExport o;
    o.size = dlg.pictureSize();
    o.devicePixelRatio = dlg.scale();
    o.fontScale = dlg.fontScale();
    o.title = QString::fromStdString(doc_->model().name);
    o.ownLength = chart_->xMode() == TimelineChart::XMode::OwnLength;  // as the window's chart
    std::map<std::string, std::vector<uint64_t>> measured;
    for (const auto& [spec, m] : table_->measured()) measured[spec] = m.timeline;
    o.measured = measured;
    export_timeline(doc_->runs(), path.toStdString(), o);
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportGraph(const QString& ext) {
  if (!doc_->current()) return;
  ExportDialog dlg(ExportDialog::Kind::Picture, this);
  if (dlg.exec() != QDialog::Accepted) return;
  const QString path = askExportPath("graph", QString("%1 (*.%2)").arg(ext.toUpper(), ext), ext);
  if (path.isEmpty()) return;
  try {
    export_graph(doc_->model(), *doc_->current(), doc_->step(), path.toStdString(), dlg.pictureSize(), dlg.scale(),
                 dlg.fontScale());
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportData(const QString& ext) {
  const QString path = askExportPath(ext == "csv" ? "timelines" : "comparison",
                                     QString("%1 (*.%2)").arg(ext.toUpper(), ext), ext);
  if (path.isEmpty()) return;
  try {
    if (ext == "csv") export_csv(doc_->model(), doc_->runs().copy(), path.toStdString());
    else export_json(doc_->model(), doc_->runs().copy(), path.toStdString());
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export"), QString::fromStdString(e.what()));
  }
}

// The plan `remat export --torch-plan` writes, of the strategy shown; a
// model that was not captured is refused with make_torch_plan's message
// before any dialog.
void MainWindow::exportTorchPlan() {
  const StrategyRun* run = doc_->current();
  if (!run) return;
  try {
    const TorchPlan plan = make_torch_plan(doc_->model(), *run);
    const QString path = askExportPath(QString::fromStdString(run->name).replace(':', '_') + "_torch_plan",
                                       tr("JSON (*.json)"), "json");
    if (path.isEmpty()) return;
    check_torch_plan_path(path.toStdString());
    write_torch_plan(doc_->model(), plan, path.toStdString());
    statusBar()->showMessage(tr("Wrote %1 (%2, %3 plan)").arg(path, QString::fromStdString(plan.strategy),
                                                               QString::fromStdString(plan.kind)), 5000);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export PyTorch plan"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportAnimation() {
  if (!doc_->current()) return;
  ExportDialog dlg(ExportDialog::Kind::Animation, this);
  if (dlg.exec() != QDialog::Accepted) return;
  const QString filter = tr("GIF animation (*.gif);;MP4 video (*.mp4);;WebM video (*.webm)");
  const QString path = askExportPath("animation", filter, "gif");
  if (path.isEmpty()) return;
  startAnimationExport(path, dlg.sideBySide(), dlg.withChart(), dlg.pictureSize(), dlg.scale(), dlg.fontScale(),
                       dlg.fps(), dlg.hideFrees(), dlg.inPhase());
}

bool MainWindow::startAnimationExport(const QString& path, bool sideBySide, bool withChart, QSize size, double scale,
                                      double fontScale, double fps, bool hideFrees, bool inPhase) {
  // The runs (kept alive by the job) and the chart's backdrop, made here on
  // the GUI thread; the frames are painted and encoded in the background.
  std::vector<std::shared_ptr<const PreparedRun>> keep;
  std::vector<const StrategyRun*> runs;
  const std::vector<int> lanes = sideBySide ? sideBySide_->laneRuns() : std::vector<int>{doc_->currentRun()};
  for (int r : lanes) {
    if (auto p = doc_->prepared(r); p && p->run.ok()) {
      keep.push_back(p);
      runs.push_back(&p->run);
    }
  }
  if (runs.empty()) return false;
  AnimationOptions o = lecture_animation_options();
  o.inPhase = inPhase;
  o.size = size;
  o.scale = scale;
  o.fontScale = fontScale;
  o.fps = fps;
  o.withChart = withChart;
  o.hideFrees = hideFrees;
  try {
    (void)animation_format_of(path.toStdString());
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Export animation"), QString::fromStdString(e.what()));
    return false;
  }
  ChartBackdrop backdrop;
  if (withChart)
    backdrop = render_chart_backdrop(runs, chart_band(size, true).size().toSize(), scale, fontScale,
                                     QString::fromStdString(doc_->model().name),
                                     chart_->xMode() == TimelineChart::XMode::OwnLength);
  if (animationJob_) exportJobs_.cancel(animationJob_);
  activity_->set("animation", tr("Exporting the animation"), 0);
  struct Outcome {
    int frames = 0;
    QString error;
  };
  animationJob_ = exportJobs_.start(
      [model = doc_->sharedModel(), keep, runs, path, o, backdrop](JobToken& token) {
        Outcome out;
        try {
          out.frames = export_animation(*model, runs, path.toStdString(), o, backdrop,
                                        [&token](double f) { return token.progress(f); });
        } catch (const std::exception& e) {
          out.error = QString::fromStdString(e.what());
        }
        return out;
      },
      [this, path](Outcome out) {
        animationJob_ = 0;
        activity_->clear("animation");
        if (!out.error.isEmpty()) {
          QMessageBox::warning(this, tr("Export animation"), out.error);
          return;
        }
        statusBar()->showMessage(tr("Wrote %1 (%2 frames)").arg(path).arg(out.frames), 8000);
        emit animationWritten(path, out.frames);
      });
  return true;
}

}  // namespace remat
