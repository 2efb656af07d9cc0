// The status bar's busy area: what the window computes in the background (the
// Run, the trade-off sweep, the strategies of a large model), as one line of
// text, a progress bar (a busy indicator while the fraction is unknown) and
// one Cancel for all of it. Hidden when nothing runs, so no stale "Running..."
// can stay behind.
#pragma once
#include <QString>
#include <QWidget>
#include <map>

class QLabel;
class QProgressBar;
class QPushButton;

namespace remat {

class ActivityBar : public QWidget {
  Q_OBJECT
 public:
  explicit ActivityBar(QWidget* parent = nullptr);
  // Shows or updates activity `key`; fraction < 0: unknown.
  void set(const QString& key, const QString& text, double fraction = -1);
  void clear(const QString& key);
  bool active(const QString& key) const { return items_.count(key) != 0; }
  bool busy() const { return !items_.empty(); }
  QString text() const;
  QProgressBar* progressBar() const { return bar_; }
  QPushButton* cancelButton() const { return cancel_; }

 signals:
  void cancelRequested();

 private:
  struct Item {
    QString text;
    double fraction;
  };
  void refresh();
  std::map<QString, Item> items_;
  QLabel* label_;
  QProgressBar* bar_;
  QPushButton* cancel_;
};

}  // namespace remat
