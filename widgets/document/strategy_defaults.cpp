#include "widgets/document/strategy_defaults.h"

#include <cmath>
#include <stdexcept>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"
#include "core/strategies/repeated_blocks.h"

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

int64_t default_parameter(ParamKind kind, const StrategyDefaults& d) {
  switch (kind) {
    case ParamKind::Interval: return d.k;
    case ParamKind::Slots: return d.revolveSlots;
    case ParamKind::Bytes: return static_cast<int64_t>(d.budget);
    case ParamKind::Seconds: return d.seconds;
    case ParamKind::OpIds: return 0;
    case ParamKind::Count: return 0;  // left out: all of the model's units
    case ParamKind::Choice: return 0;  // the first word, the default
  }
  return 0;
}

StrategySpec default_spec(const StrategyInfo& info, const StrategyDefaults& d) {
  std::vector<int64_t> p;
  for (const ParamInfo& param : info.params) {
    if (param.kind == ParamKind::Count) break;  // optional and last: left out
    p.push_back(default_parameter(param.kind, d));
  }
  return strategy_spec(info.name, std::move(p));
}

StrategySpec with_defaults(const StrategySpec& spec, const StrategyDefaults& d) {
  StrategySpec out = spec.parameters.empty() ? spec : default_spec(strategy_info(spec), d);
  out.inner.clear();
  for (const StrategySpec& in : spec.inner) out.inner.push_back(with_defaults(in, d));
  out.modifier = spec.modifier;
  out.modifier_argument = spec.modifier_argument;
  return out;
}

QString not_applicable(const StrategyInfo& info, const Model& m) {
  if (info.chains_only && m.size() > 1 && !is_chain(m))
    return QString("chains only: %1 is a DAG (try optimal)").arg(QString::fromStdString(m.name));
  if (info.unavailable) return QString::fromStdString(info.unavailable(m));
  return {};
}

QString not_applicable(const StrategySpec& spec, const Model& m) {
  return not_applicable(innermost_info(spec), m);  // offload+revolve: as revolve
}

bool names_model_ops(const StrategySpec& spec) {
  for (const ParamInfo& p : innermost_info(spec).params)
    if (p.kind == ParamKind::OpIds) return true;
  return false;
}

bool names_model_ops(const StrategyRequest& request) { return request.spec && names_model_ops(*request.spec); }

std::vector<StrategyRequest> strategy_requests(const QStringList& texts) {
  std::vector<StrategyRequest> out;
  for (const QString& t : texts) out.push_back(request_strategy(t.toStdString()));
  return out;
}

std::vector<StrategyRequest> strategy_requests(const QString& list) {
  std::vector<StrategyRequest> out;
  for (const std::string& t : split_strategy_list(list.toStdString())) out.push_back(request_strategy(t));
  return out;
}

QStringList spec_texts(const std::vector<StrategyRequest>& requests) {
  QStringList out;
  for (const StrategyRequest& r : requests) out << QString::fromStdString(r.text);
  return out;
}

StrategySpec op_list_spec(std::vector<int64_t> ops) {
  for (const StrategyInfo& info : strategy_catalog())
    if (info.params.size() == 1 && info.params[0].kind == ParamKind::OpIds) return strategy_spec(info.name, std::move(ops));
  throw std::logic_error("the catalog has no strategy taking a list of op ids");
}

}  // namespace remat
