// The time model's three rates (core/sim/time_model.h) set in the window, as the
// CLI's --device-flops, --link-bandwidth and --device-bandwidth set them: each
// field takes what the flags take (50e12, 50T, 25G), the defaults are stated
// beside them, and a bad value is one message naming the field, the dialog
// staying open. The window then times its offloading runs again.
#pragma once
#include <QDialog>
#include <QString>

#include "core/sim/time_model.h"

class QLabel;
class QLineEdit;

namespace remat {

// "50T", "25G", "2T", "1.5e+08" (below 1K): what parse_rate reads back.
QString format_rate(double rate);
// Parses the three fields in order; throws InputError for the first bad one,
// named as the dialog labels it ("host link bandwidth must be ...").
TimeModel parse_time_model(const QString& deviceFlops, const QString& linkBandwidth, const QString& deviceBandwidth);

class TimeModelDialog : public QDialog {
  Q_OBJECT
 public:
  explicit TimeModelDialog(const TimeModel& current, QWidget* parent = nullptr);
  // The rates accepted (the current ones until OK succeeds).
  const TimeModel& timeModel() const { return time_; }
  QLineEdit* deviceFlops() const { return flops_; }
  QLineEdit* linkBandwidth() const { return link_; }
  QLineEdit* deviceBandwidth() const { return memory_; }
  // The message of the last refused OK; empty when none.
  QString error() const;
  void restoreDefaults();
  void accept() override;

 private:
  QLineEdit* flops_;
  QLineEdit* link_;
  QLineEdit* memory_;
  QLabel* error_;
  TimeModel time_;
};

}  // namespace remat
