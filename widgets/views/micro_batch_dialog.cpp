#include "widgets/views/micro_batch_dialog.h"

#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/base/errors.h"
#include "widgets/document/comparison_model.h"

namespace remat {

int64_t model_batch(const Model& model) {
  return model.size() == 0 || model.op(0).shape.empty() ? 1 : model.op(0).shape[0];
}

std::vector<int> micro_batch_choices(int64_t batch, int most) {
  std::vector<int> ks{1};
  for (int64_t k = 2; k <= batch && int(ks.size()) < most; k *= 2)
    if (batch % k == 0) ks.push_back(int(k));
  return ks;
}

MicroBatchDialog::MicroBatchDialog(std::shared_ptr<const Model> model, const std::vector<StrategyRequest>& specs, Optimizer optimizer,
                                   const InstructionLimit& limit, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle(tr("Micro-batches: %1").arg(QString::fromStdString(model->name)));
  setAttribute(Qt::WA_DeleteOnClose);
  auto* v = new QVBoxLayout(this);
  const int64_t batch = model_batch(*model);
  const std::vector<int> ks = micro_batch_choices(batch);
  auto* intro = new QLabel(tr("Gradient accumulation: the step's batch of %1 split into K micro-batches. The "
                              "activations are one micro-batch's; parameters, gradients and the %2 state are the same "
                              "for every K; the step runs K forward and backward passes. (remat simulate "
                              "--micro-batches %3 --optimizer %2)")
                               .arg(batch)
                               .arg(QString::fromUtf8(optimizer_name(optimizer).data(), int(optimizer_name(optimizer).size())))
                               .arg([&] {
                                 QStringList l;
                                 for (int k : ks) l << QString::number(k);
                                 return l.join(',');
                               }()) +
                               // One K only: say why rather than show a one-row table without comment.
                               (ks.size() > 1 ? QString()
                                : batch == 1
                                    ? tr("\n\nOnly K = 1: the batch is 1 sample, which cannot be split into "
                                         "micro-batches. A model captured with a larger batch (or a preset with one, "
                                         "gpt:2:128:4:64:8) shows more values of K.")
                                    : tr("\n\nOnly K = 1: the batch of %1 has no power-of-two divisor.").arg(batch)),
                           this);
  intro->setWordWrap(true);
  intro->setObjectName("intro");
  v->addWidget(intro);
  table_ = new QTableWidget(0, 6, this);
  table_->setHorizontalHeaderLabels({tr("K"), tr("batch"), tr("strategy"), tr("activations"), tr("step total"), tr("step FLOPs")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  v->addWidget(table_, 1);
  status_ = new QLabel(this);
  v->addWidget(status_);
  auto* row = new QHBoxLayout;
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  row->addWidget(progress_, 1);
  cancel_ = new QPushButton(tr("Cancel"), this);
  row->addWidget(cancel_);
  v->addLayout(row);
  resize(720, 420);

  std::vector<std::string> list;
  for (const StrategyRequest& s : specs) list.push_back(s.text);
  struct Outcome {
    std::vector<MicroBatchRow> rows;
    QString error;
  };
  status_->setText(tr("Simulating %1 strategies at %2 values of K...").arg(list.size()).arg(ks.size()));
  connect(&jobs_, &JobTracker::progress, this, [this](int id, double f) {
    if (id == job_) progress_->setValue(int(f * 1000));
  });
  job_ = jobs_.start(
      [model, list, ks, optimizer, limit](JobToken& token) {
        Outcome o;
        try {
          o.rows = micro_batch_sweep(*model, list, ks,
                                     {.optimizer = optimizer,
                                      .limit = limit,
                                      .cancel = token.flag(),
                                      .progress = [&token](int done, int total) { token.progress(double(done) / total); }});
        } catch (const InputError& e) {
          o.error = QString::fromStdString(e.what());
        }
        return o;
      },
      [this](Outcome o) {
        job_ = 0;
        rows_ = std::move(o.rows);
        progress_->setValue(1000);
        cancel_->setText(tr("Close"));
        status_->setText(o.error.isEmpty() ? tr("Done: %1 rows.").arg(rows_.size()) : o.error);
        fill();
        emit computed();
      });
  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (job_) {
      jobs_.cancel(job_);
      job_ = 0;
      status_->setText(tr("Cancelled."));
      cancel_->setText(tr("Close"));
      return;
    }
    close();
  });
}

QString MicroBatchDialog::status() const { return status_->text(); }

void MicroBatchDialog::fill() {
  table_->setRowCount(int(rows_.size()));
  for (int i = 0; i < int(rows_.size()); ++i) {
    const MicroBatchRow& r = rows_[std::size_t(i)];
    const QStringList cells{QString::number(r.k),          QString::number(r.batch),
                            QString::fromStdString(r.strategy), format_bytes(r.peak_bytes),
                            format_bytes(r.step_total_bytes), QString::number(r.step_flops, 'g', 4)};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c != 2) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(i, c, item);
    }
  }
}

}  // namespace remat
