#include "widgets/views/chart_texts.h"

#include <QAbstractAxis>
#include <QChart>
#include <QGraphicsItem>
#include <QGraphicsLayout>
#include <QGraphicsTextItem>
#include <algorithm>
#include <functional>

namespace remat {

QStringList drawn_texts(const QGraphicsItem* root) {
  QStringList out;
  if (!root || !root->isVisible()) return out;
  std::function<void(const QGraphicsItem*)> walk = [&](const QGraphicsItem* item) {
    for (const QGraphicsItem* child : item->childItems()) {
      if (!child->isVisible()) continue;
      if (const auto* text = qgraphicsitem_cast<const QGraphicsTextItem*>(child))
        out.append(text->toPlainText().replace(QChar::LineSeparator, '\n').replace(QChar::ParagraphSeparator, '\n'));
      walk(child);
    }
  };
  walk(root);
  return out;
}

bool is_cut(const QString& drawn) { return drawn.endsWith("...") || drawn.contains(QChar(0x2026)); }

void lay_out_now(QChart* chart) {
  chart->layout()->invalidate();
  chart->layout()->activate();
}

void set_fitting_title(QChart* chart, QAbstractAxis* axis, const QStringList& titles) {
  for (const QString& title : titles) {
    axis->setTitleText(title);
    if (&title == &titles.back()) return;
    lay_out_now(chart);
    // The title cut is a drawn text that is its start and "...".
    const QStringList drawn = drawn_texts(chart);
    const bool cut = std::any_of(drawn.begin(), drawn.end(), [&](const QString& t) {
      if (!is_cut(t)) return false;
      const QString kept = t.endsWith("...") ? t.chopped(3) : t.left(t.indexOf(QChar(0x2026)));
      return title.startsWith(kept);
    });
    if (!cut) return;
  }
}

}  // namespace remat
