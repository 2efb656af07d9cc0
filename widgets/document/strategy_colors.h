// One fixed colour per strategy, the same in the timeline, the trade-off
// chart, the side-by-side lanes and every export, whatever else is compared:
// chosen by the strategy's name (its catalog entry), never by position.
#pragma once
#include <QColor>
#include <QString>

namespace remat {

QColor strategy_color(const QString& spec);
// Pen style for the i-th compared curve, so that equal curves stay visible
// (a dashed one over a solid one shows both).
Qt::PenStyle curve_style(int index);

}  // namespace remat
