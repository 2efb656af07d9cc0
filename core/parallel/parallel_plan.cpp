#include "core/parallel/parallel_plan.h"

#include <algorithm>
#include <optional>

#include "core/analysis/comparison.h"
#include "core/analysis/step_memory.h"
#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "core/parallel/block_stages.h"
#include "core/parallel/tensor_split.h"
#include "core/parallel/zero.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace remat {

std::vector<int> balanced_blocks(int layers, int stages) {
  if (layers < stages)
    throw InputError("--parallel: " + std::to_string(layers) + " blocks cannot fill " + std::to_string(stages) +
                     " pipeline stages (pp x V) with one block each");
  std::vector<int> n(static_cast<std::size_t>(stages), layers / stages);
  for (int i = stages - layers % stages; i < stages; ++i) ++n[static_cast<std::size_t>(i)];
  return n;
}

std::vector<int> stage_blocks(int layers, const ParallelSpec& spec) {
  const int n = spec.pp * spec.chunks;
  if (spec.stages.empty()) return balanced_blocks(layers, n);
  if (static_cast<int>(spec.stages.size()) != n)
    throw InputError("--parallel stages: " + std::to_string(spec.stages.size()) + " given, pp x V is " + std::to_string(n) +
                     " stages");
  int sum = 0;
  for (int b : spec.stages) sum += b;
  if (sum != layers)
    throw InputError("--parallel stages: they hold " + std::to_string(sum) + " blocks, the model has " + std::to_string(layers));
  return spec.stages;
}

uint64_t held_after_forward(const Model& model, const Schedule& schedule) {
  ResidentSet rs(model);
  for (const Instr& ins : schedule.code) {
    if (ins.kind == InstrKind::Bwd) break;
    rs.apply(model, ins);
  }
  return rs.bytes;
}

uint64_t weight_grad_held(const Model& m) {
  std::vector<uint8_t> counted(static_cast<std::size_t>(m.size()), 0);
  uint64_t bytes = 0;
  auto keep = [&](int v) {
    const int s = m.storage(v);
    if (!counted[static_cast<std::size_t>(s)]++) bytes += m.op(s).bytes;
  };
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    if (op.kind != OpKind::Linear) continue;
    for (int s : op.saved) keep(s);
    // Under sp a column-parallel Linear keeps nothing: its W gathers again
    // the shard the all-gather before it keeps.
    for (int x : op.inputs)
      if (m.op(x).kind == OpKind::Generic)
        for (int s : m.op(x).saved) keep(s);
    bytes += op.aux_bytes + m.grad_bytes(v);
  }
  return bytes;
}

namespace {

// The weight-gradient half of the Linears' backward (2 of their 4 FLOPs per
// multiply-add pair): what zero-bubble schedules move into W passes.
double weight_grad_flops(const Model& m) {
  double w = 0;
  for (const Op& op : m.ops())
    if (op.kind == OpKind::Linear) w += op.bwd_flops / 2;
  return w;
}

uint64_t largest_op_weights(const Model& m) {
  uint64_t w = 0;
  for (const Op& op : m.ops()) w = std::max(w, op.param_bytes);
  return w;
}

}  // namespace

bool names_a_model_file(const std::string& spec) {
  return spec.ends_with(".json") || spec.ends_with(".onnx") || spec.find('/') != std::string::npos;
}

namespace {

// A gpt: or transformer: preset, else a model file split by its repeated
// blocks (block_stages.h): what the stages are cut from.
struct StageSource {
  std::optional<StackShape> preset;
  Model file;
  std::vector<Block> run;
  int layers = 0;
  DType dtype = DType::F32;
  uint64_t sequence_bytes = 0;  // one whole [b, s, h] activation: sp's gather buffer
};

StageSource stage_source(const std::string& model_spec) {
  StageSource src;
  if (!names_a_model_file(model_spec)) {
    src.preset = parse_stack_shape(model_spec);  // another preset is refused here, saying which are split
    src.layers = src.preset->layers;
    src.dtype = src.preset->dtype;
    src.sequence_bytes = tensor_bytes({src.preset->batch, src.preset->seq, src.preset->hidden}, src.preset->dtype);
    return src;
  }
  src.file = load_model(model_spec);
  src.run = repeated_block_run(src.file);
  src.layers = static_cast<int>(src.run.size());
  src.sequence_bytes = src.file.op(src.run.front().first - 1).logical_bytes();  // the blocks' input
  for (const Op& op : src.file.ops())
    if (op.param_bytes > 0) {
      src.dtype = op.dtype;
      break;
    }
  return src;
}

}  // namespace

ParallelReport simulate_parallel(const std::string& model_spec, const ParallelSpec& spec, const std::string& strategy,
                                 const TimeModel& time, const InstructionLimit& limit, Optimizer optimizer) {
  const StageSource source = stage_source(model_spec);
  const std::unique_ptr<Strategy> made = make_strategy(strategy);  // a bad name fails before any work
  ParallelReport rep;
  rep.dtype = source.dtype;
  rep.model = model_spec;
  rep.spec = spec;
  rep.strategy = made->name();
  const int virtual_stages = spec.pp * spec.chunks;
  const std::vector<int> counts = stage_blocks(source.layers, spec);
  rep.grid = pipeline_grid(spec);  // before any stage's work: it may be over its limit
  std::vector<int> first(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) first[i] = first[i - 1] + counts[i - 1];
  for (int r = 0; r < spec.pp; ++r) {
    StageReport st;
    st.stage = r;
    st.in_flight = in_flight(spec, r);
    ModelStates full;
    double fwd = 0, bwd = 0, recompute = 0, wgrad = 0;
    uint64_t largest = 0;
    for (int j = 0; j < spec.chunks; ++j) {
      const int v = j * spec.pp + r;  // Megatron's interleaving: chunk j of device r is virtual stage j p + r
      const RankSlice slice{.tp = spec.tp,
                            .sp = spec.sp,
                            .first_block = first[static_cast<std::size_t>(v)],
                            .blocks = counts[static_cast<std::size_t>(v)],
                            .first_stage = v == 0,
                            .last_stage = v == virtual_stages - 1};
      st.chunks.push_back(slice);
      const Model m = source.preset ? rank_model(*source.preset, slice) : file_rank_model(source.file, source.run, slice, model_spec);
      const StrategyRun run = simulate_strategy(m, *made, strategy, {.limit = limit, .timelines = true, .time = std::nullopt});
      if (!run.ok())
        throw InputError("strategy '" + strategy + "' on pipeline stage " + std::to_string(r) +
                         (spec.chunks > 1 ? " chunk " + std::to_string(j) : "") + ": " + run.error);
      ChunkMemory cm{.held = held_after_forward(m, run.schedule), .peak = run.sim.peak_bytes, .weight_grad_held = weight_grad_held(m)};
      for (std::size_t i = 0; i < run.schedule.code.size() && run.schedule.code[i].kind != InstrKind::Bwd; ++i)
        cm.forward_peak = std::max(cm.forward_peak, run.sim.timeline[i]);
      st.chunk_memory.push_back(cm);
      st.held_per_micro_batch = std::max(st.held_per_micro_batch, cm.held);
      st.micro_batch_peak = std::max(st.micro_batch_peak, cm.peak);
      const StepMemory sm = step_memory(m, optimizer, 0);
      full.weights += sm.parameters;
      full.gradients += sm.parameter_grads;
      full.optimizer += sm.master_weights + sm.optimizer_state;
      fwd += m.forward_flops();
      bwd += m.backward_flops();
      recompute += run.sim.recompute_flops;
      wgrad += weight_grad_flops(m);
      largest = std::max(largest, largest_op_weights(m));
    }
    const ModelStates mine = zero_shard(full, spec.dp, spec.zero);
    st.weights = mine.weights;
    st.gradients = mine.gradients;
    st.optimizer = mine.optimizer;
    st.activations = static_cast<uint64_t>(st.in_flight - 1) * st.held_per_micro_batch + st.micro_batch_peak;
    if (spec.sp) st.buffers += source.sequence_bytes;
    if (spec.zero == 3 && spec.dp > 1) st.buffers += largest;
    st.recompute_overhead = fwd + bwd > 0 ? recompute / (fwd + bwd) : 0;
    st.times = {.f = fwd / time.device_flops, .b = (bwd - wgrad + recompute) / time.device_flops, .w = wgrad / time.device_flops};
    rep.stages.push_back(std::move(st));
  }
  StageTimes slowest;
  for (const StageReport& s : rep.stages)
    if (s.times.total() > slowest.total()) slowest = s.times;
  rep.step_s = step_seconds(spec, slowest);
  rep.bubble_fraction = rep.step_s > 0 ? bubble_seconds(spec, slowest) / rep.step_s : 0;
  for (StageReport& s : rep.stages) s.idle = rep.step_s > 0 ? 1 - spec.micro_batches * s.times.total() / rep.step_s : 0;
  for (const StageReport& s : rep.stages)
    rep.timelines.push_back(stage_timeline(rep.grid, s.stage, s.weights + s.gradients + s.optimizer + s.buffers, s.chunk_memory));
  return rep;
}

}  // namespace remat
