// remat simulate: predicted memory and compute of each strategy on a model.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/parallel_output.h"
#include "core/io/atomic_file.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/analysis/micro_batch.h"
#include "core/analysis/micro_batch_sweep.h"
#include "core/io/model_source.h"
#include "core/analysis/step_memory.h"
#include "core/base/spec_parse.h"
#include "core/strategies/registry.h"
#include "core/sim/time_model.h"

namespace remat::cli {
namespace {

// Strategies whose time the plain table does not show: the host tier's
// copies, or conversions of compressed checkpoints.
bool moves_or_converts(const StrategyRun& r) { return r.sim.transfers > 0 || r.sim.conversions > 0; }

struct SimulateOptions {
  std::string model;
  std::string strategies = "store-all,recompute-all,sqrt";
  bool json = false;
  std::string csv;
  std::string optimizer;  // empty: no whole-step table (JSON says sgd)
  std::string micro_batches = "1";  // K, or K1,K2,... for a table over K
  std::string parallel;  // empty: one device
  InstructionLimit limit;
  TimeModelFlags time;
};

std::vector<int> parse_micro_batches(const std::string& s) {
  std::vector<int> ks;
  for (const std::string& item : split(s, ','))
    ks.push_back(static_cast<int>(parse_int(item, "--micro-batches", 1, 1 << 20)));
  if (ks.empty()) throw InputError("--micro-batches: empty list (e.g. 4 or 1,2,4,8)");
  return ks;
}

// One row per K and strategy (core/analysis/micro_batch_sweep.h): what gradient
// accumulation trades, activations for passes. The baseline (parameters,
// gradients, optimizer state) is the same for every K: the gradients
// accumulate in place.
void print_micro_batch_table(const Model& base, const std::vector<std::string>& specs, const std::vector<int>& ks,
                             Optimizer optimizer, bool json, const InstructionLimit& limit) {
  const auto rows = micro_batch_sweep(base, specs, ks, {.optimizer = optimizer, .limit = limit});
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const MicroBatchRow& r : rows)
      out.push_back({{"micro_batches", r.k}, {"batch", r.batch}, {"strategy", r.strategy}, {"peak_bytes", r.peak_bytes},
                     {"step_total_bytes", r.step_total_bytes}, {"step_flops", r.step_flops}});
    std::cout << nlohmann::json{{"model", model_json(base)},
                                {"step_memory", step_baseline_json(step_memory(base, optimizer, 0))},
                                {"micro_batch_sweep", out}}.dump()
              << "\n";
    return;
  }
  std::size_t w = 22;
  for (const MicroBatchRow& r : rows) w = std::max(w, r.strategy.size());
  const int wi = static_cast<int>(w);
  std::printf("%4s %7s %-*s %14s %14s %14s\n", "K", "batch", wi, "strategy", "activations", "step total", "step flops");
  for (const MicroBatchRow& r : rows)
    std::printf("%4d %7lld %-*s %14s %14s %14.4g\n", r.k, static_cast<long long>(r.batch), wi, r.strategy.c_str(),
                format_bytes(r.peak_bytes).c_str(), format_bytes(r.step_total_bytes).c_str(), r.step_flops);
}

// The strategy column: at least `least` wide and as wide as the longest name,
// so that a long spec (offload+sqrt+compress:int8, manual:…) keeps the other
// columns under their headers.
int name_width(const std::vector<StrategyRun>& runs, int least) {
  std::size_t w = static_cast<std::size_t>(least);
  for (const auto& r : runs) w = std::max(w, r.name.size());
  return static_cast<int>(w);
}

void print_table(const Model& model, const std::vector<StrategyRun>& runs) {
  const uint64_t unit = model.uniform_bytes();
  const int w = name_width(runs, 22);
  std::printf("model %s: %d ops, %s of parameters, %s saved for backward\n", model.name.c_str(), model.size(),
              format_bytes(model.param_bytes()).c_str(), format_bytes(model.saved_bytes()).c_str());
  std::printf("%-*s %14s %9s %10s %11s %9s %9s\n", w, "strategy", "peak", unit ? "tensors" : "", "fwd steps",
              "recomputed", "bwd steps", "overhead");
  for (const auto& r : runs) {
    const Simulation& s = r.sim;
    std::string tensors = unit ? std::to_string(s.peak_bytes / unit) : "";
    std::printf("%-*s %14s %9s %10lld %11lld %9lld %8.1f%%\n", w, r.name.c_str(), format_bytes(s.peak_bytes).c_str(),
                tensors.c_str(), static_cast<long long>(s.forward_steps), static_cast<long long>(s.recompute_steps),
                static_cast<long long>(s.backward_steps), 100.0 * s.overhead);
  }
  for (const auto& r : runs)
    if (!r.schedule.note.empty()) std::printf("note: %s: %s\n", r.name.c_str(), r.schedule.note.c_str());
}

// When a strategy offloads or compresses: both tiers, the conversions and
// the time model, every strategy a row so that the step times compare.
void print_offload_table(const std::vector<StrategyRun>& runs, const TimeModel& tm) {
  if (std::none_of(runs.begin(), runs.end(), moves_or_converts)) return;
  std::printf("\nhost tier, compression and time (device %.4g FLOP/s, host link %.4g bytes/s, device memory %.4g bytes/s):\n",
              tm.device_flops, tm.link_bandwidth, tm.device_bandwidth);
  const int w = name_width(runs, 26);
  std::printf("%-*s %14s %14s %10s %12s %14s %12s %12s %12s %12s %12s\n", w, "strategy", "device peak", "host peak",
              "transfers", "conversions", "compressed", "compute", "transfer", "convert", "stall", "step");
  for (const auto& r : runs) {
    const Simulation& s = r.sim;
    std::printf("%-*s %14s %14s %10lld %12lld %14s %12s %12s %12s %12s %12s\n", w, r.name.c_str(),
                format_bytes(s.peak_bytes).c_str(), format_bytes(s.peak_host_bytes).c_str(),
                static_cast<long long>(s.transfers), static_cast<long long>(s.conversions),
                format_bytes(s.compressed_bytes).c_str(), format_seconds(s.time.compute_s).c_str(),
                format_seconds(s.time.transfer_s).c_str(), format_seconds(s.time.convert_s).c_str(),
                format_seconds(s.time.stall_s).c_str(), format_seconds(s.time.step_s).c_str());
  }
}

// The whole step beside the activations: what checkpointing cannot change.
void print_step_table(const Model& model, Optimizer optimizer, const std::vector<StrategyRun>& runs) {
  const StepMemory base = step_memory(model, optimizer, 0);
  std::printf("\nwhole step with %s: parameters %s, gradients %s, optimizer state %s",
              std::string(optimizer_name(optimizer)).c_str(), format_bytes(base.parameters).c_str(),
              format_bytes(base.parameter_grads).c_str(), format_bytes(base.optimizer_state).c_str());
  if (base.master_weights) std::printf(", fp32 master weights %s", format_bytes(base.master_weights).c_str());
  const int w = name_width(runs, 22);
  std::printf("\n%-*s %14s %14s %11s\n", w, "strategy", "activations", "step total", "share");
  const StrategyRun* least = nullptr;
  for (const auto& r : runs) {
    const StepMemory m = step_memory(model, optimizer, r.sim.peak_bytes);
    std::printf("%-*s %14s %14s %10.1f%%\n", w, r.name.c_str(), format_bytes(m.activations).c_str(),
                format_bytes(m.total()).c_str(), m.total() ? 100.0 * double(m.activations) / double(m.total()) : 0.0);
    if (!least || r.sim.peak_bytes < least->sim.peak_bytes) least = &r;
  }
  if (least) {
    const std::string note = dominant_part_note(step_memory(model, optimizer, least->sim.peak_bytes));
    if (!note.empty()) std::printf("note: at %s's peak, %s\n", least->name.c_str(), note.c_str());
  }
}

// "step_memory" (the parts no strategy changes) and each strategy's step total.
void add_step_memory_json(nlohmann::json& j, const Model& model, Optimizer optimizer,
                          const std::vector<StrategyRun>& runs) {
  j["step_memory"] = step_baseline_json(step_memory(model, optimizer, 0));
  for (std::size_t i = 0; i < runs.size(); ++i)
    j["strategies"][i]["step_total_bytes"] = step_memory(model, optimizer, runs[i].sim.peak_bytes).total();
}

void run_simulate(const SimulateOptions& o) {
  const Optimizer optimizer = optimizer_flag(o.optimizer);
  const TimeModel tm = time_model_of(o.time);
  const std::vector<int> ks = parse_micro_batches(o.micro_batches);
  auto specs = expand_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(resolve_budget_shares(spec, 0));  // reject bad names before any work
  if (!o.parallel.empty()) {
    for (const auto& spec : specs)
      if (has_budget_share(spec))
        throw InputError("strategy '" + spec + "': with --parallel, give budgets in bytes (a share such as 50% is of "
                         "one model's store-all peak, and each stage has its own)");
    if (o.micro_batches != "1")
      throw InputError("--micro-batches and --parallel: give the micro-batches in --parallel (micro-batches=M)");
    print_parallel(o.model, o.parallel, specs, o.optimizer.empty() ? Optimizer::Adam : optimizer, tm, o.limit, o.json, o.csv);
    return;
  }
  if (ks.size() > 1) {
    if (!o.csv.empty()) throw InputError("--csv takes one --micro-batches value, not a list");
    const Model base = load_model(o.model);
    print_micro_batch_table(base, resolve_budget_shares(base, specs), ks, optimizer, o.json, o.limit);
    return;
  }
  const int k = ks[0];
  const Model base = load_model(o.model);
  // A budget share is of the whole batch's store-all peak: one memory size for every K.
  specs = resolve_budget_shares(base, std::move(specs));
  const Model model = micro_batch(base, k);
  // The table needs the figures only; the timelines are 8 bytes per instruction.
  // The time model is a second pass over each schedule: the JSON carries it
  // for every strategy, the table only when some strategy offloads or compresses (below).
  auto runs = simulate_strategies(model, specs,
                                  {.limit = o.limit,
                                   .timelines = o.json || !o.csv.empty(),
                                   .time = o.json ? std::optional<TimeModel>(tm) : std::nullopt});
  if (!o.json && std::any_of(runs.begin(), runs.end(), moves_or_converts))
    for (auto& r : runs)
      if (r.ok()) r.sim.time = predict_step_time(model, r.schedule, tm);
  for (const auto& r : runs) {
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
  }
  if (!o.csv.empty()) write_file_atomically(o.csv, [&](std::ostream& out) { write_timelines_csv(out, model, runs); });
  if (o.json) {
    nlohmann::json j = comparison_json(model, runs);
    add_step_memory_json(j, model, optimizer, runs);
    j["micro_batches"] = k;
    for (std::size_t i = 0; i < runs.size(); ++i) j["strategies"][i]["step_flops"] = k * runs[i].sim.flops;
    j["time_model"] = {{"device_flops", tm.device_flops},
                       {"link_bandwidth", tm.link_bandwidth},
                       {"device_bandwidth", tm.device_bandwidth}};
    std::cout << j.dump() << "\n";
  } else {
    if (k > 1)
      std::printf("micro-batches: %d of batch %lld; the step runs %d forward and backward passes, the gradients "
                  "accumulate in place\n",
                  k, static_cast<long long>(model.op(0).shape[0]), k);
    print_table(model, runs);
    print_offload_table(runs, tm);
    if (!o.optimizer.empty()) print_step_table(model, optimizer, runs);
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand("simulate", "Predict the memory timeline, peak and recomputation of strategies");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16, mlp:8:1024:64, transformer:12, gpt:12, resnet:18) or a .json/.onnx file")
      ->required();
  const std::string names = strategy_help();
  cmd->add_option("-s,--strategy", o->strategies, "Comma-separated strategies, 'all' among them standing for every one that takes no argument (default: store-all,recompute-all,sqrt):" + names)
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON {model: {..., saved_bytes}, time_model, strategies:[{name, peak_bytes, peak_host_bytes, "
                "transfers, time: {compute_s, transfer_s, stall_s, step_s}, ..., timeline, host_timeline?}]} instead "
                "of a table");
  cmd->add_option("--csv", o->csv,
                  "Also write the timelines (bytes per instruction) to this CSV file; with --parallel, the per-stage "
                  "figures to it and the per-stage timelines (bytes per schedule slot) to its name with .timeline.csv "
                  "in place of .csv");
  cmd->add_option("--optimizer", o->optimizer,
                  "Also show the whole step's memory: parameters, their gradients and this optimizer's state (" +
                      optimizer_choices() + "; fp32 master weights for f16/bf16 weights) beside each strategy's activations");
  cmd->add_option("--micro-batches", o->micro_batches,
                  "Gradient accumulation: simulate one micro-batch of batch/K (the step runs K passes); a list "
                  "(1,2,4,8) prints a table over K")
      ->capture_default_str();
  cmd->add_option("--parallel", o->parallel,
                  "Split the step over devices (gpt: and transformer: presets; a model file into pipeline stages by its repeated blocks, and "
                  "each block by tp and sp where its Linears take Megatron's column- and row-parallel roles, else refused naming the op): tp=T[,sp],pp=P[,schedule=gpipe|1f1b|interleaved:V|zb-h1|"
                  "zb-h2],micro-batches=M[,dp=D,zero=0|1|2|3][,stages=N0:N1:...] (blocks per stage; default balanced); prints per pipeline stage the peak of each rank and what "
                  "it is made of, the idle share and the recompute overhead (docs/parallel.md). The model's BATCH is "
                  "one micro-batch; --optimizer defaults to adam here");
  add_max_instructions_option(cmd, o->limit);
  add_time_model_options(cmd, o->time);
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace remat::cli
