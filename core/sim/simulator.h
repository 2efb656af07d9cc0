// Replays a schedule under the memory model: the resident set per instruction,
// the memory timeline and peak, step counts and FLOPs. It is also the validator:
// a schedule that breaks the model is rejected with the instruction's index.
#pragma once
#include <cstdint>
#include <vector>

#include "core/sim/compression.h"
#include "core/model/model.h"
#include "core/sim/schedule.h"
#include "core/sim/time_model.h"

namespace remat {

struct Simulation {
  std::vector<uint64_t> timeline;  // device bytes resident while each instruction runs
  uint64_t peak_bytes = 0;         // device peak
  std::size_t peak_index = 0;      // first instruction reaching the peak
  // The host tier (offload/fetch): bytes on the host after each instruction,
  // empty when the schedule never offloads (or no timeline was asked for).
  std::vector<uint64_t> host_timeline;
  uint64_t peak_host_bytes = 0;
  int64_t transfers = 0;           // offload and fetch instructions
  uint64_t transfer_bytes = 0;     // bytes they move, both directions
  // Compressed checkpoints: compress and decompress instructions, and the
  // bytes the compressed copies C(v) hold when made (their stored size).
  int64_t conversions = 0;
  uint64_t compressed_bytes = 0;
  int64_t forward_steps = 0;       // every fwd, first pass included
  int64_t backward_steps = 0;
  int64_t recompute_steps = 0;     // fwd beyond the first of each op
  double flops = 0;                // of all executed fwd and bwd
  double recompute_flops = 0;
  // Recomputed forward FLOPs over one forward plus one backward pass.
  double overhead = 0;
  // The time model's prediction (time_model.h), when SimulateOptions::time was given.
  StepTime time;
};

struct SimulateOptions {
  // The timeline is 8 bytes per instruction; callers that only want the
  // figures (the CLI's table, searches that compare peaks) leave it out.
  bool timeline = true;
  // Also predict the step's time under this model (a second pass over the
  // instructions, after validation); null: Simulation::time stays zero.
  const TimeModel* time = nullptr;
};

// Throws ScheduleError: a read of a non-resident tensor (aux(v) included; an
// offloaded one is not resident), a second backward of an op, a backward
// before all its consumers', a free of a non-resident tensor, a recompute of a
// resident one (or of a storage a view still holds, or while the op's aux is
// resident, or while its offloaded copy is on the host), an offload of a view,
// of a tensor not resident or of a storage a view still holds, a fetch of a
// tensor not on the host, or at the end a gradient missing or a copy left on
// the host.
// Memory: the timeline (8 bytes per instruction, when kept) and a few bytes
// per op; time: tens of millions of instructions per second on one core
// (tests/bench/bench_simulate.cpp).
Simulation simulate(const Model& model, const Schedule& schedule, const SimulateOptions& options = {});
inline void validate(const Model& model, const Schedule& schedule) { (void)simulate(model, schedule); }

// The tensors resident between instructions. `apply` is the memory model's one
// rule for what an instruction allocates (fwd: A(op) and aux(op); bwd: G(u) of
// each input not yet resident; fetch: A(op) back from the host) and frees
// (offload moves A(op)'s bytes from the device to `host_bytes`); the simulator checks before
// applying, replays of validated schedules (resident index, GUI) apply
// directly. Compressed checkpoints: `packed` holds C(v)'s type while it is on
// the device (compress makes it beside A(v); decompress makes A(v) from it);
// an offload moves whichever one form is on the device, and `host` says which
// (1: A(v); 1 + Packing: C(v)). `act` flags aliases (op ids); a storage's bytes count while any of
// its aliases is resident (`holders` per owning op), so views add nothing.
// Gradients alias too: `grad` flags G(v) resident, `grad_storage[v]` names
// the storage it is (the op whose gradient allocated it) and `grad_holders`
// counts a storage's resident gradients. bwd v of a plain Add hands G(v)'s
// storage to an input without one (Model::shares_grad); an input whose
// gradient is resident gets the new part added in place, unless another
// resident gradient shares its storage: then out of place, into a storage of
// its own (grad_bytes(u) more), as PyTorch's autograd does. G(v) itself,
// resident while bwd v runs, is one of those others (grad_shared_elsewhere).
// Inline: it runs once per instruction of every replay.
struct ResidentSet {
  explicit ResidentSet(const Model& model);
  void apply(const Model& model, Instr ins);
  // Recomputes holders, bytes and count from the flags (after setting them;
  // grad_storage of each resident gradient included).
  void recount(const Model& model);
  // Whether a part added to resident G(u) goes out of place: another
  // resident gradient (G(v) of the bwd running included) aliases its storage.
  bool grad_shared_elsewhere(int u) const {
    return grad_holders[static_cast<std::size_t>(grad_storage[static_cast<std::size_t>(u)])] > 1;
  }
  // The gradient bytes bwd v allocates from this state (what apply adds).
  uint64_t grad_bytes_made_by(const Model& model, int v) const;
  // The bytes of the resident gradients, each storage once.
  uint64_t grad_bytes_resident(const Model& model) const;
  std::vector<uint8_t> act, grad, aux;
  std::vector<int32_t> grad_storage;  // per op, while G(op) is resident: the storage it aliases
  std::vector<int32_t> grad_holders;  // per gradient storage: resident gradients aliasing it
  std::vector<uint8_t> host;     // per owner: nonzero while on the host (1: A(op), 1 + Packing: C(op))
  std::vector<uint8_t> packed;   // per owner: the Packing of C(op) on the device, 0 when none
  std::vector<int32_t> holders;  // per storage owner: resident aliases
  uint64_t bytes = 0;            // on the device
  uint64_t host_bytes = 0;
  std::size_t count = 1;  // tensors resident on the device (the input at start)
};

inline void ResidentSet::apply(const Model& model, Instr ins) {
  const auto v = static_cast<std::size_t>(ins.op);
  switch (ins.kind) {
    case InstrKind::Fwd: {
      const Op& op = model.op(ins.op);
      act[v] = 1;
      if (holders[static_cast<std::size_t>(op.storage)]++ == 0) bytes += model.op(op.storage).bytes;
      ++count;
      if (op.aux_bytes > 0) {
        aux[v] = 1;
        bytes += op.aux_bytes;
        ++count;
      }
      break;
    }
    case InstrKind::Bwd:
      for (int u : model.op(ins.op).inputs) {
        const auto uu = static_cast<std::size_t>(u);
        if (!model.has_grad_tensor(u)) continue;
        if (!grad[uu]) {
          grad[uu] = 1;
          ++count;
          if (model.shares_grad(ins.op, u)) {  // G(v) itself: no bytes
            grad_storage[uu] = grad_storage[v];
            ++grad_holders[static_cast<std::size_t>(grad_storage[v])];
            continue;
          }
        } else if (grad_shared_elsewhere(u)) {
          --grad_holders[static_cast<std::size_t>(grad_storage[uu])];  // out of place: the others keep it
        } else {
          continue;  // added in place
        }
        // A storage of its own, named u: no other gradient aliases storage u
        // before bwd u, the only instruction that shares it.
        grad_storage[uu] = u;
        grad_holders[uu] = 1;
        bytes += model.grad_bytes(u);
      }
      break;
    case InstrKind::FreeAct: {
      const int r = model.storage(ins.op);
      act[v] = 0;
      if (--holders[static_cast<std::size_t>(r)] == 0) bytes -= model.op(r).bytes;
      --count;
      break;
    }
    case InstrKind::FreeGrad:  // its storage goes with its last alias (all aliases have its size)
      grad[v] = 0;
      if (--grad_holders[static_cast<std::size_t>(grad_storage[v])] == 0) bytes -= model.grad_bytes(ins.op);
      --count;
      break;
    case InstrKind::FreeAux:
      aux[v] = 0;
      bytes -= model.op(ins.op).aux_bytes;
      --count;
      break;
    // An owner with no other alias resident (the validator checks): its
    // storage moves whole; or its compressed copy C(op), the one form there.
    case InstrKind::Offload: {
      const uint64_t full = model.op(ins.op).bytes;
      if (act[v]) {
        act[v] = 0;
        holders[v] = 0;
        host[v] = 1;
        bytes -= full;
        host_bytes += full;
      } else {
        const uint64_t b = packed_bytes(full, static_cast<Packing>(packed[v]));
        host[v] = static_cast<uint8_t>(1 + packed[v]);
        packed[v] = 0;
        bytes -= b;
        host_bytes += b;
      }
      --count;
      break;
    }
    case InstrKind::Fetch: {
      const uint64_t full = model.op(ins.op).bytes;
      if (host[v] == 1) {
        act[v] = 1;
        holders[v] = 1;
        bytes += full;
        host_bytes -= full;
      } else {
        packed[v] = static_cast<uint8_t>(host[v] - 1);
        const uint64_t b = packed_bytes(full, static_cast<Packing>(packed[v]));
        bytes += b;
        host_bytes -= b;
      }
      host[v] = 0;
      ++count;
      break;
    }
    case InstrKind::CompressBF16:
    case InstrKind::CompressF16:
    case InstrKind::CompressInt8:
      packed[v] = static_cast<uint8_t>(packing_of(ins.kind));
      bytes += packed_bytes(model.op(ins.op).bytes, packing_of(ins.kind));
      ++count;
      break;
    case InstrKind::Decompress:  // an owner (the validator checks): A(op) is its storage
      act[v] = 1;
      holders[v] = 1;
      bytes += model.op(ins.op).bytes;
      ++count;
      break;
    case InstrKind::FreePacked:
      bytes -= packed_bytes(model.op(ins.op).bytes, static_cast<Packing>(packed[v]));
      packed[v] = 0;
      --count;
      break;
  }
}

}  // namespace remat
