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
  return fontMetrics().elidedText(text_, Qt::ElideRight, contentsRect().width());
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
