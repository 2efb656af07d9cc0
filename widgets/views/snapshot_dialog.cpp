#include "widgets/views/snapshot_dialog.h"

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QFileInfo>
#include <QLabel>
#include <QLineSeries>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QThread>
#include <QValueAxis>
#include <QVBoxLayout>

#include "core/base/errors.h"

namespace remat {

SnapshotDialog::SnapshotDialog(const Model& model, const StrategyRun& run, const QString& path, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle(tr("PyTorch snapshot %1 against %2").arg(QFileInfo(path).fileName(), QString::fromStdString(run.name)));
  setAttribute(Qt::WA_DeleteOnClose);
  auto* layout = new QVBoxLayout(this);
  busy_ = new QProgressBar(this);
  busy_->setRange(0, 0);  // reading and parsing report no fraction
  busy_->setFormat(tr("Reading %1...").arg(path));
  cancel_ = new QPushButton(tr("Cancel"), this);
  chart_ = new QChartView(this);
  chart_->setRenderHint(QPainter::Antialiasing);
  chart_->setMinimumSize(800, 380);
  chart_->hide();
  text_ = new QLabel(this);
  text_->setWordWrap(true);
  text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(busy_);
  layout->addWidget(chart_, 1);
  layout->addWidget(text_);
  layout->addWidget(cancel_, 0, Qt::AlignRight);
  connect(cancel_, &QPushButton::clicked, this, &QDialog::reject);

  // The worker owns copies; a cancelled or closed dialog drops its result.
  QPointer<SnapshotDialog> self(this);
  auto cancelled = cancelled_;
  QThread* t = QThread::create([self, cancelled, model, run, file = path.toStdString()] {
    std::optional<SnapshotComparison> c;
    QString err;
    try {
      const auto snap = load_torch_snapshot(file);
      if (cancelled->load()) return;
      const auto curve = snapshot_curve(snap, "snapshot '" + file + "'");
      if (curve.active.empty()) throw InputError("snapshot '" + file + "': the trace has no alloc or free_completed entries");
      c = compare_snapshot(model, run, curve);
    } catch (const std::exception& e) {
      err = QString::fromStdString(e.what());
    }
    if (cancelled->load()) return;
    QMetaObject::invokeMethod(qApp, [self, c = std::move(c), err]() mutable {
      if (!self) return;
      if (c) self->show_result(std::move(*c));
      else self->show_error(err);
    });
  });
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  t->start();
}

SnapshotDialog::~SnapshotDialog() { cancelled_->store(true); }

void SnapshotDialog::show_error(const QString& message) {
  error_ = message;
  busy_->hide();
  text_->setText(message);
  cancel_->setText(tr("Close"));
  emit finishedReading();
}

void SnapshotDialog::show_result(SnapshotComparison c) {
  busy_->hide();
  cancel_->setText(tr("Close"));
  auto* chart = new QChart;
  const double mib = 1024.0 * 1024.0;
  auto* predicted = new QLineSeries;
  predicted->setName(tr("predicted (%1)").arg(QString::fromStdString(c.strategy)));
  QList<QPointF> pts;
  for (std::size_t i = 0; i < c.predicted.size(); ++i) {
    pts.append({static_cast<double>(i), static_cast<double>(c.predicted[i]) / mib});
    pts.append({static_cast<double>(i + 1), static_cast<double>(c.predicted[i]) / mib});
  }
  predicted->replace(pts);
  // The recording can have millions of events: min and max per pixel column keep every peak.
  auto* measured = new QLineSeries;
  measured->setName(tr("recorded, above its start"));
  const double n = std::max<double>(1.0, static_cast<double>(c.predicted.size()));
  const int cols = 1000;
  std::vector<double> lo(cols + 1, -1), hi(cols + 1, -1);
  for (std::size_t i = 0; i < c.measured.size(); ++i) {
    const int col = static_cast<int>(std::clamp(c.measured_x[i] / n * cols, 0.0, static_cast<double>(cols)));
    const double v = static_cast<double>(c.measured[i]) / mib;
    lo[col] = lo[col] < 0 ? v : std::min(lo[col], v);
    hi[col] = std::max(hi[col], v);
  }
  pts.clear();
  for (int col = 0; col <= cols; ++col) {
    if (hi[col] < 0) continue;
    pts.append({col * n / cols, lo[col]});
    pts.append({col * n / cols, hi[col]});
  }
  measured->replace(pts);
  const double top = std::max(static_cast<double>(c.predicted_peak), static_cast<double>(c.measured_peak)) / mib;
  auto* phase = new QLineSeries;
  phase->setName(tr("backward begins"));
  phase->replace({{static_cast<double>(c.predicted_backward), 0}, {static_cast<double>(c.predicted_backward), top}});
  QPen dashed(Qt::gray);
  dashed.setStyle(Qt::DashLine);
  phase->setPen(dashed);
  for (auto* s : {predicted, measured, phase}) chart->addSeries(s);
  auto* x = new QValueAxis;
  x->setTitleText(tr("instruction of %1 (the recording stretched to its phases)").arg(QString::fromStdString(c.strategy)));
  x->setRange(0, n);
  auto* y = new QValueAxis;
  y->setTitleText(tr("MiB"));
  y->setRange(0, top * 1.05 + 1e-9);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (auto* s : {predicted, measured, phase}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  chart_->setChart(chart);
  chart_->show();
  QString lines;
  for (const auto& l : c.explanation) lines += "• " + QString::fromStdString(l) + "\n";
  text_->setText(lines.trimmed());
  result_ = std::move(c);
  emit finishedReading();
}

}  // namespace remat
