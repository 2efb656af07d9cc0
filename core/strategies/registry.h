// Every strategy the build knows, in one table: its name, parameters, help
// line, colour and constructor. The catalog the window lists (with its
// editors, defaults and colours), the CLI's --help text, the parser and
// make_strategy()'s dispatch all read this table, so they cannot disagree:
// a new strategy kind is one entry here plus its code.
//
// A spec is parsed once, here, into a StrategySpec; everything else passes
// that value around and prints it back (StrategySpec::str()), and nothing
// outside this file reads or builds the text ("every-k:4", "offload+sqrt",
// "sqrt+compress:bf16"; the grammar is in docs/strategies.md).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/strategies/strategy.h"

namespace remat {

// A strategy as a value: which entry, its parameters, what it wraps and how
// it is modified. Parsed from text by parse_strategy(), which also makes the
// parameters canonical, so two specs naming the same strategy are equal
// ("budget:1K" and "budget:1024"; "manual:9,3,3" and "manual:3,9").
struct StrategySpec {
  std::string name;                 // the catalog entry: "every-k", "offload"
  std::vector<int64_t> parameters;  // its numbers, canonical: bytes as bytes, manual's ids sorted once each;
                                    // empty when it takes none or leaves its optional one out ("offload")
  std::vector<StrategySpec> inner;  // a wrapper's strategy (offload+SPEC): one spec; else empty
  std::string modifier;             // "compress" in sqrt+compress:bf16; empty for none
  std::string modifier_argument;    // its canonical argument: "bf16"

  // The canonical text: what Strategy::name() of make_strategy(*this) returns.
  std::string str() const;
  // The same spec without its modifier (sqrt+compress:bf16 -> sqrt).
  StrategySpec unmodified() const;
  bool operator==(const StrategySpec& other) const;
};

// Prints str(): for messages and test failures.
std::ostream& operator<<(std::ostream& os, const StrategySpec& spec);

// A strategy as someone asked for it (typed into a field, kept in the
// settings, clicked on a chart), parsed once, by request_strategy(): the spec,
// or, when the text does not parse, the text as written and why, so that the
// window can keep the row and its run can say why. Everything downstream reads
// the value; the text is for printing and for telling runs apart.
struct StrategyRequest {
  std::optional<StrategySpec> spec;  // set when it parses
  std::string text;                  // as written; spec->str() when made from a spec
  std::string error;                 // parse_strategy's message when it does not parse
  bool ok() const { return spec.has_value(); }
  // The same strategy: equal specs ("budget:1K" and "budget:1024"), or the same unparsed text.
  bool operator==(const StrategyRequest& other) const;
};

// What a parameter means, so the window can edit it and default it (per
// model) without knowing the strategy, and the parser can check it.
enum class ParamKind : uint8_t {
  Interval,  // K: a checkpoint every K ops (default ceil(sqrt(n)))
  Slots,     // C: checkpoint slots, the input's included (default ceil(sqrt(n)))
  Bytes,     // a memory budget (byte suffixes allowed: 64K, 1.5M; default half of store-all's peak)
  Seconds,   // a time limit
  OpIds,     // a comma-separated list of op ids, sorted and kept once each (alone in its entry)
  Count,     // how many of the model's own units (the first N attentions, every K-th block);
             // optional, and left out by default: all of them
  Choice,    // one word of ParamInfo::choices, held as its index (dtr's heuristic)
};

struct ParamInfo {
  ParamKind kind;
  std::string what;    // for messages: "every-k: K"
  int64_t lo = 0, hi = 0;  // an integer's range (not Bytes)
  bool optional = false;   // may be left out (from the end)
  // Left out of the canonical text when it has this value (optimal's default
  // time limit); -1: always printed.
  int64_t omitted_value = -1;
  std::vector<std::string> choices = {};  // a Choice's words, in index order
};

struct StrategyInfo {
  std::string name;      // "every-k"
  std::string argument;  // "K", or "" when it takes none
  std::string example;   // an argument it accepts ("4"); "" when it takes none
  std::string help;      // one line for --help
  // Builds the strategy; `spec.name` is this entry's and its parameters have
  // been checked against `params`.
  std::unique_ptr<Strategy> (*make)(const StrategySpec& spec);
  // The bare name is accepted too (no parameters): offload = offload:ceil(sqrt(n)).
  bool argument_optional = false;
  // Non-null for a strategy that wraps another: "name+SPEC" builds SPEC and
  // hands it over with the whole spec; a wrapper never wraps a wrapper.
  std::unique_ptr<Strategy> (*wrap)(std::unique_ptr<Strategy> inner, const StrategySpec& spec) = nullptr;
  // Non-null for a modifier, written after another strategy: "SPEC+name:ARG"
  // (sqrt+compress:bf16) builds SPEC and changes its schedule. Alone, a
  // modifier is an InputError.
  std::unique_ptr<Strategy> (*modify)(std::unique_ptr<Strategy> base, const StrategySpec& spec) = nullptr;
  // A modifier's argument made canonical ("BF16" -> "bf16"); throws InputError
  // naming `spec` (the whole text) when it is not one.
  std::string (*modifier_argument)(const std::string& argument, const std::string& spec) = nullptr;
  // The parameters after "name:", in order; several are separated by ':'.
  std::vector<ParamInfo> params = {};
  uint32_t color = 0x777777;  // 0xRRGGBB: its colour in every chart and export, whatever is compared
  bool chains_only = false;   // needs a chain (every op reads the one before it)
  bool search = false;        // a search with a time limit (the window runs it off the GUI thread)
  // Decides while the step runs: the executor lets it play_live() in each run
  // (the run session and the window ask this, not the strategy, so that no
  // other strategy is made twice).
  bool decides_live = false;
  // Why it cannot apply to `model` ("" when it can), read from the graph
  // (no attention core, no repeated block); nullptr: it applies to any model.
  std::string (*unavailable)(const Model& model) = nullptr;
};

// The table, in the order --help lists it.
const std::vector<StrategyInfo>& strategy_catalog();
// The entry named `name`; nullptr when there is none.
const StrategyInfo* find_strategy(std::string_view name);
// The entry of `spec` (of the wrapper for offload+SPEC, of the base for
// SPEC+compress:DTYPE), or of its innermost strategy.
const StrategyInfo& strategy_info(const StrategySpec& spec);
const StrategyInfo& innermost_info(const StrategySpec& spec);
// "\n  name:ARG  help" per entry: the --strategy option's help text.
std::string strategy_help();

// Throws InputError: unknown name, missing or bad argument, a "+" after a
// name that wraps nothing, a modifier without a base or given twice.
StrategySpec parse_strategy(std::string_view text);
// `text` parsed once: never throws; a request that does not parse holds the
// message parse_strategy would throw.
StrategyRequest request_strategy(std::string_view text);
// A spec made in code (a chart's point, an editor's value), printed canonically.
StrategyRequest request_strategy(StrategySpec spec);
// The spec `name` with `argument` as a user typed it into that entry's field
// (the window's list of op ids), parsed: throws InputError as parse_strategy.
StrategySpec parse_strategy_argument(std::string_view name, std::string_view argument);
// The same, unchecked, as text: for a field that does not parse yet, so its
// run can say why.
std::string strategy_text(std::string_view name, std::string_view argument);
// Specs made in code (the sweep's points, the window's editors), checked
// and canonical as parse_strategy makes them; each throws InputError as
// parse_strategy would for the same text.
// `name`'s entry with these parameters ({} for none or to leave the optional one out).
StrategySpec strategy_spec(std::string_view name, std::vector<int64_t> parameters = {});
// `wrapper`+`inner` (offload+revolve:4).
StrategySpec wrapped_spec(std::string_view wrapper, StrategySpec inner);
// `base`+`modifier`:`argument` (sqrt+compress:bf16).
StrategySpec modified_spec(StrategySpec base, std::string_view modifier, std::string_view argument);
// The parameters as written after "name:" ("3,9" for manual:3,9; "" for none).
std::string parameter_text(const StrategySpec& spec);

std::unique_ptr<Strategy> make_strategy(const StrategySpec& spec);
// parse_strategy, then make_strategy.
std::unique_ptr<Strategy> make_strategy(std::string_view spec);

// Budgets given as shares of a model's store-all peak ("optimal:50%",
// "dtr:30%:lru", "offload+budget:25%", "--budgets 90%,50%"): a budget is
// relative to a model, so the text is resolved, with that model's peak as
// `reference`, before it is parsed. has_budget_share says whether a spec
// writes one (the caller then simulates store-all once); resolve_budget_shares
// writes each as round(share × reference) bytes and leaves the rest of the
// text as it was. Throws InputError for a share that is not a number >= 0
// followed by '%', naming the parameter.
bool has_budget_share(std::string_view spec);
std::string resolve_budget_shares(std::string_view spec, uint64_t reference);
// One budget: a byte count (parse_bytes) or a share ("50%") of `reference`.
uint64_t parse_budget(std::string_view text, const std::string& what, uint64_t reference);

// Splits "store-all,manual:1,2,3,sqrt" into specs; bare integers continue the
// argument list of the previous spec (manual's checkpoints use commas too), and
// so does an integer followed by a modifier ("manual:1,2+compress:bf16").
std::vector<std::string> split_strategy_list(std::string_view list);
// split_strategy_list, with 'all' anywhere standing for every strategy that
// takes no argument ("all,offload"); each spec once, in the order first named.
std::vector<std::string> expand_strategy_list(std::string_view list);

}  // namespace remat
