#include "widgets/document/strategy_colors.h"

#include "core/strategies/registry.h"

namespace remat {

QColor strategy_color(const QString& spec) {
  // In catalog order: the three seeds get the strongest Okabe-Ito colours.
  static const QColor palette[] = {
      QColor(0x00, 0x72, 0xB2),  // store-all: blue
      QColor(0xD5, 0x5E, 0x00),  // recompute-all: vermillion
      QColor(0x00, 0x9E, 0x73),  // sqrt: bluish green
      QColor(0xCC, 0x79, 0xA7),  // every-k: reddish purple
      QColor(0xE6, 0x9F, 0x00),  // manual: orange
      QColor(0x56, 0xB4, 0xE9),  // revolve: sky blue
      QColor(0x33, 0x33, 0x33),  // budget: near black
      QColor(0x99, 0x88, 0x00),  // auto: dark yellow
      QColor(0x88, 0x22, 0x55),  // optimal: wine
      QColor(0x44, 0xAA, 0x99),  // selective: teal
      QColor(0xAA, 0x66, 0x33),  // offload: brown
      QColor(0x66, 0x66, 0xCC),  // compress: slate (SPEC+compress:... is drawn as SPEC)
  };
  constexpr int count = sizeof(palette) / sizeof(palette[0]);
  // "offload+sqrt" is drawn as offload: the modifier names what it does.
  const std::string head = spec.section(':', 0, 0).section('+', 0, 0).toStdString();
  const auto& catalog = strategy_catalog();
  for (std::size_t i = 0; i < catalog.size(); ++i)
    if (catalog[i].name == head) return palette[i % count];
  return QColor(0x77, 0x77, 0x77);
}

Qt::PenStyle curve_style(int index) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine,
                                        Qt::DashDotDotLine};
  return styles[index % 5];
}

}  // namespace remat
