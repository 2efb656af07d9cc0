// Run › Parallel: the dialog, the background simulation and the Parallel tab.
#include <QStatusBar>
#include <QTabWidget>

#include "widgets/controllers/parallel_controller.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/main_window.h"
#include "widgets/views/parallel_dialog.h"
#include "widgets/views/parallel_view.h"

namespace remat {

ParallelDialog* MainWindow::openParallel() {
  auto* d = new ParallelDialog(doc_->source(), spec_texts(doc_->specs()), this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  connect(d, &QDialog::accepted, this, [this, d] { showParallel(d->model(), d->parallelSpec(), d->strategy()); });
  d->show();
  return d;
}

void MainWindow::showParallel(const QString& model, const QString& spec, const QString& strategy) {
  if (!parallelView_) {
    parallelView_ = new ParallelView(tabs_);
    tabs_->addTab(parallelView_, tr("Parallel"));
    connect(parallel_, &ParallelController::computed, this, [this] {
      parallelView_->setReport(*parallel_->report());
      statusBar()->showMessage(tr("Parallel: %1 stages simulated").arg(parallel_->report()->stages.size()), 5000);
    });
    connect(parallel_, &ParallelController::failed, parallelView_, &ParallelView::setError);
  }
  tabs_->setCurrentWidget(parallelView_);
  if (parallel_->start(model, spec, strategy)) statusBar()->showMessage(tr("Parallel: simulating %1 ...").arg(spec));
}

}  // namespace remat
