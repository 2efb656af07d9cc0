#include "widgets/views/elided_label.h"

#include <QFontMetrics>
#include <QPainter>
#include <QStyle>

namespace remat {

ElidedLabel::ElidedLabel(const QString& text, QWidget* parent) : QFrame(parent), text_(text) {
  setToolTip(text);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
}

QString ElidedLabel::shownText() const {
  // Whole phrases first: "drag or wheel to zoom · click to show that step"
  // says less but nothing cut; "…" only when not even the first one fits.
  const QFontMetrics fm = fontMetrics();
  const int room = contentsRect().width();
  if (fm.horizontalAdvance(text_) <= room) return text_;
  const QStringList parts = text_.split(QStringLiteral(" · "));
  for (qsizetype n = parts.size() - 1; n >= 1; --n) {
    const QString shown = parts.mid(0, n).join(QStringLiteral(" · "));
    if (fm.horizontalAdvance(shown) <= room) return shown;
  }
  return fm.elidedText(text_, Qt::ElideRight, room);
}

QSize ElidedLabel::sizeHint() const {
  const QFontMetrics fm = fontMetrics();
  return {fm.horizontalAdvance(text_) + 2 * frameWidth(), fm.height() + 2 * frameWidth()};
}

// Room for "…" and a letter or two: below that the label shows nothing useful.
QSize ElidedLabel::minimumSizeHint() const {
  const QFontMetrics fm = fontMetrics();
  return {fm.horizontalAdvance(QStringLiteral("dr…")) + 2 * frameWidth(), fm.height() + 2 * frameWidth()};
}

void ElidedLabel::paintEvent(QPaintEvent* event) {
  QFrame::paintEvent(event);
  QPainter p(this);
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(contentsRect(), Qt::AlignVCenter | Qt::AlignLeft, shownText());
}

}  // namespace remat
