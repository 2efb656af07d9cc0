#include "widgets/document/strategy_colors.h"

#include "core/base/errors.h"
#include "core/strategies/registry.h"

namespace remat {

QColor strategy_color(const QString& spec) {
  // The catalog entry's colour: "offload+sqrt" is drawn as offload (the
  // wrapper names what it does), "sqrt+compress:bf16" as sqrt; a bare entry
  // name ("revolve", the panel's rows) as that entry.
  if (const StrategyInfo* info = find_strategy(spec.toStdString())) return QColor::fromRgb(info->color);
  try {
    return QColor::fromRgb(strategy_info(parse_strategy(spec.toStdString())).color);
  } catch (const InputError&) {
    return QColor(0x77, 0x77, 0x77);  // not a strategy (a run that did not parse says why elsewhere)
  }
}

Qt::PenStyle curve_style(int index) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine,
                                        Qt::DashDotDotLine};
  return styles[index % 5];
}

}  // namespace remat
