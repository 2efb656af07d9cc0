#include "widgets/views/time_model_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <cmath>

#include "core/base/errors.h"
#include "core/base/spec_parse.h"

namespace remat {

QString format_rate(double rate) {
  // Decimal prefixes, as rates are quoted and as parse_rate reads them.
  static constexpr struct {
    double scale;
    char suffix;
  } kPrefixes[] = {{1e15, 'P'}, {1e12, 'T'}, {1e9, 'G'}, {1e6, 'M'}, {1e3, 'K'}};
  for (const auto& p : kPrefixes)
    if (rate >= p.scale) return QString::number(rate / p.scale, 'g', 15) + p.suffix;
  return QString::number(rate, 'g', 15);
}

TimeModel parse_time_model(const QString& deviceFlops, const QString& linkBandwidth, const QString& deviceBandwidth) {
  TimeModel t;
  t.device_flops = parse_rate(deviceFlops.trimmed().toStdString(), "device throughput");
  t.link_bandwidth = parse_rate(linkBandwidth.trimmed().toStdString(), "host link bandwidth");
  t.device_bandwidth = parse_rate(deviceBandwidth.trimmed().toStdString(), "device memory bandwidth");
  return t;
}

TimeModelDialog::TimeModelDialog(const TimeModel& current, QWidget* parent) : QDialog(parent), time_(current) {
  setWindowTitle(tr("Time model"));
  auto* v = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("How long a step takes, predicted: each fwd/bwd takes its FLOPs over the device's "
                              "throughput; each offload/fetch its bytes over the host link, on a copy stream beside the "
                              "compute (a fetch that lands late stalls the step); each compress/decompress the bytes it "
                              "reads and writes over the device memory's bandwidth. Numbers like 25e9, 25G or 1.5T "
                              "(remat simulate --device-flops, --link-bandwidth, --device-bandwidth)."));
  intro->setWordWrap(true);
  v->addWidget(intro);
  auto* form = new QFormLayout;
  auto field = [&](const QString& label, double value, double fallback, const QString& unit) {
    auto* edit = new QLineEdit(format_rate(value));
    edit->setPlaceholderText(format_rate(fallback));
    auto* row = new QHBoxLayout;
    row->addWidget(edit);
    row->addWidget(new QLabel(tr("%1 (default %2)").arg(unit, format_rate(fallback))));
    form->addRow(label, row);
    return edit;
  };
  flops_ = field(tr("Device throughput"), current.device_flops, TimeModel::kDefaultDeviceFlops, tr("FLOP/s"));
  link_ = field(tr("Host link bandwidth"), current.link_bandwidth, TimeModel::kDefaultLinkBandwidth,
                tr("bytes/s, each direction"));
  memory_ = field(tr("Device memory bandwidth"), current.device_bandwidth, TimeModel::kDefaultDeviceBandwidth,
                  tr("bytes/s"));
  v->addLayout(form);
  error_ = new QLabel;
  error_->setObjectName("timeModelError");
  error_->setStyleSheet("color: #D55E00");  // Okabe-Ito vermillion, as the window's warnings
  error_->setWordWrap(true);
  error_->hide();
  v->addWidget(error_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel | QDialogButtonBox::RestoreDefaults);
  connect(buttons, &QDialogButtonBox::accepted, this, &TimeModelDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(buttons->button(QDialogButtonBox::RestoreDefaults), &QPushButton::clicked, this,
          &TimeModelDialog::restoreDefaults);
  v->addWidget(buttons);
}

QString TimeModelDialog::error() const { return error_->isHidden() ? QString() : error_->text(); }

void TimeModelDialog::restoreDefaults() {
  const TimeModel d;
  flops_->setText(format_rate(d.device_flops));
  link_->setText(format_rate(d.link_bandwidth));
  memory_->setText(format_rate(d.device_bandwidth));
}

void TimeModelDialog::accept() {
  try {
    time_ = parse_time_model(flops_->text(), link_->text(), memory_->text());
  } catch (const InputError& e) {
    error_->setText(QString::fromStdString(e.what()));
    error_->show();
    return;  // stays open on the bad value
  }
  error_->hide();
  QDialog::accept();
}

}  // namespace remat
