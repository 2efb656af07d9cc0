#include "core/io/torch_plan.h"

#include <algorithm>
#include <fstream>

#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace remat {

TorchPlan make_torch_plan(const Model& model, const StrategyRun& run) {
  if (model.torch_origin.empty())
    throw InputError("model '" + model.name +
                     "' was not captured from PyTorch: a torch plan names each op by the module and aten op "
                     "remat_capture recorded, and presets, ONNX imports and hand-written files have none "
                     "(capture the module with 'python3 -m remat_capture FILE.py:FUNCTION --input SHAPE -o model.json')");
  if (!run.ok()) throw InputError("strategy '" + run.spec + "': " + run.error);
  TorchPlan plan;
  plan.strategy = run.name;
  plan.ops.resize(static_cast<std::size_t>(model.size()));
  const auto& code = run.schedule.code;

  // The forward pass ends at the first backward step: what is resident then
  // is what PyTorch keeps for backward.
  ResidentSet live(model);
  std::size_t i = 0;
  for (; i < code.size() && code[i].kind != InstrKind::Bwd; ++i) live.apply(model, code[i]);
  plan.forward_end_bytes = live.bytes;
  for (int v = 0; v < model.size(); ++v) {
    auto& p = plan.ops[static_cast<std::size_t>(v)];
    p.keep = live.act[static_cast<std::size_t>(v)] != 0;
    p.keep_aux = live.aux[static_cast<std::size_t>(v)] != 0;
  }

  // Recomputations: forward steps beyond an op's first. A phase is a run of
  // them between two backward steps (checkpoint_sets.h: each phase recomputes
  // what its backward steps read, then runs them).
  std::vector<int> fwd(static_cast<std::size_t>(model.size()), 0);
  bool moves = false, converts = false, nested = false;
  bool in_phase = false;
  bool seen_bwd = false;
  for (const Instr& ins : code) {
    const auto v = static_cast<std::size_t>(ins.op);
    switch (ins.kind) {
      case InstrKind::Fwd: {
        if (++fwd[v] > 1) {
          auto& p = plan.ops[v];
          ++p.recomputes;
          if (!seen_bwd || p.recomputes > 1) nested = true;  // a forward pass that recomputes, or a second time
          if (!in_phase) {
            in_phase = true;
            ++plan.phases;
          }
          if (p.phase < 0) p.phase = plan.phases - 1;
        }
        break;
      }
      case InstrKind::Bwd:
        seen_bwd = true;
        in_phase = false;
        break;
      case InstrKind::Offload:
        plan.ops[v].offload = true;
        moves = true;
        break;
      case InstrKind::Fetch: moves = true; break;
      case InstrKind::CompressBF16: plan.ops[v].compress = "bf16"; converts = true; break;
      case InstrKind::CompressF16: plan.ops[v].compress = "f16"; converts = true; break;
      case InstrKind::CompressInt8: plan.ops[v].compress = "int8"; converts = true; break;
      case InstrKind::Decompress: case InstrKind::FreePacked:
        converts = true;
        break;
      default: break;
    }
  }
  plan.kind = moves ? "offload" : converts ? "compress" : nested ? "nested" : "checkpoint-set";
  plan.peak_bytes = run.sim.peak_bytes;
  plan.recompute_steps = run.sim.recompute_steps;
  plan.recompute_flops = run.sim.recompute_flops;
  plan.overhead = run.sim.overhead;
  const auto store_all = make_strategy("store-all")->schedule(model);
  plan.store_all_peak_bytes = simulate(model, store_all, {.timeline = false}).peak_bytes;
  return plan;
}

nlohmann::ordered_json torch_plan_json(const Model& model, const TorchPlan& plan) {
  using ojson = nlohmann::ordered_json;
  ojson ops = ojson::array();
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    const auto& p = plan.ops[static_cast<std::size_t>(v)];
    const TorchOrigin origin =
        static_cast<std::size_t>(v) < model.torch_origin.size() ? model.torch_origin[static_cast<std::size_t>(v)] : TorchOrigin{};
    ojson j;
    j["id"] = v;
    j["name"] = op.name;
    j["kind"] = std::string(kind_name(op.kind));
    j["module"] = origin.outside ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(origin.module);
    if (!origin.aten.empty()) {
      j["aten"] = origin.aten;
      j["call"] = origin.call;
      j["place"] = origin.place;
    }
    j["inputs"] = nlohmann::ordered_json::array();
    for (int u : op.inputs) j["inputs"].push_back(u);
    j["saved"] = nlohmann::ordered_json::array();
    for (int u : op.saved) j["saved"].push_back(u);
    j["view"] = op.view;
    j["bytes"] = op.bytes;
    j["aux_bytes"] = op.aux_bytes;
    j["keep"] = p.keep;
    j["keep_aux"] = p.keep_aux;
    j["recomputes"] = p.recomputes;
    j["phase"] = p.phase;
    j["compress"] = p.compress.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.compress);
    j["offload"] = p.offload;
    ops.push_back(std::move(j));
  }
  ojson predicted;
  predicted["forward_end_bytes"] = plan.forward_end_bytes;
  predicted["peak_bytes"] = plan.peak_bytes;
  predicted["store_all_peak_bytes"] = plan.store_all_peak_bytes;
  predicted["saved_bytes"] = model.saved_bytes();
  predicted["recompute_steps"] = plan.recompute_steps;
  predicted["recompute_flops"] = plan.recompute_flops;
  predicted["overhead"] = plan.overhead;
  return ojson{{"format", "remat-torch-plan"}, {"version", 1},           {"model", model.name},
               {"strategy", plan.strategy},    {"kind", plan.kind},     {"phases", plan.phases},
               {"predicted", std::move(predicted)}, {"ops", std::move(ops)}};
}

void check_torch_plan_path(const std::string& path) {
  check_output_path("--torch-plan", path, ".json", "the plan is JSON");
}

void write_torch_plan(const Model& model, const TorchPlan& plan, const std::string& path) {
  const auto doc = torch_plan_json(model, plan);
  write_file_atomically(path, [&](std::ostream& out) { out << doc.dump(1) << "\n"; });
}

}  // namespace remat
