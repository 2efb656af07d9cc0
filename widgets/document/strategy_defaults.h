// What each parameterised strategy gets on a model until the user chooses
// (parameters never carry over from another model): every-k and revolve
// ceil(sqrt(n)) (ops, slots), budget and optimal half of store-all's peak, in
// the model's byte unit, optimal 5 s. And which strategies cannot apply to a
// model (the chain-only ones on a DAG), with the reason.
#pragma once
#include <QString>
#include <cstdint>

#include "widgets/views/chart_scale.h"

namespace remat {
struct Model;

struct StrategyDefaults {
  int n = 1;                // ops
  int k = 1;                // every-k: K
  int revolveSlots = 1;     // revolve: C
  uint64_t storeAllPeak = 0;
  uint64_t budget = 0;      // budget and optimal: bytes
  int seconds = 5;          // optimal: time limit
  ByteUnit unit;            // the unit budgets are shown in
};
StrategyDefaults strategy_defaults(const Model& model);

// The spec `head` (a catalog name) gets on this model; the head itself for
// strategies without a parameter.
QString default_spec(const QString& head, const StrategyDefaults& d);
// Empty when `head` applies to the model; else why not.
QString not_applicable(const QString& head, const Model& model);

}  // namespace remat
