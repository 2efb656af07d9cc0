#include "core/strategies/registry.h"
#include "core/work_counters.h"

#include <algorithm>

#include "core/errors.h"
#include "core/spec_parse.h"
#include "core/strategies/compress.h"
#include "core/strategies/factories.h"
#include "core/strategies/offload.h"
#include "core/strategies/optimal.h"

namespace remat {
namespace {

std::unique_ptr<Strategy> manual_from(const std::string& a) {
  std::vector<int> ops;
  for (const auto& f : split(a, ',')) ops.push_back(static_cast<int>(parse_int(f, "manual: checkpoint index", 0, 1 << 30)));
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return make_manual(std::move(ops));
}

std::unique_ptr<Strategy> optimal_from(const std::string& a) {
  const auto f = split(a, ':');
  if (f.size() > 2) throw InputError("optimal: expected optimal:BYTES[:SECONDS] (got 'optimal:" + a + "')");
  const double limit = f.size() == 2 ? static_cast<double>(parse_int(f[1], "optimal: SECONDS", 1, 86400)) : kOptimalDefaultSeconds;
  return make_optimal(parse_bytes(f[0], "optimal: BYTES"), limit);
}

std::unique_ptr<Strategy> offload_from(const std::string& a) {
  if (a.empty()) return make_offload(make_every_k(0), "offload");
  const int k = static_cast<int>(parse_int(a, "offload: K", 1, 1 << 30));
  return make_offload(make_every_k(k), "offload:" + std::to_string(k));
}

std::unique_ptr<Strategy> offload_of(std::unique_ptr<Strategy> inner, const std::string& spec) {
  if (inner->name().starts_with("offload"))
    throw InputError("strategy '" + spec + "': offload cannot wrap another offload");
  return make_offload(std::move(inner), spec);
}

std::unique_ptr<Strategy> compress_alone(const std::string& a) {
  throw InputError("strategy 'compress:" + a + "' needs a strategy before it: compress modifies another, as in sqrt+compress:" +
                   (a.empty() ? std::string("bf16") : a));
}

std::unique_ptr<Strategy> compress_of(std::unique_ptr<Strategy> base, const std::string& a, const std::string& spec) {
  Packing p;
  if (!parse_packing(a, p))
    throw InputError("strategy '" + spec + "': unknown compression type '" + a + "' (known: " +
                     std::string(packing_names()) + ")");
  if (base->name().find("+compress:") != std::string::npos)
    throw InputError("strategy '" + spec + "': compress is given twice (one compression type per strategy)");
  // The canonical name, as every strategy's: "budget:1K+compress:int8" is budget:1024+compress:int8.
  const std::string name = base->name() + "+compress:" + std::string(packing_name(p));
  return make_compress(std::move(base), p, name);
}

const StrategyInfo* find(std::string_view name) {
  for (const auto& info : strategy_catalog())
    if (info.name == name) return &info;
  return nullptr;
}

}  // namespace

const std::vector<StrategyInfo>& strategy_catalog() {
  static const std::vector<StrategyInfo> table = {
      {"store-all", "", "", "keep every activation until its backward (as soon as possible)",
       [](const std::string&) { return make_store_all(); }},
      {"recompute-all", "", "", "keep only the input; recompute before every backward step (as late as possible)",
       [](const std::string&) { return make_recompute_all(); }},
      {"sqrt", "", "", "checkpoint every ceil(sqrt(n)) ops", [](const std::string&) { return make_every_k(0); }},
      {"every-k", "K", "4", "checkpoint every K ops (K >= 1)",
       [](const std::string& a) { return make_every_k(static_cast<int>(parse_int(a, "every-k: K", 1, 1 << 30))); }},
      {"manual", "I,J,...", "0", "checkpoint the listed op ids (topological indices)", manual_from},
      {"revolve", "C", "4",
       "chains: least forward recomputation with C stored states, the input's included (binomial checkpointing)",
       [](const std::string& a) {
         return make_revolve(static_cast<int>(parse_int(a, "revolve: C (checkpoint slots)", 1, 1 << 20)));
       }},
      {"budget", "BYTES", "1M", "chains: least recompute FLOPs whose peak fits BYTES (nested checkpoints, dynamic programming)",
       [](const std::string& a) { return make_budget(parse_bytes(a, "budget: BYTES")); }},
      {"auto", "", "", "checkpoint articulation points of the DAG, spaced about sqrt(n)",
       [](const std::string&) { return make_auto(); }},
      {"optimal", "BYTES[:SECONDS]", "1M",
       "least recompute FLOPs under BYTES (branch and bound over checkpoint sets, and a MILP over general schedules "
       "when built with one; best found when the time limit, default 5 s, runs out)",
       optimal_from},
      {"selective", "", "", "keep Linear/Dense/loss outputs and branch points, recompute the cheap ops",
       [](const std::string&) { return make_selective(); }},
      {"offload", "K", "4",
       "checkpoint every K ops (plain 'offload': ceil(sqrt(n))); the checkpoints go to host memory after the forward "
       "and come back one segment ahead of the backward that needs them; offload+SPEC offloads another strategy's "
       "(offload+revolve:4)",
       offload_from, true, offload_of},
      {"compress", "DTYPE", "bf16",
       "a modifier, SPEC+compress:bf16|f16|int8: SPEC's checkpoints are stored in that type (int8: one f32 scale per "
       "tensor) until the recompute that reads them; gradients then differ from store-all's by a reported error",
       compress_alone, false, nullptr, compress_of},
  };
  return table;
}

std::string strategy_help() {
  std::string s;
  for (const auto& i : strategy_catalog()) s += "\n  " + i.name + (i.argument.empty() ? "" : ":" + i.argument) + "  " + i.help;
  return s;
}

std::unique_ptr<Strategy> make_strategy(std::string_view spec) {
  work_counter::count(work_counter::strategies_made);
  const std::string s(spec);
  // A modifier comes last: "BASE+name:ARG" (the last '+', whatever BASE holds).
  if (const auto plus = s.rfind('+'); plus != std::string::npos) {
    const std::string tail = s.substr(plus + 1);
    const StrategyInfo* mod = find(tail.substr(0, tail.find(':')));
    if (mod && mod->modify) {
      if (plus == 0) throw InputError("strategy '" + s + "' needs a strategy before '+': sqrt" + s);
      if (tail.find(':') == std::string::npos || tail.back() == ':')
        throw InputError("strategy '" + s + "' needs an argument: " + mod->name + ":" + mod->argument);
      return mod->modify(make_strategy(s.substr(0, plus)), tail.substr(tail.find(':') + 1), s);
    }
  }
  const auto colon = s.find(':');
  const std::string head = s.substr(0, colon);
  if (const auto plus = head.find('+'); plus != std::string::npos) {
    const StrategyInfo* outer = find(head.substr(0, plus));
    if (!outer || !outer->wrap) {
      std::string wrappers, modifiers;
      for (const auto& i : strategy_catalog()) {
        if (i.wrap) wrappers += (wrappers.empty() ? "" : ", ") + i.name + "+SPEC";
        if (i.modify) modifiers += std::string(modifiers.empty() ? "" : ", ") + "SPEC+" + i.name + ":" + i.argument;
      }
      throw InputError("strategy '" + s + "': only " + wrappers + " wraps another strategy" +
                       (modifiers.empty() ? std::string() : " (and " + modifiers + " modifies one)"));
    }
    if (plus + 1 == s.size()) throw InputError("strategy '" + s + "' needs a strategy after '+': " + outer->name + "+sqrt");
    return outer->wrap(make_strategy(s.substr(plus + 1)), s);
  }
  const StrategyInfo* info = find(head);
  if (!info) {
    std::string known;
    for (const auto& i : strategy_catalog()) known += (known.empty() ? "" : ", ") + i.name;
    throw InputError("unknown strategy '" + s + "' (known: " + known + ")");
  }
  if (info->argument.empty() && colon != std::string::npos)
    throw InputError("strategy '" + head + "' takes no argument (got '" + s + "')");
  if (info->argument_optional && colon == std::string::npos) return info->make(std::string());
  if (!info->argument.empty() && (colon == std::string::npos || colon + 1 == s.size()))
    throw InputError("strategy '" + s.substr(0, colon) + "' needs an argument: " + head + ":" + info->argument);
  return info->make(colon == std::string::npos ? std::string() : s.substr(colon + 1));
}

std::vector<std::string> split_strategy_list(std::string_view list) {
  std::vector<std::string> out;
  for (auto& part : split(list, ',')) {
    // "2" or "2+compress:bf16": more of the previous spec's numbers.
    const auto digits = part.substr(0, part.find('+'));
    const bool number = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number && !out.empty() && out.back().find(':') != std::string::npos) out.back() += "," + part;
    else out.push_back(part);
  }
  return out;
}

std::vector<std::string> expand_strategy_list(std::string_view list) {
  std::vector<std::string> out;
  const auto add = [&out](const std::string& spec) {
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(spec);
  };
  for (const auto& item : split_strategy_list(list)) {
    if (item != "all") {
      add(item);
      continue;
    }
    for (const auto& s : strategy_catalog())
      if (s.argument.empty()) add(s.name);
  }
  return out;
}

}  // namespace remat
