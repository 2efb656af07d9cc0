// A one-line label that gives up width first: when the row is narrow it shows
// the leading whole phrases of its text (parts separated by " · ") that fit,
// and cuts with "…" only when not even the first one does (the whole text in
// its tooltip), instead of holding the window wider than a laptop's screen,
// as a plain QLabel's minimum width does.
#pragma once
#include <QFrame>
#include <QString>

namespace remat {

class ElidedLabel : public QFrame {
  Q_OBJECT
 public:
  explicit ElidedLabel(const QString& text, QWidget* parent = nullptr);
  QString text() const { return text_; }
  // What is drawn at the current width: the text, its leading whole
  // phrases, or its start and "…".
  QString shownText() const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QString text_;
};

}  // namespace remat
