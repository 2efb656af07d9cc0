#include "widgets/strategy_defaults.h"

#include <cmath>

#include "core/model.h"
#include "core/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/repeated_blocks.h"
#include "core/strategies/registry.h"

namespace remat {

StrategyDefaults strategy_defaults(const Model& m) {
  StrategyDefaults d;
  d.n = std::max(1, m.size());
  // sqrt's own interval: ceil(sqrt(ops after the input)), 4 on chain:16.
  const int root = sqrt_interval(m);
  d.k = root;
  d.revolveSlots = root;
  if (m.size() > 1) d.storeAllPeak = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
  d.unit = byte_unit(d.storeAllPeak);
  // Half the peak, rounded to what a spin box in the unit shows (2 decimals).
  const double inUnit = std::round(double(d.storeAllPeak) / 2 / d.unit.bytes * (d.unit.bytes > 1 ? 100 : 1)) /
                        (d.unit.bytes > 1 ? 100 : 1);
  d.budget = static_cast<uint64_t>(std::llround(inUnit * d.unit.bytes));
  return d;
}

QString default_spec(const QString& head, const StrategyDefaults& d) {
  // offload+BASE: the base gets its default ("offload+revolve" -> offload+revolve:4).
  if (head.contains('+')) return head.section('+', 0, 0) + "+" + default_spec(head.section('+', 1), d);
  if (head == "offload") return QString("offload:%1").arg(d.k);
  if (head == "every-k") return QString("every-k:%1").arg(d.k);
  if (head == "revolve") return QString("revolve:%1").arg(d.revolveSlots);
  if (head == "budget") return QString("budget:%1").arg(d.budget);
  if (head == "optimal") return QString("optimal:%1:%2").arg(d.budget).arg(d.seconds);
  if (head == "manual") return "manual:0";
  return head;
}

QString not_applicable(const QString& head, const Model& m) {
  if (head.contains('+')) return not_applicable(head.section('+', 1), m);  // offload+revolve: as revolve
  if ((head == "revolve" || head == "budget") && m.size() > 1 && !is_chain(m))
    return QString("chains only: %1 is a DAG (try optimal)").arg(QString::fromStdString(m.name));
  // Read from the graph's structure (core/strategies/repeated_blocks.h).
  if (head == "attention-core" && m.size() > 1 && !attention_core_absent(m).empty())
    return QString("no attention core (a MatMul, scale or mask, Softmax and Dropout, read by a MatMul) in %1")
        .arg(QString::fromStdString(m.name));
  if (head == "blocks" && m.size() > 1 && !blocks_absent(m).empty())
    return QString("no block of more than one op between two cuts in %1 (every op is its own block)")
        .arg(QString::fromStdString(m.name));
  return {};
}

}  // namespace remat
