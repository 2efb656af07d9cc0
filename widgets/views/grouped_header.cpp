#include "widgets/views/grouped_header.h"

#include <QPainter>
#include <algorithm>
#include <climits>

namespace remat {

GroupedHeader::GroupedHeader(QWidget* parent) : QHeaderView(Qt::Horizontal, parent) {}

void GroupedHeader::setGroups(std::vector<Group> groups) {
  groups_ = std::move(groups);
  updateGeometry();
  viewport()->update();
}

int GroupedHeader::bandHeight() const { return groups_.empty() ? 0 : fontMetrics().height() + 6; }

QSize GroupedHeader::sizeHint() const {
  QSize s = QHeaderView::sizeHint();
  s.setHeight(s.height() + bandHeight());
  return s;
}

QRect GroupedHeader::groupRect(int i) const {
  if (i < 0 || i >= int(groups_.size())) return {};
  int left = INT_MAX, right = INT_MIN;
  for (int s : groups_[std::size_t(i)].sections) {
    if (isSectionHidden(s)) continue;
    const int x = sectionViewportPosition(s);
    left = std::min(left, x);
    right = std::max(right, x + sectionSize(s));
  }
  return left < right ? QRect(left, 0, right - left, bandHeight()) : QRect();
}

void GroupedHeader::paintSection(QPainter* p, const QRect& rect, int logicalIndex) const {
  // The column's title below the band.
  QHeaderView::paintSection(p, rect.adjusted(0, bandHeight(), 0, 0), logicalIndex);
}

void GroupedHeader::paintEvent(QPaintEvent* e) {
  QHeaderView::paintEvent(e);
  if (groups_.empty()) return;
  QPainter p(viewport());
  const int h = bandHeight();
  p.fillRect(QRect(0, 0, viewport()->width(), h), palette().window());
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  for (int i = 0; i < int(groups_.size()); ++i) {
    const QRect r = groupRect(i);
    if (r.isEmpty()) continue;
    p.fillRect(r.adjusted(1, 1, -1, -1), i % 2 ? QColor(0xe6, 0xef, 0xe9) : QColor(0xe4, 0xea, 0xf3));
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(r.adjusted(6, 0, -6, 0), Qt::AlignLeft | Qt::AlignVCenter, groups_[std::size_t(i)].name);
    p.setPen(QColor(150, 150, 150));
    p.drawLine(r.topRight(), QPoint(r.right(), height()));
  }
}

}  // namespace remat
