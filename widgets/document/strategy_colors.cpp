#include "widgets/document/strategy_colors.h"

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/strategies/registry.h"

namespace remat {
namespace {
const QColor kNoStrategy(0x77, 0x77, 0x77);
}

QColor strategy_color(const StrategyInfo& info) { return QColor::fromRgb(info.color); }

QColor strategy_color(const StrategySpec& spec) { return strategy_color(strategy_info(spec)); }

QColor strategy_color(const StrategyRun& run) { return run.parsed ? strategy_color(*run.parsed) : kNoStrategy; }

QColor strategy_color(const QString& spec) {
  if (const StrategyInfo* info = find_strategy(spec.toStdString())) return strategy_color(*info);
  const StrategyRequest r = request_strategy(spec.toStdString());
  return r.spec ? strategy_color(*r.spec) : kNoStrategy;
}

Qt::PenStyle curve_style(int index) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine,
                                        Qt::DashDotDotLine};
  return styles[index % 5];
}

}  // namespace remat
