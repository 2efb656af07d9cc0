#include "core/exec/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "core/kernels/rng.h"
#include "core/op_rules.h"
#include "core/simulator.h"

namespace remat {
namespace {

// Uniform in [-1, 1) from 24 random bits: exact in float32, the same on every
// machine. Streams keep the input, target, labels and each parameter apart.
float uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t h = mix64(mix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) + i);
  return static_cast<float>(static_cast<double>(h >> 40) * (2.0 / 16777216.0) - 1.0);
}

enum Stream : uint64_t { kInput = 1, kTarget = 2, kLabels = 3, kParams = 16 };

// Releases whatever a run still holds, also when a kernel throws.
struct Resident {
  Backend& backend;
  std::vector<void*> act, grad;
  Resident(Backend& b, int n) : backend(b), act(static_cast<std::size_t>(n), nullptr), grad(static_cast<std::size_t>(n), nullptr) {}
  ~Resident() { release_all(); }
  void release_all() {
    for (auto* list : {&act, &grad}) {
      for (void*& p : *list) {
        if (p) backend.release(p);
        p = nullptr;
      }
    }
  }
};

struct OutOfMemory {
  int64_t instruction;
  uint64_t needed, free;
};

struct Cancelled {};

std::string bytes_str(uint64_t b) { return std::to_string(b) + " bytes"; }

}  // namespace

int64_t ParamTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParamTensor> parameter_tensors(const Model& model) {
  std::vector<ParamTensor> out;
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    const std::string id = std::to_string(v);
    if (op.kind == OpKind::Linear || op.kind == OpKind::Dense) {
      const int64_t in = model.op(op.inputs.at(0)).cols();
      out.push_back({v, 0, id + ".weight", {op.cols(), in}});
      out.push_back({v, 1, id + ".bias", {op.cols()}});
    } else if (op.kind == OpKind::LayerNorm) {
      out.push_back({v, 0, id + ".gamma", {op.cols()}});
      out.push_back({v, 1, id + ".beta", {op.cols()}});
    }
  }
  return out;
}

void check_executable(const Model& model) {
  std::string list;
  int bad = 0;
  for (int v = 0; v < model.size(); ++v) {
    if (executable(model.op(v))) continue;
    if (++bad <= 5) {
      const Op& op = model.op(v);
      list += (bad > 1 ? ", " : "") + (op.name.empty() ? std::string(kind_name(op.kind)) : op.name) + " (op " +
              std::to_string(v) + ", " + std::string(kind_name(op.kind)) + ")";
    }
  }
  if (bad > 5) list += " and " + std::to_string(bad - 5) + " more";
  if (bad)
    throw InputError("model " + model.name + " has simulate-only ops: " + list +
                     " (only f32 Input, Linear, Dense, ReLU, GELU, Tanh, LayerNorm, Add, Dropout, MSELoss and "
                     "SoftmaxCELoss with whole-float sizes can be executed)");
}

HostData make_host_data(const Model& model, uint64_t seed) {
  check_executable(model);
  HostData d;
  d.seed = seed;
  const Op& in = model.op(0);
  d.input.resize(static_cast<std::size_t>(in.numel()));
  for (std::size_t i = 0; i < d.input.size(); ++i) d.input[i] = uniform(seed, kInput, i);
  const Op& loss = model.op(model.loss());
  const Op& logits = model.op(loss.inputs.at(0));
  if (loss.kind == OpKind::MSELoss) {
    d.target.resize(static_cast<std::size_t>(logits.numel()));
    for (std::size_t i = 0; i < d.target.size(); ++i) d.target[i] = uniform(seed, kTarget, i);
  } else if (loss.kind == OpKind::SoftmaxCELoss) {
    d.labels.resize(static_cast<std::size_t>(logits.rows()));
    for (std::size_t i = 0; i < d.labels.size(); ++i)
      d.labels[i] = static_cast<int32_t>(mix64(mix64(seed ^ (kLabels * 0xD1B54A32D192ED03ull)) + i) %
                                         static_cast<uint64_t>(logits.cols()));
  }
  const auto tensors = parameter_tensors(model);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const ParamTensor& p = tensors[k];
    const Op& op = model.op(p.op);
    std::vector<float> values(static_cast<std::size_t>(p.numel()));
    if (!op.param_init.empty()) {
      if (op.param_init.size() != 2 || !op.param_init[static_cast<std::size_t>(p.slot)] ||
          op.param_init[static_cast<std::size_t>(p.slot)]->size() != values.size())
        throw InputError("model " + model.name + ": initial values of op " + std::to_string(p.op) + " ('" + op.name +
                         "') do not match parameter " + p.name + " (" + std::to_string(values.size()) +
                         " floats expected)");
      values = *op.param_init[static_cast<std::size_t>(p.slot)];
    } else {
      const uint64_t stream = kParams + k;
      if (op.kind == OpKind::LayerNorm) {
        const float base = p.slot == 0 ? 1.0f : 0.0f;
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = base + 0.1f * uniform(seed, stream, i);
      } else {
        const int64_t fan_in = model.op(op.inputs.at(0)).cols();
        const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = bound * uniform(seed, stream, i);
      }
    }
    d.params.push_back(std::move(values));
  }
  return d;
}

std::string_view exec_status_name(ExecStatus s) {
  switch (s) {
    case ExecStatus::Ok: return "ok";
    case ExecStatus::OutOfMemory: return "out-of-memory";
    case ExecStatus::Cancelled: return "cancelled";
    case ExecStatus::Failed: return "failed";
  }
  return "failed";
}

uint64_t fnv1a64(const std::vector<std::vector<float>>& tensors) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : tensors) {
    const auto* p = reinterpret_cast<const unsigned char*>(t.data());
    for (std::size_t i = 0; i < t.size() * sizeof(float); ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

ExecResult execute(const Model& model, const Schedule& schedule, Backend& backend, const ExecOptions& options) {
  const HostData data = make_host_data(model, options.seed);
  backend.load(model, data);
  return execute_loaded(model, schedule, backend, data, options);
}

ExecResult execute_loaded(const Model& model, const Schedule& schedule, Backend& backend, const HostData& data,
                          const ExecOptions& options) {
  check_executable(model);
  if (options.repeat < 1) throw InputError("repeat must be at least 1, got " + std::to_string(options.repeat));
  (void)simulate(model, schedule);  // validated: every read below is of a resident tensor

  const int n = model.size();
  const auto& code = schedule.code;
  ExecResult res;
  res.strategy = schedule.strategy;
  res.backend = backend.name();
  res.baseline_bytes = backend.baseline_bytes();

  // Which fwd instructions recompute (the op was computed before).
  std::vector<uint8_t> recompute(code.size(), 0);
  {
    std::vector<uint8_t> computed(static_cast<std::size_t>(n), 0);
    for (std::size_t i = 0; i < code.size(); ++i) {
      if (code[i].kind != InstrKind::Fwd) continue;
      auto& c = computed[static_cast<std::size_t>(code[i].op)];
      recompute[i] = c;
      c = 1;
    }
  }

  const std::size_t runs = static_cast<std::size_t>(options.repeat) + 1;
  const double total_units = static_cast<double>(runs * (code.size() + 1));
  const std::size_t report_every = std::max<std::size_t>(1, code.size() / 100);
  double last_fraction = 0;
  auto report = [&](double units) {
    const double f = std::min(1.0, units / total_units);
    if (options.progress && f >= last_fraction) {
      last_fraction = f;
      if (!options.progress(f)) throw Cancelled{};
    }
  };
  auto check_cancel = [&] {
    if (options.cancel && options.cancel->load(std::memory_order_relaxed)) throw Cancelled{};
  };

  auto alloc = [&](uint64_t bytes, int64_t at) -> void* {
    const uint64_t live = backend.live_bytes();
    if (options.memory_limit && live + bytes > options.memory_limit)
      throw OutOfMemory{at, bytes, options.memory_limit - std::min(live, options.memory_limit)};
    void* p = backend.allocate(bytes);
    if (!p) throw OutOfMemory{at, bytes, backend.device_free_bytes()};
    return p;
  };

  const std::vector<float>& input = data.input;
  if (input.size() * 4 > model.op(0).bytes) throw InputError("the input batch does not fit A(0)");

  std::vector<double> instr_sum(code.size(), 0.0);
  std::vector<uint8_t> acc;
  try {
    for (std::size_t run = 0; run < runs; ++run) {
      const bool timed = run > 0;
      Resident r(backend, n);
      const TensorTable table{r.act, r.grad};
      backend.zero_param_grads();
      backend.reset_peaks();
      backend.begin_marks(code.size() + 1);
      check_cancel();
      r.act[0] = alloc(model.op(0).bytes, -1);
      backend.upload(r.act[0], input.data(), 4 * input.size());
      backend.mark(0);
      for (std::size_t i = 0; i < code.size(); ++i) {
        const Instr ins = code[i];
        const auto v = static_cast<std::size_t>(ins.op);
        const Op& op = model.op(ins.op);
        const auto at = static_cast<int64_t>(i);
        switch (ins.kind) {
          case InstrKind::Fwd:
            r.act[v] = alloc(op.bytes, at);
            backend.forward(model, ins.op, table);
            break;
          case InstrKind::Bwd:
            acc.assign(op.inputs.size(), 0);
            for (std::size_t k = 0; k < op.inputs.size(); ++k) {
              const int u = op.inputs[k];
              if (!model.has_grad_tensor(u)) continue;
              auto& g = r.grad[static_cast<std::size_t>(u)];
              if (g) acc[k] = 1;
              else g = alloc(model.grad_bytes(u), at);
            }
            backend.backward(model, ins.op, table, acc);
            break;
          case InstrKind::FreeAct:
            backend.release(r.act[v]);
            r.act[v] = nullptr;
            break;
          case InstrKind::FreeGrad:
            backend.release(r.grad[v]);
            r.grad[v] = nullptr;
            break;
        }
        backend.mark(i + 1);
        check_cancel();
        if (options.progress && (i + 1) % report_every == 0)
          report(static_cast<double>(run * (code.size() + 1) + i + 1));
      }
      const auto marks = backend.mark_times_ms();  // synchronises
      r.release_all();
      res.tracked_peak_bytes = backend.peak_bytes();
      res.device_peak_bytes = backend.device_peak_bytes();
      if (timed) {
        res.run_ms.push_back(marks.back());
        for (std::size_t i = 0; i < code.size(); ++i) instr_sum[i] += marks[i + 1] - marks[i];
      }
      report(static_cast<double>((run + 1) * (code.size() + 1)));
    }
  } catch (const OutOfMemory& oom) {
    res.status = ExecStatus::OutOfMemory;
    res.oom_instruction = oom.instruction;
    res.oom_needed = oom.needed;
    res.oom_free = oom.free;
    res.tracked_peak_bytes = backend.peak_bytes();
    res.device_peak_bytes = backend.device_peak_bytes();
    res.message = "out of memory: needed " + bytes_str(oom.needed) +
                  (oom.instruction < 0 ? std::string(" for the input before the first instruction")
                                       : " at instruction " + std::to_string(oom.instruction) + " (" +
                                             to_string(code[static_cast<std::size_t>(oom.instruction)], model) + ")") +
                  (oom.free == std::numeric_limits<uint64_t>::max()
                       ? std::string(", the device could not provide it")
                       : ", " + bytes_str(oom.free) + " free" +
                             (options.memory_limit ? " under the limit of " + bytes_str(options.memory_limit)
                                                   : std::string(" on the device")));
    return res;
  } catch (const Cancelled&) {
    res.status = ExecStatus::Cancelled;
    res.message = "cancelled";
    return res;
  }

  res.loss = backend.read_loss();
  const std::size_t count = parameter_tensors(model).size();
  res.param_grads.reserve(count);
  for (std::size_t k = 0; k < count; ++k) res.param_grads.push_back(backend.read_param_grad(k));
  res.grad_hash = fnv1a64(res.param_grads);

  std::vector<double> sorted = res.run_ms;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t m = sorted.size();
  res.time_ms = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
  res.instr_ms.resize(code.size());
  double sum = 0;
  for (std::size_t i = 0; i < code.size(); ++i) {
    res.instr_ms[i] = instr_sum[i] / static_cast<double>(options.repeat);
    sum += res.instr_ms[i];
    if (recompute[i]) res.recompute_ms += res.instr_ms[i];
  }
  res.recompute_share = sum > 0 ? res.recompute_ms / sum : 0;
  return res;
}

std::vector<ExecResult> execute_strategies(const Model& model, const std::vector<Schedule>& schedules, Backend& backend,
                                           const ExecOptions& options) {
  const HostData data = make_host_data(model, options.seed);
  backend.load(model, data);
  std::vector<ExecResult> out;
  const double share = schedules.empty() ? 1.0 : 1.0 / static_cast<double>(schedules.size());
  bool cancelled = false;
  for (std::size_t s = 0; s < schedules.size(); ++s) {
    if (cancelled) {
      ExecResult r;
      r.strategy = schedules[s].strategy;
      r.backend = backend.name();
      r.status = ExecStatus::Cancelled;
      r.message = "cancelled";
      out.push_back(std::move(r));
      continue;
    }
    ExecOptions o = options;
    const double base = share * static_cast<double>(s);
    if (options.progress) o.progress = [&, base](double f) { return options.progress(base + share * f); };
    try {
      out.push_back(execute_loaded(model, schedules[s], backend, data, o));
    } catch (const std::exception& e) {
      ExecResult r;
      r.strategy = schedules[s].strategy;
      r.backend = backend.name();
      r.status = ExecStatus::Failed;
      r.message = e.what();
      out.push_back(std::move(r));
    }
    cancelled = out.back().status == ExecStatus::Cancelled;
  }
  if (!cancelled && options.progress) (void)options.progress(1.0);
  return out;
}

}  // namespace remat
