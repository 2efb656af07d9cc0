// One fixed colour per strategy, the same in the timeline, the trade-off
// chart, the side-by-side lanes and every export, whatever else is compared:
// chosen by the strategy's name (its catalog entry), never by position.
#pragma once
#include <QColor>
#include <QString>

namespace remat {
struct StrategyInfo;
struct StrategyRun;
struct StrategySpec;

QColor strategy_color(const StrategyInfo& info);
// "offload+sqrt" is drawn as offload (the wrapper names what it does),
// "sqrt+compress:bf16" as sqrt.
QColor strategy_color(const StrategySpec& spec);
// A run's, by its spec; grey for one that does not parse (it says why elsewhere).
QColor strategy_color(const StrategyRun& run);
// Text that is only text (a chart series' name read back, a test's name):
// parsed here; a bare entry name ("revolve") is that entry's.
QColor strategy_color(const QString& spec);
// Pen style for the i-th compared curve, so that equal curves stay visible
// (a dashed one over a solid one shows both).
Qt::PenStyle curve_style(int index);

}  // namespace remat
