// What each parameterised strategy gets on a model until the user chooses
// (parameters never carry over from another model), by the kind of each
// parameter in the strategy's catalog entry (registry.h), never by its name:
// an interval K and slots C ceil(sqrt(n)) (ops, slots), a byte budget half
// of store-all's peak in the model's byte unit, a time limit 5 s, a list of
// op ids the input alone. And which strategies cannot apply to a model (an
// entry for chains only on a DAG), with the reason.
#pragma once
#include <QString>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "core/strategies/registry.h"
#include "widgets/views/chart_scale.h"

namespace remat {
struct Model;

struct StrategyDefaults {
  int n = 1;                // ops
  int k = 1;                // ParamKind::Interval: K
  int revolveSlots = 1;     // ParamKind::Slots: C
  uint64_t storeAllPeak = 0;
  uint64_t budget = 0;      // ParamKind::Bytes
  int seconds = 5;          // ParamKind::Seconds
  ByteUnit unit;            // the unit budgets are shown in
};
StrategyDefaults strategy_defaults(const Model& model);

// A parameter's default on this model (OpIds: 0, the input).
int64_t default_parameter(ParamKind kind, const StrategyDefaults& d);
// `info` with every parameter at its default (offload -> offload:K).
StrategySpec default_spec(const StrategyInfo& info, const StrategyDefaults& d);
// `spec` with this model's defaults wherever it gives parameters, its wrapped
// strategy's included (offload+revolve:9 -> offload+revolve:4); the modifier stays.
StrategySpec with_defaults(const StrategySpec& spec, const StrategyDefaults& d);
// Empty when the entry (or the strategy a spec wraps) applies to the model; else why not.
QString not_applicable(const StrategyInfo& info, const Model& model);
QString not_applicable(const StrategySpec& spec, const Model& model);
// The spec's parameters are op ids of one model (manual): it is neither
// carried to another model nor saved. False for text that does not parse.
bool names_model_ops(const StrategySpec& spec);
bool names_model_ops(const StrategyRequest& request);  // false for one that does not parse
// The spec of the catalog's entry that takes a list of op ids (manual), for
// the graph's clicks.
StrategySpec op_list_spec(std::vector<int64_t> ops);

// Strategies as text, where text is what is kept (the settings, a test's
// list): each parsed once, and printed back.
std::vector<StrategyRequest> strategy_requests(const QStringList& texts);
// One comma-separated list as the command line gives it ("store-all,manual:1,2,3"):
// split as `remat` splits it (split_strategy_list keeps manual's ids together).
std::vector<StrategyRequest> strategy_requests(const QString& list);
QStringList spec_texts(const std::vector<StrategyRequest>& requests);

}  // namespace remat
