#include "core/sim/simulator.h"
#include "core/base/work_counters.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/base/prefault.h"
#include "core/base/small_vec.h"

namespace remat {

ResidentSet::ResidentSet(const Model& model)
    : act(static_cast<std::size_t>(model.size()), 0),
      grad(static_cast<std::size_t>(model.size()), 0),
      aux(static_cast<std::size_t>(model.size()), 0),
      grad_storage(static_cast<std::size_t>(model.size()), 0),
      grad_holders(static_cast<std::size_t>(model.size()), 0),
      host(static_cast<std::size_t>(model.size()), 0),
      packed(static_cast<std::size_t>(model.size()), 0),
      holders(static_cast<std::size_t>(model.size()), 0) {
  act[0] = 1;  // the input batch is given
  holders[0] = 1;
  bytes = model.op(0).bytes;
}

void ResidentSet::recount(const Model& model) {
  std::fill(holders.begin(), holders.end(), 0);
  std::fill(grad_holders.begin(), grad_holders.end(), 0);
  bytes = 0;
  host_bytes = 0;
  count = 0;
  for (int v = 0; v < model.size(); ++v) {
    const auto u = static_cast<std::size_t>(v);
    if (host[u] == 1) host_bytes += model.op(v).bytes;
    else if (host[u]) host_bytes += packed_bytes(model.op(v).bytes, static_cast<Packing>(host[u] - 1));
    if (packed[u]) bytes += packed_bytes(model.op(v).bytes, static_cast<Packing>(packed[u]));
    if (act[u] && holders[static_cast<std::size_t>(model.storage(v))]++ == 0) bytes += model.op(model.storage(v)).bytes;
    if (grad[u] && grad_holders[static_cast<std::size_t>(grad_storage[u])]++ == 0) bytes += model.grad_bytes(v);
    if (aux[u]) bytes += model.op(v).aux_bytes;
    count += act[u] + grad[u] + aux[u] + (packed[u] != 0);
  }
}

uint64_t ResidentSet::grad_bytes_made_by(const Model& model, int v) const {
  uint64_t made = 0;
  const auto& in = model.op(v).inputs;
  SmallVec<int32_t, 4> left;  // storages an earlier input of this bwd moved out of (no allocation: per bwd, dtr's hot path)
  for (std::size_t k = 0; k < in.size(); ++k) {
    const int u = in[k];
    const auto uu = static_cast<std::size_t>(u);
    if (!model.has_grad_tensor(u) || std::find(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(k), u) != in.begin() + static_cast<std::ptrdiff_t>(k))
      continue;  // a repeated input's second part is added in place
    if (!grad[uu]) {
      if (!model.shares_grad(v, u)) made += model.grad_bytes(u);
      continue;
    }
    const int32_t s = grad_storage[uu];
    const auto left_here = static_cast<int32_t>(std::count(left.begin(), left.end(), s));
    if (grad_holders[static_cast<std::size_t>(s)] - left_here > 1) made += model.grad_bytes(u), left.push_back(s);
  }
  return made;
}

uint64_t ResidentSet::grad_bytes_resident(const Model& model) const {
  uint64_t total = 0;
  std::vector<uint8_t> counted(grad.size(), 0);
  for (std::size_t v = 0; v < grad.size(); ++v)
    if (grad[v] && !counted[static_cast<std::size_t>(grad_storage[v])]++) total += model.grad_bytes(static_cast<int>(v));
  return total;
}

namespace {

std::string tensor_name(const Model& model, const char* t, int v) {
  const std::string& name = model.op(v).name;
  return std::string(t) + "(" + (name.empty() ? std::to_string(v) : name) + ")";
}

// Why a read found A(v) missing, for the message: offloaded, compressed or simply not there.
const char* not_resident(const ResidentSet& r, int v) {
  if (r.host[static_cast<std::size_t>(v)]) return " which is on the host (offloaded; fetch it first)";
  if (r.packed[static_cast<std::size_t>(v)]) return " which is compressed (decompress it first)";
  return " which is not resident";
}

}  // namespace

// One pass over the instructions: the checks of each kind, then the memory
// rule (ResidentSet::apply). Everything per instruction reads the op's own
// record (inputs and saved lists are inside it) and flat per-op flags; nothing
// is allocated per instruction. Error messages are built only when thrown.
Simulation simulate(const Model& model, const Schedule& schedule, const SimulateOptions& options) {
  work_counter::count(work_counter::simulations);
  const int n = model.size();
  ResidentSet r(model);
  std::vector<uint8_t> bwd_done(static_cast<std::size_t>(n), 0), computed(static_cast<std::size_t>(n), 0);
  std::vector<int32_t> pending(static_cast<std::size_t>(n));  // consumers whose bwd is still to come
  for (int v = 0; v < n; ++v) pending[static_cast<std::size_t>(v)] = static_cast<int32_t>(model.consumers(v).size());
  computed[0] = 1;

  Simulation sim;
  const std::size_t count = schedule.code.size();
  if (options.timeline) reserve_prefaulted(sim.timeline, count);
  auto name = [&](const char* t, int v) { return tensor_name(model, t, v); };
  for (std::size_t i = 0; i < count; ++i) {
    const Instr ins = schedule.code[i];
    if (ins.op < 0 || ins.op >= n) throw ScheduleError(i, "op " + std::to_string(ins.op) + " does not exist");
    const auto v = static_cast<std::size_t>(ins.op);
    const Op& op = model.op(ins.op);
    switch (ins.kind) {
      case InstrKind::Fwd:
        if (ins.op == 0) throw ScheduleError(i, "the input is given, it cannot be computed");
        if (r.act[v]) throw ScheduleError(i, "fwd of " + name("A", ins.op) + " which is already resident");
        // One copy per storage: the bytes of a storage are counted once.
        if (!op.view && r.holders[v] > 0)
          throw ScheduleError(i, "fwd of " + name("A", ins.op) + " while a view of its previous value still holds that storage (a second copy)");
        if (r.aux[v]) throw ScheduleError(i, "fwd of op " + std::to_string(ins.op) + " while " + name("aux", ins.op) + " of its previous forward is resident");
        if (r.host[v]) throw ScheduleError(i, "fwd of " + name("A", ins.op) + " while its offloaded copy is on the host (a second copy)");
        if (r.packed[v]) throw ScheduleError(i, "fwd of " + name("A", ins.op) + " while its compressed copy " + name("C", ins.op) + " is resident (a second copy)");
        for (int u : op.inputs) {
          if (!r.act[static_cast<std::size_t>(u)]) throw ScheduleError(i, "fwd " + name("A", ins.op) + " reads " + name("A", u) + not_resident(r, u));
        }
        ++sim.forward_steps;
        sim.flops += op.fwd_flops;
        if (computed[v]) {
          ++sim.recompute_steps;
          sim.recompute_flops += op.fwd_flops;
        }
        computed[v] = 1;
        break;
      case InstrKind::Bwd:
        if (ins.op == 0) throw ScheduleError(i, "the input has no backward");
        if (bwd_done[v]) throw ScheduleError(i, "second backward of op " + std::to_string(ins.op));
        if (pending[v] != 0) throw ScheduleError(i, "backward of op " + std::to_string(ins.op) + " before all its consumers' backward (" + name("G", ins.op) + " incomplete)");
        if (model.has_grad_tensor(ins.op) && !r.grad[v]) throw ScheduleError(i, "bwd reads " + name("G", ins.op) + " which is not resident");
        for (int s : op.saved) {
          if (!r.act[static_cast<std::size_t>(s)]) throw ScheduleError(i, "bwd of op " + std::to_string(ins.op) + " reads " + name("A", s) + not_resident(r, s));
        }
        if (op.aux_bytes > 0 && !r.aux[v]) throw ScheduleError(i, "bwd of op " + std::to_string(ins.op) + " reads " + name("aux", ins.op) + " which is not resident");
        for (std::size_t a = 0; a < op.inputs.size(); ++a) {
          // Consumers are counted once per producer, even for Add(x, x).
          const int u = op.inputs[a];
          if (std::find(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(a), u) ==
              op.inputs.begin() + static_cast<std::ptrdiff_t>(a))
            --pending[static_cast<std::size_t>(u)];
        }
        bwd_done[v] = 1;
        ++sim.backward_steps;
        sim.flops += op.bwd_flops;
        break;
      case InstrKind::FreeAct:
        if (!r.act[v]) throw ScheduleError(i, "free of " + name("A", ins.op) + not_resident(r, ins.op));
        break;
      case InstrKind::FreeGrad:
        if (!r.grad[v]) throw ScheduleError(i, "free of " + name("G", ins.op) + " which is not resident");
        break;
      case InstrKind::FreeAux:
        if (!r.aux[v]) throw ScheduleError(i, "free of " + name("aux", ins.op) + " which is not resident");
        break;
      case InstrKind::Offload:
        // A view's bytes belong to its owner: offloading the alias would move
        // storage other aliases still address, so only owners move, alone.
        if (op.view)
          throw ScheduleError(i, "offload of " + name("A", ins.op) + ", a view: only a storage's owner (" +
                                     name("A", op.storage) + ") can be offloaded");
        if (r.act[v] && r.packed[v])
          throw ScheduleError(i, "offload of " + name("A", ins.op) + " while both it and its compressed copy " +
                                     name("C", ins.op) + " are on the device (free one first)");
        if (!r.act[v] && !r.packed[v]) throw ScheduleError(i, "offload of " + name("A", ins.op) + not_resident(r, ins.op));
        if (r.act[v] && r.holders[v] != 1)
          throw ScheduleError(i, "offload of " + name("A", ins.op) + " while a view of it still holds its storage");
        ++sim.transfers;
        sim.transfer_bytes += r.act[v] ? op.bytes : packed_bytes(op.bytes, static_cast<Packing>(r.packed[v]));
        if (options.timeline && sim.host_timeline.empty()) {
          reserve_prefaulted(sim.host_timeline, count);
          sim.host_timeline.resize(i, 0);  // nothing was on the host before the first offload
        }
        break;
      case InstrKind::Fetch:
        if (!r.host[v]) throw ScheduleError(i, "fetch of " + name("A", ins.op) + " which is not on the host");
        ++sim.transfers;
        sim.transfer_bytes += r.host[v] == 1 ? op.bytes : packed_bytes(op.bytes, static_cast<Packing>(r.host[v] - 1));
        break;
      case InstrKind::CompressBF16:
      case InstrKind::CompressF16:
      case InstrKind::CompressInt8:
        if (!compressible(op))
          throw ScheduleError(i, "compress of " + name("A", ins.op) +
                                     (op.view ? ", a view: only a storage's owner (" + name("A", op.storage) + ") can be compressed"
                                              : std::string(", which is not an f32 tensor of whole floats")));
        if (r.packed[v]) throw ScheduleError(i, "compress of " + name("A", ins.op) + " while " + name("C", ins.op) + " already exists");
        if (!r.act[v]) throw ScheduleError(i, "compress of " + name("A", ins.op) + not_resident(r, ins.op));
        ++sim.conversions;
        sim.compressed_bytes += packed_bytes(op.bytes, packing_of(ins.kind));
        break;
      case InstrKind::Decompress:
        if (op.view) throw ScheduleError(i, "decompress of " + name("A", ins.op) + ", a view (views are never compressed)");
        if (!r.packed[v])
          throw ScheduleError(i, "decompress of " + name("A", ins.op) + " without " + name("C", ins.op) +
                                     (r.host[v] > 1 ? " on the device (it is on the host; fetch it first)" : " (nothing was compressed)"));
        if (r.act[v]) throw ScheduleError(i, "decompress of " + name("A", ins.op) + " which is already resident");
        if (r.holders[v] > 0)
          throw ScheduleError(i, "decompress of " + name("A", ins.op) + " while a view of its previous value still holds that storage (a second copy)");
        ++sim.conversions;
        break;
      case InstrKind::FreePacked:
        if (!r.packed[v]) throw ScheduleError(i, "free of " + name("C", ins.op) + " which is not resident");
        break;
    }
    r.apply(model, ins);
    if (options.timeline) sim.timeline.push_back(r.bytes);
    if (!sim.host_timeline.empty() || r.host_bytes) {
      if (options.timeline) sim.host_timeline.push_back(r.host_bytes);
      sim.peak_host_bytes = std::max(sim.peak_host_bytes, r.host_bytes);
    }
    if (r.bytes > sim.peak_bytes) {
      sim.peak_bytes = r.bytes;
      sim.peak_index = i;
    }
  }
  for (int v = 1; v < n; ++v) {
    if (!bwd_done[static_cast<std::size_t>(v)])
      throw ScheduleError(schedule.code.size(), "the schedule ends without the backward of op " + std::to_string(v) + " (its gradients are missing)");
  }
  for (int v = 0; v < n; ++v) {
    if (r.host[static_cast<std::size_t>(v)])
      throw ScheduleError(schedule.code.size(), "the schedule ends with " + name("A", v) + " on the host (offloaded, never fetched)");
    if (r.packed[static_cast<std::size_t>(v)])
      throw ScheduleError(schedule.code.size(), "the schedule ends with " + name("C", v) + ", a compressed copy never freed");
  }
  const double one_pass = model.forward_flops() + model.backward_flops();
  sim.overhead = one_pass > 0 ? sim.recompute_flops / one_pass : 0;
  if (options.time) sim.time = predict_step_time(model, schedule, *options.time);
  return sim;
}

}  // namespace remat
