#include "core/exec/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/sim/compression.h"
#include "core/base/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/exec/op_exec.h"
#include "core/sim/instr_reads.h"
#include "core/kernels/rng.h"
#include "core/model/op_rules.h"
#include "core/sim/simulator.h"

namespace remat {
namespace {

// Releases whatever a run still holds, also when a kernel throws.
// act[v] is where A(v)'s elements start: its own storage for an owner, a
// pointer into the owner's storage for a view. Only storages are allocated and
// released; a storage stays while any op aliasing it (the owner or a view) is
// resident, as the simulator counts it (holders).
// host[v]: A(v)'s copy (or C(v)'s, host_form[v] != 0) in the backend's host
// pool while it is offloaded; fetched[v]: A(v) or C(v) came back by a fetch
// whose copy no kernel has waited for yet. packed[v]: C(v), the compressed
// copy on the device, of type form[v].
struct Resident {
  Backend& backend;
  std::vector<void*> act, grad, aux, storage, host, packed;
  std::vector<int32_t> holders;
  std::vector<uint8_t> fetched, form, host_form;
  Resident(Backend& b, int n)
      : backend(b), act(static_cast<std::size_t>(n), nullptr), grad(static_cast<std::size_t>(n), nullptr),
        aux(static_cast<std::size_t>(n), nullptr), storage(static_cast<std::size_t>(n), nullptr),
        host(static_cast<std::size_t>(n), nullptr), packed(static_cast<std::size_t>(n), nullptr),
        holders(static_cast<std::size_t>(n), 0), fetched(static_cast<std::size_t>(n), 0),
        form(static_cast<std::size_t>(n), 0), host_form(static_cast<std::size_t>(n), 0) {}
  ~Resident() { release_all(); }
  void release_all() {
    for (auto* list : {&storage, &grad, &aux, &packed}) {
      for (void*& p : *list) {
        if (p) backend.release(p);
        p = nullptr;
      }
    }
    for (void*& p : host) {
      if (p) backend.release_host(p);
      p = nullptr;
    }
    std::fill(act.begin(), act.end(), nullptr);
    std::fill(holders.begin(), holders.end(), 0);
    std::fill(fetched.begin(), fetched.end(), 0);
    std::fill(form.begin(), form.end(), 0);
    std::fill(host_form.begin(), host_form.end(), 0);
  }
  // A(v) is no longer needed: its storage goes when its last holder does.
  void drop_act(const Model& model, std::size_t v) {
    act[v] = nullptr;
    const auto s = static_cast<std::size_t>(model.storage(static_cast<int>(v)));
    if (--holders[s] == 0) {
      backend.release(storage[s]);
      storage[s] = nullptr;
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

std::string_view exec_status_name(ExecStatus s) {
  switch (s) {
    case ExecStatus::Ok: return "ok";
    case ExecStatus::OutOfMemory: return "out-of-memory";
    case ExecStatus::Cancelled: return "cancelled";
    case ExecStatus::Failed: return "failed";
    case ExecStatus::NotRun: return "not-run";
  }
  return "failed";
}

ExecResult execute(const Model& model, const Schedule& schedule, Backend& backend, const ExecOptions& options) {
  const HostData data = make_host_data(model, options.seed);
  backend.load(model, data);
  return execute_loaded(model, schedule, backend, data, options);
}

namespace {

// Which fwd instructions recompute (their op was computed before).
std::vector<uint8_t> recompute_flags(const Model& model, const Schedule& schedule) {
  std::vector<uint8_t> recompute(schedule.code.size(), 0);
  std::vector<uint8_t> computed(static_cast<std::size_t>(model.size()), 0);
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    if (schedule.code[i].kind != InstrKind::Fwd) continue;
    auto& c = computed[static_cast<std::size_t>(schedule.code[i].op)];
    recompute[i] = c;
    c = 1;
  }
  return recompute;
}

std::string where_str(int64_t instruction, const Schedule& schedule, const Model& model) {
  return instruction < 0 ? std::string("before the first instruction")
                         : "at instruction " + std::to_string(instruction) + " (" +
                               to_string(schedule.code[static_cast<std::size_t>(instruction)], model) + ")";
}

std::string oom_message(const OutOfMemory& oom, const std::string& what, const Schedule& schedule, const Model& model,
                        uint64_t limit) {
  std::string free_part;
  if (limit) free_part = ", " + bytes_str(oom.free) + " free under the limit of " + bytes_str(limit);
  else if (oom.free == std::numeric_limits<uint64_t>::max()) free_part = ", the device could not provide it";
  else free_part = ", " + bytes_str(oom.free) + " free on the device";
  const std::string needed = oom.needed ? "needed " + bytes_str(oom.needed) + " " : std::string("needed more memory ");
  return "out of memory: " + needed + what + where_str(oom.instruction, schedule, model) + free_part;
}

// A failure while instruction `at` ran (or, for an asynchronous device fault,
// was the latest to be launched).
struct RunFailure {
  int64_t instruction;
  std::string message;
  bool device_fault;
};

}  // namespace

ExecResult execute_loaded(const Model& model, const Schedule& schedule, Backend& backend, const HostData& data,
                          const ExecOptions& options) {
  check_executable(model);
  if (options.repeat < 1) throw InputError("repeat must be at least 1, got " + std::to_string(options.repeat));
  const Simulation sim = simulate(model, schedule, {.timeline = false});  // validated: every read below is of a resident tensor
  if (sim.transfers > 0 && !backend.has_host_tier())
    throw InputError("the " + backend.name() + " backend has no host tier: strategy '" + schedule.strategy +
                     "' offloads tensors to host memory");
  if (sim.conversions > 0 && !backend.can_compress())
    throw InputError("the " + backend.name() + " backend cannot convert tensors: strategy '" + schedule.strategy +
                     "' compresses checkpoints");

  const int n = model.size();
  const auto& code = schedule.code;
  ExecResult res;
  res.strategy = schedule.strategy;
  res.backend = backend.name();
  res.baseline_bytes = backend.baseline_bytes();
  res.compressed = sim.conversions > 0;
  const std::vector<uint8_t> recompute = recompute_flags(model, schedule);
  std::vector<int64_t> view_offset(static_cast<std::size_t>(n), 0);  // f32 elements into the storage
  for (int v = 0; v < n; ++v) view_offset[static_cast<std::size_t>(v)] = storage_offset(model, v);

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
  // "what" of the OOM message: a tracked tensor, or the backend's own memory.
  std::string oom_what;
  auto alloc_host = [&](uint64_t bytes) -> void* {
    void* p = backend.allocate_host(bytes);
    if (!p)
      throw DeviceOutOfMemory("the host pool could not allocate " + bytes_str(bytes) + " for an offload", bytes,
                              std::numeric_limits<uint64_t>::max());
    return p;
  };
  auto alloc = [&](uint64_t bytes, int64_t at) -> void* {
    const uint64_t live = backend.live_bytes();
    if (options.memory_limit && live + bytes > options.memory_limit)
      throw OutOfMemory{at, bytes, options.memory_limit - std::min(live, options.memory_limit)};
    void* p = backend.allocate(bytes);
    if (!p) throw OutOfMemory{at, bytes, backend.device_free_bytes()};
    return p;
  };

  const std::vector<uint8_t> input = input_bytes(model, data);
  if (input.size() > model.op(0).bytes) throw InputError("the input batch does not fit A(0)");

  std::vector<double> instr_sum(code.size(), 0.0);
  std::vector<uint8_t> acc;
  int64_t at = -1;  // the instruction running now
  try {
    backend.begin_strategy();
    for (std::size_t run = 0; run < runs; ++run) {
      const bool timed = run > 0;
      Resident r(backend, n);
      const TensorTable table{r.act, r.grad, r.aux};
      at = -1;
      backend.zero_param_grads();
      backend.reset_peaks();
      backend.begin_marks(code.size() + 1);
      check_cancel();
      r.storage[0] = r.act[0] = alloc(model.op(0).bytes, -1);
      r.holders[0] = 1;
      backend.upload(r.act[0], input.data(), input.size());
      backend.mark(0);
      for (std::size_t i = 0; i < code.size(); ++i) {
        const Instr ins = code[i];
        const auto v = static_cast<std::size_t>(ins.op);
        const Op& op = model.op(ins.op);
        at = static_cast<int64_t>(i);
        // A kernel reading a fetched tensor waits for its copy (CUDA: an event
        // on the copy stream), not the fetch instruction itself: the copy
        // overlaps the compute in between.
        if (const OpIds* reads = activation_reads(model, ins)) {
          for (int u : *reads) {
            auto& f = r.fetched[static_cast<std::size_t>(u)];
            if (f) backend.wait_for_copy(r.act[static_cast<std::size_t>(u)]);
            f = 0;
          }
        }
        switch (ins.kind) {
          case InstrKind::Fwd:
            if (op.view) {
              // No bytes: the input (resident, as simulate() checked) holds the storage.
              const auto s = static_cast<std::size_t>(op.storage);
              ++r.holders[s];
              r.act[v] = static_cast<char*>(r.storage[s]) + 4 * view_offset[v];
            } else {
              r.storage[v] = r.act[v] = alloc(op.bytes, at);
              r.holders[v] = 1;
            }
            if (op.aux_bytes > 0) r.aux[v] = alloc(op.aux_bytes, at);
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
            r.drop_act(model, v);
            break;
          case InstrKind::FreeGrad:
            backend.release(r.grad[v]);
            r.grad[v] = nullptr;
            break;
          case InstrKind::FreeAux:
            backend.release(r.aux[v]);
            r.aux[v] = nullptr;
            break;
          // v owns its storage and no view holds it (simulate() checked): the
          // bytes move whole; or C(v), when that is the one form on the device.
          case InstrKind::Offload:
            if (r.act[v]) {
              r.host[v] = alloc_host(op.bytes);
              backend.copy_to_host(r.host[v], r.storage[v], op.bytes);
              r.drop_act(model, v);
            } else {
              const uint64_t b = packed_bytes(op.bytes, static_cast<Packing>(r.form[v]));
              r.host[v] = alloc_host(b);
              backend.copy_to_host(r.host[v], r.packed[v], b);
              backend.release(r.packed[v]);
              r.packed[v] = nullptr;
              r.host_form[v] = r.form[v];
            }
            r.fetched[v] = 0;
            break;
          case InstrKind::Fetch:
            if (r.host_form[v] == 0) {
              r.storage[v] = r.act[v] = alloc(op.bytes, at);
              r.holders[v] = 1;
              backend.copy_to_device(r.storage[v], r.host[v], op.bytes);
            } else {
              const uint64_t b = packed_bytes(op.bytes, static_cast<Packing>(r.host_form[v]));
              r.packed[v] = alloc(b, at);
              backend.copy_to_device(r.packed[v], r.host[v], b);
              r.host_form[v] = 0;
            }
            backend.release_host(r.host[v]);
            r.host[v] = nullptr;
            r.fetched[v] = 1;
            break;
          // An f32 owner (simulate() checked); C(v) is made beside A(v), which
          // a `free A` then releases, so both count while the conversion runs.
          case InstrKind::CompressBF16:
          case InstrKind::CompressF16:
          case InstrKind::CompressInt8: {
            const Packing p = packing_of(ins.kind);
            r.packed[v] = alloc(packed_bytes(op.bytes, p), at);
            r.form[v] = static_cast<uint8_t>(p);
            if (r.fetched[v]) backend.wait_for_copy(r.act[v]);
            r.fetched[v] = 0;
            backend.compress(r.packed[v], r.act[v], op.bytes / 4, p);
            break;
          }
          case InstrKind::Decompress:
            r.storage[v] = r.act[v] = alloc(op.bytes, at);
            r.holders[v] = 1;
            if (r.fetched[v]) backend.wait_for_copy(r.packed[v]);
            r.fetched[v] = 0;
            backend.decompress(r.act[v], r.packed[v], op.bytes / 4, static_cast<Packing>(r.form[v]));
            break;
          case InstrKind::FreePacked:
            backend.release(r.packed[v]);
            r.packed[v] = nullptr;
            r.form[v] = 0;
            break;
        }
        if (options.sync_each) backend.synchronize();
        backend.mark(i + 1);
        check_cancel();
        if (options.progress && (i + 1) % report_every == 0)
          report(static_cast<double>(run * (code.size() + 1) + i + 1));
      }
      at = static_cast<int64_t>(code.size());  // past the last: the final synchronisation
      const auto marks = backend.mark_times_ms();  // synchronises
      r.release_all();
      res.tracked_peak_bytes = backend.peak_bytes();
      res.memory = backend.memory_stats();
      res.host_tracked_peak_bytes = backend.host_peak_bytes();
      res.host_memory = backend.host_memory_stats();
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
    res.message = oom_message(oom, "", schedule, model, options.memory_limit);
    return res;
  } catch (const DeviceOutOfMemory& e) {
    // The backend's own memory (scratch, a library's workspace) did not fit.
    const int64_t where = std::min<int64_t>(at, static_cast<int64_t>(code.size()) - 1);
    res.status = ExecStatus::OutOfMemory;
    res.oom_instruction = where;
    res.oom_needed = e.needed();
    res.oom_free = e.free_bytes();
    res.tracked_peak_bytes = backend.peak_bytes();
    res.message = oom_message({where, e.needed(), e.free_bytes()}, std::string("(") + e.what() + ") ", schedule,
                              model, 0);
    return res;
  } catch (const Cancelled&) {
    res.status = ExecStatus::Cancelled;
    res.message = "cancelled";
    return res;
  } catch (const DeviceFault& e) {
    res.status = ExecStatus::Failed;
    const bool exact = options.sync_each && at >= 0 && at < static_cast<int64_t>(code.size());
    res.message = std::string("device fault ") +
                  (exact ? where_str(at, schedule, model)
                         : "reported " + (at < static_cast<int64_t>(code.size()) ? where_str(at, schedule, model)
                                                                                 : std::string("after the last instruction")) +
                               " (kernels run asynchronously: it may come from an earlier one; rerun with --sync-each "
                               "to name the instruction that launched it)") +
                  ": " + e.what();
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
    if (code[i].kind == InstrKind::Offload || code[i].kind == InstrKind::Fetch) res.transfer_ms += res.instr_ms[i];
    if (is_compress(code[i].kind) || code[i].kind == InstrKind::Decompress) {
      res.convert_ms += res.instr_ms[i];
      ++res.conversions;
    }
  }
  res.recompute_share = sum > 0 ? res.recompute_ms / sum : 0;
  return res;
}

namespace {

ExecResult result_without_run(const Schedule& s, const Backend& backend, ExecStatus status, std::string message) {
  ExecResult r;
  r.strategy = s.strategy;
  r.backend = backend.name();
  r.status = status;
  r.message = std::move(message);
  r.baseline_bytes = backend.baseline_bytes();
  return r;
}

}  // namespace

std::vector<ExecResult> execute_strategies(const Model& model, const std::vector<Schedule>& schedules, Backend& backend,
                                           const ExecOptions& options, HostData* data_out) {
  check_executable(model);
  std::vector<ExecResult> out;
  // Nothing can run when the baseline does not fit: every strategy gets the same row.
  auto all_out_of_memory = [&](uint64_t needed, uint64_t free, const std::string& what) {
    for (const Schedule& s : schedules) {
      ExecResult r = result_without_run(s, backend, ExecStatus::OutOfMemory,
                                        "out of memory: needed " + bytes_str(needed) + " for " + what +
                                            " before the first instruction" +
                                            (free == std::numeric_limits<uint64_t>::max()
                                                 ? std::string()
                                                 : ", " + bytes_str(free) + " free on the device"));
      r.oom_needed = needed;
      r.oom_free = free;
      out.push_back(std::move(r));
    }
    return out;
  };
  const uint64_t baseline = baseline_bytes_of(model);
  if (const uint64_t free = backend.device_free_bytes(); baseline > free)
    return all_out_of_memory(baseline, free, "the baseline (parameters, their gradients, target, loss, constants)");
  HostData generated = make_host_data(model, options.seed);
  const HostData& data = data_out ? (*data_out = std::move(generated)) : generated;
  try {
    backend.load(model, data);
  } catch (const DeviceOutOfMemory& e) {
    return all_out_of_memory(e.needed(), e.free_bytes(), e.what());
  } catch (const DeviceFault& e) {
    for (const Schedule& s : schedules)
      out.push_back(result_without_run(s, backend, ExecStatus::NotRun,
                                       std::string("not run: the device is unusable: ") + e.what()));
    return out;
  }
  const double share = schedules.empty() ? 1.0 : 1.0 / static_cast<double>(schedules.size());
  bool cancelled = false;
  std::string unusable;  // why the device cannot run the rest, once it cannot
  for (std::size_t s = 0; s < schedules.size(); ++s) {
    if (cancelled) {
      out.push_back(result_without_run(schedules[s], backend, ExecStatus::Cancelled, "cancelled"));
      continue;
    }
    if (!unusable.empty()) {
      out.push_back(result_without_run(schedules[s], backend, ExecStatus::NotRun, unusable));
      continue;
    }
    ExecOptions o = options;
    const double base = share * static_cast<double>(s);
    if (options.progress) o.progress = [&, base](double f) { return options.progress(base + share * f); };
    try {
      out.push_back(execute_loaded(model, schedules[s], backend, data, o));
    } catch (const std::exception& e) {
      out.push_back(result_without_run(schedules[s], backend, ExecStatus::Failed, e.what()));
    }
    cancelled = out.back().status == ExecStatus::Cancelled;
    if (!backend.healthy()) {
      const std::string why = backend.recover(model, data);
      if (!why.empty())
        unusable = "not run: the device is unusable after the fault in strategy '" + schedules[s].strategy +
                   "' (" + why + ")";
    }
  }
  if (!cancelled && options.progress) (void)options.progress(1.0);
  return out;
}

}  // namespace remat
