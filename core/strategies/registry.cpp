#include "core/strategies/registry.h"
#include "core/base/work_counters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include "core/base/errors.h"
#include "core/base/spec_parse.h"
#include "core/strategies/compress.h"
#include "core/strategies/dtr.h"
#include "core/strategies/factories.h"
#include "core/strategies/offload.h"
#include "core/model/model.h"
#include "core/strategies/optimal.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {
namespace {

int param_int(const StrategySpec& s, std::size_t i) { return static_cast<int>(s.parameters.at(i)); }

std::unique_ptr<Strategy> manual_from(const StrategySpec& s) {
  return make_manual(std::vector<int>(s.parameters.begin(), s.parameters.end()));
}

std::unique_ptr<Strategy> optimal_from(const StrategySpec& s) {
  const double limit = s.parameters.size() > 1 ? static_cast<double>(s.parameters[1]) : kOptimalDefaultSeconds;
  return make_optimal(static_cast<uint64_t>(s.parameters[0]), limit);
}

std::unique_ptr<Strategy> offload_from(const StrategySpec& s) {
  return make_offload(make_every_k(s.parameters.empty() ? 0 : param_int(s, 0)), s.str());
}

std::unique_ptr<Strategy> offload_of(std::unique_ptr<Strategy> inner, const StrategySpec& s) {
  return make_offload(std::move(inner), s.str());
}

std::unique_ptr<Strategy> compress_alone(const StrategySpec&) {
  throw std::logic_error("compress is a modifier: parse_strategy never gives it alone");
}

std::string compress_argument(const std::string& a, const std::string& spec) {
  Packing p;
  if (!parse_packing(a, p))
    throw InputError("strategy '" + spec + "': unknown compression type '" + a + "' (known: " +
                     std::string(packing_names()) + ")");
  return std::string(packing_name(p));
}

std::unique_ptr<Strategy> compress_of(std::unique_ptr<Strategy> base, const StrategySpec& s) {
  Packing p;
  parse_packing(s.modifier_argument, p);
  return make_compress(std::move(base), p, s.str());
}

// Read from the graph's structure (core/strategies/repeated_blocks.h).
std::string no_attention_core(const Model& m) {
  if (m.size() <= 1 || attention_core_absent(m).empty()) return {};
  return "no attention core (a MatMul, scale or mask, Softmax and Dropout, read by a MatMul) in " + m.name;
}

std::string no_repeated_block(const Model& m) {
  if (m.size() <= 1 || blocks_absent(m).empty()) return {};
  return "no block of more than one op between two cuts in " + m.name + " (every op is its own block)";
}

// The text after "name:" as `info`'s parameters, canonical; throws InputError.
std::vector<int64_t> parse_parameters(const StrategyInfo& info, const std::string& a) {
  const std::vector<ParamInfo>& ps = info.params;
  std::vector<int64_t> out;
  if (ps.size() == 1 && ps[0].kind == ParamKind::OpIds) {
    for (const auto& f : split(a, ',')) out.push_back(parse_int(f, ps[0].what, ps[0].lo, ps[0].hi));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // One parameter takes the whole text, so "every-k:4:5" says K is no integer.
  const std::vector<std::string> fields = ps.size() == 1 ? std::vector<std::string>{a} : split(a, ':');
  std::size_t required = 0;
  while (required < ps.size() && !ps[required].optional) ++required;
  if (fields.size() > ps.size() || fields.size() < required)
    throw InputError(info.name + ": expected " + info.name + ":" + info.argument + " (got '" + info.name + ":" + a + "')");
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (ps[i].kind == ParamKind::Choice) {
      const auto& c = ps[i].choices;
      const auto at = std::find(c.begin(), c.end(), fields[i]);
      if (at == c.end()) {
        std::string known;
        for (const auto& w : c) known += (known.empty() ? "" : ", ") + w;
        throw InputError(ps[i].what + ": unknown '" + fields[i] + "' (known: " + known + ")");
      }
      out.push_back(at - c.begin());
      continue;
    }
    out.push_back(ps[i].kind == ParamKind::Bytes ? static_cast<int64_t>(parse_bytes(fields[i], ps[i].what))
                                                 : parse_int(fields[i], ps[i].what, ps[i].lo, ps[i].hi));
  }
  while (!out.empty() && ps[out.size() - 1].omitted_value >= 0 && out.back() == ps[out.size() - 1].omitted_value)
    out.pop_back();
  return out;
}

[[noreturn]] void unknown(const std::string& s) {
  std::string known;
  for (const auto& i : strategy_catalog()) known += (known.empty() ? "" : ", ") + i.name;
  throw InputError("unknown strategy '" + s + "' (known: " + known + ")");
}

}  // namespace

const std::vector<StrategyInfo>& strategy_catalog() {
  constexpr int64_t kMaxOps = 1 << 30;
  // The colours: the three default strategies get the strongest Okabe-Ito colours.
  static const std::vector<StrategyInfo> table = {
      {.name = "store-all", .argument = "", .example = "",
       .help = "keep every activation until its backward (as soon as possible)",
       .make = [](const StrategySpec&) { return make_store_all(); }, .color = 0x0072B2},  // blue
      {.name = "recompute-all", .argument = "", .example = "",
       .help = "keep only the input; recompute before every backward step (as late as possible)",
       .make = [](const StrategySpec&) { return make_recompute_all(); }, .color = 0xD55E00},  // vermillion
      {.name = "sqrt", .argument = "", .example = "", .help = "checkpoint every ceil(sqrt(n)) ops",
       .make = [](const StrategySpec&) { return make_every_k(0); }, .color = 0x009E73},  // bluish green
      {.name = "every-k", .argument = "K", .example = "4", .help = "checkpoint every K ops (K >= 1)",
       .make = [](const StrategySpec& s) { return make_every_k(param_int(s, 0)); },
       .params = {{ParamKind::Interval, "every-k: K", 1, kMaxOps}}, .color = 0xCC79A7},  // reddish purple
      {.name = "manual", .argument = "I,J,...", .example = "0",
       .help = "checkpoint the listed op ids (topological indices)", .make = manual_from,
       .params = {{ParamKind::OpIds, "manual: checkpoint index", 0, kMaxOps}}, .color = 0xE69F00},  // orange
      {.name = "revolve", .argument = "C", .example = "4",
       .help = "chains: least forward recomputation with C stored states, the input's included (binomial checkpointing)",
       .make = [](const StrategySpec& s) { return make_revolve(param_int(s, 0)); },
       .params = {{ParamKind::Slots, "revolve: C (checkpoint slots)", 1, 1 << 20}}, .color = 0x56B4E9,  // sky blue
       .chains_only = true},
      {.name = "budget", .argument = "BYTES", .example = "1M",
       .help = "chains: least recompute FLOPs whose peak fits BYTES (nested checkpoints, dynamic programming)",
       .make = [](const StrategySpec& s) { return make_budget(static_cast<uint64_t>(s.parameters[0])); },
       .params = {{ParamKind::Bytes, "budget: BYTES"}}, .color = 0x333333,  // near black
       .chains_only = true},
      {.name = "auto", .argument = "", .example = "", .help = "checkpoint articulation points of the DAG, spaced about sqrt(n)",
       .make = [](const StrategySpec&) { return make_auto(); }, .color = 0x998800},  // dark yellow
      {.name = "optimal", .argument = "BYTES[:SECONDS]", .example = "1M",
       .help = "least recompute FLOPs under BYTES (a DP over the model's repeated blocks, branch and bound over "
               "checkpoint sets, and a MILP over general schedules when built with one; never above a registered "
               "strategy that fits; best found when the time limit, default 5 s, runs out)",
       .make = optimal_from,
       .params = {{ParamKind::Bytes, "optimal: BYTES"},
                  {ParamKind::Seconds, "optimal: SECONDS", 1, 86400, true, static_cast<int64_t>(kOptimalDefaultSeconds)}},
       .color = 0x882255,  // wine
       .search = true},
      {.name = "dtr", .argument = "BYTES[:HEURISTIC]", .example = "1M",
       .help = "dynamic tensor rematerialization: run the step keeping everything while BYTES last; when an "
               "allocation would not fit, evict the tensor the heuristic scores lowest (h-dtr: recompute cost over "
               "bytes times staleness, the default; h-dtr-eq: with its evicted neighbourhood; lru; largest) and "
               "recompute it when it is read again",
       .make = [](const StrategySpec& s) {
         return make_dtr(static_cast<uint64_t>(s.parameters[0]),
                         static_cast<DtrHeuristic>(s.parameters.size() > 1 ? s.parameters[1] : 0));
       },
       .params = {{ParamKind::Bytes, "dtr: BYTES"},
                  {.kind = ParamKind::Choice, .what = "dtr: HEURISTIC", .lo = 0, .hi = 3, .optional = true,
                   .omitted_value = 0, .choices = dtr_heuristic_names()}},
       .color = 0xAA4499,  // purple
       .decides_live = true},
      {.name = "selective", .argument = "", .example = "", .help = "keep Linear/Dense/loss outputs and branch points, recompute the cheap ops",
       .make = [](const StrategySpec&) { return make_selective(); }, .color = 0x44AA99},  // teal
      {.name = "attention-core", .argument = "N", .example = "1",
       .help = "keep everything but each attention's core (scores, scale, mask, softmax, attention dropout), "
               "recomputed before its backward (Megatron-LM's selective recomputation); attention-core:N only the "
               "first N attentions'",
       .make = [](const StrategySpec& s) { return make_attention_core(s.parameters.empty() ? 0 : param_int(s, 0)); },
       .argument_optional = true,
       .params = {{ParamKind::Count, "attention-core: N (attentions)", 1, 1 << 27, true}},
       .color = 0x117733,  // green
       .unavailable = no_attention_core},
      {.name = "blocks", .argument = "K", .example = "2",
       .help = "keep each block's input and output, recompute inside (torch.utils.checkpoint around every "
               "transformer layer or ResNet block), blocks found from the graph: the ops between cuts, grouped by "
               "their repeat; blocks:K keeps every K-th block's output (checkpoint_sequential)",
       .make = [](const StrategySpec& s) { return make_blocks(s.parameters.empty() ? 0 : param_int(s, 0)); },
       .argument_optional = true,
       .params = {{ParamKind::Count, "blocks: K (blocks per segment)", 1, 1 << 27, true}},
       .color = 0x88CCEE,  // cyan
       .unavailable = no_repeated_block},
      {.name = "offload", .argument = "K", .example = "4",
       .help = "checkpoint every K ops (plain 'offload': ceil(sqrt(n))); the checkpoints go to host memory after the "
               "forward and come back one segment ahead of the backward that needs them; offload+SPEC offloads "
               "another strategy's (offload+revolve:4)",
       .make = offload_from, .argument_optional = true, .wrap = offload_of,
       .params = {{ParamKind::Interval, "offload: K", 1, kMaxOps, true}}, .color = 0xAA6633},  // brown
      {.name = "compress", .argument = "DTYPE", .example = "bf16",
       .help = "a modifier, SPEC+compress:bf16|f16|int8: SPEC's checkpoints are stored in that type (int8: one f32 "
               "scale per tensor) until the recompute that reads them; gradients then differ from store-all's by a "
               "reported error",
       .make = compress_alone, .modify = compress_of, .modifier_argument = compress_argument,
       .color = 0x6666CC},  // slate (SPEC+compress:... is drawn as SPEC)
  };
  return table;
}

const StrategyInfo* find_strategy(std::string_view name) {
  for (const auto& info : strategy_catalog())
    if (info.name == name) return &info;
  return nullptr;
}

const StrategyInfo& strategy_info(const StrategySpec& spec) {
  const StrategyInfo* info = find_strategy(spec.name);
  if (!info) unknown(spec.name);
  return *info;
}

const StrategyInfo& innermost_info(const StrategySpec& spec) {
  return spec.inner.empty() ? strategy_info(spec) : innermost_info(spec.inner.front());
}

std::string strategy_help() {
  std::string s;
  for (const auto& i : strategy_catalog()) s += "\n  " + i.name + (i.argument.empty() ? "" : ":" + i.argument) + "  " + i.help;
  return s + "\n  BYTES: a byte count (4096, 64K, 1.5M, 2G) or a share of the model's store-all peak (50%)";
}

std::string parameter_text(const StrategySpec& spec) {
  const StrategyInfo* info = find_strategy(spec.name);
  const char sep = info && info->params.size() == 1 && info->params[0].kind == ParamKind::OpIds ? ',' : ':';
  std::string s;
  for (std::size_t i = 0; i < spec.parameters.size(); ++i) {
    s += i ? std::string(1, sep) : "";
    const ParamInfo* p = info && i < info->params.size() ? &info->params[i] : nullptr;
    s += p && p->kind == ParamKind::Choice ? p->choices.at(static_cast<std::size_t>(spec.parameters[i]))
                                           : std::to_string(spec.parameters[i]);
  }
  return s;
}

std::string StrategySpec::str() const {
  std::string s = parameters.empty() ? name : name + ":" + parameter_text(*this);
  for (const StrategySpec& in : inner) s += "+" + in.str();
  if (!modifier.empty()) s += "+" + modifier + ":" + modifier_argument;
  return s;
}

StrategySpec StrategySpec::unmodified() const {
  StrategySpec s = *this;
  s.modifier.clear();
  s.modifier_argument.clear();
  return s;
}

bool StrategySpec::operator==(const StrategySpec& o) const {
  return name == o.name && parameters == o.parameters && inner == o.inner && modifier == o.modifier &&
         modifier_argument == o.modifier_argument;
}

StrategySpec parse_strategy(std::string_view text) {
  const std::string s(text);
  // A modifier comes last: "BASE+name:ARG" (the last '+', whatever BASE holds).
  if (const auto plus = s.rfind('+'); plus != std::string::npos) {
    const std::string tail = s.substr(plus + 1);
    const StrategyInfo* mod = find_strategy(tail.substr(0, tail.find(':')));
    if (mod && mod->modify) {
      if (plus == 0) throw InputError("strategy '" + s + "' needs a strategy before '+': sqrt" + s);
      if (tail.find(':') == std::string::npos || tail.back() == ':')
        throw InputError("strategy '" + s + "' needs an argument: " + mod->name + ":" + mod->argument);
      StrategySpec spec = parse_strategy(s.substr(0, plus));
      if (spec.modifier == mod->name)
        throw InputError("strategy '" + s + "': " + mod->name + " is given twice (one compression type per strategy)");
      if (!spec.modifier.empty())
        throw InputError("strategy '" + s + "': one modifier per strategy (it has " + spec.modifier + ")");
      spec.modifier = mod->name;
      spec.modifier_argument = mod->modifier_argument(tail.substr(tail.find(':') + 1), s);
      return spec;
    }
  }
  const auto colon = s.find(':');
  const std::string head = s.substr(0, colon);
  if (const auto plus = head.find('+'); plus != std::string::npos) {
    const StrategyInfo* outer = find_strategy(head.substr(0, plus));
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
    StrategySpec inner = parse_strategy(s.substr(plus + 1));
    if (strategy_info(inner).wrap)
      throw InputError("strategy '" + s + "': " + outer->name + " cannot wrap another " +
                       (inner.name == outer->name ? inner.name : "wrapper (" + inner.name + ")"));
    StrategySpec spec;
    spec.name = outer->name;
    spec.inner.push_back(std::move(inner));
    return spec;
  }
  const StrategyInfo* info = find_strategy(head);
  if (!info) unknown(s);
  if (info->argument.empty() && colon != std::string::npos)
    throw InputError("strategy '" + head + "' takes no argument (got '" + s + "')");
  StrategySpec spec;
  spec.name = info->name;
  if (info->argument_optional && colon == std::string::npos) return spec;
  if (!info->argument.empty() && (colon == std::string::npos || colon + 1 == s.size()))
    throw InputError("strategy '" + s.substr(0, colon) + "' needs an argument: " + head + ":" + info->argument);
  if (info->modify)
    throw InputError("strategy '" + s + "' needs a strategy before it: " + info->name + " modifies another, as in sqrt+" + s);
  if (colon != std::string::npos) spec.parameters = parse_parameters(*info, s.substr(colon + 1));
  return spec;
}

StrategySpec strategy_spec(std::string_view name, std::vector<int64_t> parameters) {
  StrategySpec spec;
  spec.name = std::string(name);
  spec.parameters = std::move(parameters);
  // The text says what is wrong exactly as a user's spec would (ranges, counts).
  return parse_strategy(spec.str());
}

StrategySpec wrapped_spec(std::string_view wrapper, StrategySpec inner) {
  return parse_strategy(std::string(wrapper) + "+" + inner.str());
}

StrategySpec modified_spec(StrategySpec base, std::string_view modifier, std::string_view argument) {
  return parse_strategy(base.str() + "+" + std::string(modifier) + ":" + std::string(argument));
}

std::ostream& operator<<(std::ostream& os, const StrategySpec& spec) { return os << spec.str(); }

StrategyRequest request_strategy(std::string_view text) {
  StrategyRequest r;
  r.text = std::string(text);
  try {
    r.spec = parse_strategy(text);
  } catch (const InputError& e) {
    r.error = e.what();
  }
  return r;
}

StrategyRequest request_strategy(StrategySpec spec) {
  StrategyRequest r;
  r.text = spec.str();
  r.spec = std::move(spec);
  return r;
}

bool StrategyRequest::operator==(const StrategyRequest& o) const {
  return spec && o.spec ? *spec == *o.spec : !spec && !o.spec && text == o.text;
}

StrategySpec parse_strategy_argument(std::string_view name, std::string_view argument) {
  return parse_strategy(strategy_text(name, argument));
}

std::string strategy_text(std::string_view name, std::string_view argument) {
  return std::string(name) + (argument.empty() ? "" : ":" + std::string(argument));
}

std::unique_ptr<Strategy> make_strategy(const StrategySpec& spec) {
  work_counter::count(work_counter::strategies_made);  // a wrapper's or modifier's inner strategy too
  const StrategyInfo& info = strategy_info(spec);
  if (!spec.modifier.empty()) {
    const StrategyInfo* mod = find_strategy(spec.modifier);
    if (!mod || !mod->modify) unknown(spec.modifier);
    return mod->modify(make_strategy(spec.unmodified()), spec);
  }
  if (!spec.inner.empty()) {
    if (!info.wrap) throw InputError("strategy '" + spec.str() + "': " + info.name + " wraps no other strategy");
    return info.wrap(make_strategy(spec.inner.front()), spec);
  }
  return info.make(spec);
}

std::unique_ptr<Strategy> make_strategy(std::string_view spec) { return make_strategy(parse_strategy(spec)); }

namespace {

bool is_share(std::string_view field) { return !field.empty() && field.back() == '%'; }

// The Bytes parameters of one "name:args" piece of a spec (a wrapper's,
// its inner strategy's or a modifier's): `edit` sees each field in turn.
template <class Edit>
std::string each_budget_field(std::string_view piece, Edit edit) {
  const auto colon = piece.find(':');
  const StrategyInfo* info = find_strategy(piece.substr(0, colon));
  if (colon == std::string_view::npos || !info || info->params.empty() || info->params[0].kind == ParamKind::OpIds)
    return std::string(piece);
  const std::string args(piece.substr(colon + 1));
  std::vector<std::string> fields = info->params.size() == 1 ? std::vector<std::string>{args} : split(args, ':');
  std::string out(piece.substr(0, colon));
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i < info->params.size() && info->params[i].kind == ParamKind::Bytes) edit(fields[i], info->params[i].what);
    out += ":" + fields[i];
  }
  return out;
}

template <class Edit>
std::string each_budget_field_of_spec(std::string_view spec, Edit edit) {
  std::string out;
  for (const std::string& piece : split(spec, '+')) out += (out.empty() ? "" : "+") + each_budget_field(piece, edit);
  return out;
}

}  // namespace

uint64_t parse_budget(std::string_view text, const std::string& what, uint64_t reference) {
  if (!is_share(text)) return parse_bytes(text, what);
  const std::string num(text.substr(0, text.size() - 1));
  char* end = nullptr;
  // Digits and a point only, as parse_bytes reads a count (no sign, exponent or "nan").
  const bool plain = !num.empty() && std::all_of(num.begin(), num.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
  const double v = plain ? std::strtod(num.c_str(), &end) : -1;
  if (num.empty() || end != num.c_str() + num.size() || !(v >= 0) || !std::isfinite(v) || v > 1e6)
    throw InputError(what + " must be a byte count like 4096, 64K, 1.5M or 2G, or a share of store-all's peak like "
                            "50%, got '" + std::string(text) + "'");
  return static_cast<uint64_t>(std::llround(v / 100.0 * static_cast<double>(reference)));
}

bool has_budget_share(std::string_view spec) {
  bool found = false;
  (void)each_budget_field_of_spec(spec, [&](std::string& field, const std::string&) { found = found || is_share(field); });
  return found;
}

std::string resolve_budget_shares(std::string_view spec, uint64_t reference) {
  return each_budget_field_of_spec(spec, [&](std::string& field, const std::string& what) {
    if (is_share(field)) field = std::to_string(parse_budget(field, what, reference));
  });
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
