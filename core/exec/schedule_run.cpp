#include "core/exec/schedule_run.h"

#include <algorithm>
#include <string>

#include "core/sim/compression.h"
#include "core/base/errors.h"
#include "core/model/grad_flow.h"
#include "core/sim/instr_reads.h"

namespace remat {

ScheduleRun::ScheduleRun(const Model& model, Backend& backend, const std::vector<int64_t>& view_offset,
                         uint64_t memory_limit)
    : model_(model), memory_(backend.memory()), compute_(backend.compute()), host_(backend.host()),
      view_offset_(view_offset), memory_limit_(memory_limit) {
  const auto n = static_cast<std::size_t>(model.size());
  for (auto* list : {&act_, &grad_, &aux_, &storage_, &host_copy_, &packed_, &grad_buffer_}) list->assign(n, nullptr);
  holders_.assign(n, 0);
  grad_storage_.assign(n, 0);
  grad_holders_.assign(n, 0);
  for (auto* list : {&fetched_, &form_, &host_form_}) list->assign(n, 0);
  carries_grad_ = grad_carriers(model.ops());
}

void ScheduleRun::release_all() {
  for (auto* list : {&storage_, &grad_buffer_, &aux_, &packed_}) {
    for (void*& p : *list) {
      if (p) memory_.release(p);
      p = nullptr;
    }
  }
  std::fill(grad_.begin(), grad_.end(), nullptr);
  std::fill(grad_holders_.begin(), grad_holders_.end(), 0);
  for (void*& p : host_copy_) {
    if (p) host_.release_host(p);
    p = nullptr;
  }
  std::fill(act_.begin(), act_.end(), nullptr);
  std::fill(holders_.begin(), holders_.end(), 0);
  for (auto* list : {&fetched_, &form_, &host_form_}) std::fill(list->begin(), list->end(), 0);
}

void* ScheduleRun::allocate(uint64_t bytes) {
  const uint64_t live = memory_.live_bytes();
  if (memory_limit_ && live + bytes > memory_limit_)
    throw TensorOutOfMemory{at_, bytes, memory_limit_ - std::min(live, memory_limit_)};
  void* p = memory_.allocate(bytes);
  if (!p) throw TensorOutOfMemory{at_, bytes, memory_.device_free_bytes()};
  return p;
}

void* ScheduleRun::allocate_host(uint64_t bytes) {
  void* p = host_.allocate_host(bytes);
  if (!p)
    throw DeviceOutOfMemory("the host pool could not allocate " + std::to_string(bytes) + " bytes for an offload",
                            bytes, std::numeric_limits<uint64_t>::max());
  return p;
}

void ScheduleRun::hold_own_storage(std::size_t v, uint64_t bytes) {
  storage_[v] = act_[v] = allocate(bytes);
  holders_[v] = 1;
}

void ScheduleRun::drop_act(std::size_t v) {
  act_[v] = nullptr;
  const auto s = static_cast<std::size_t>(model_.storage(static_cast<int>(v)));
  if (--holders_[s] == 0) {
    memory_.release(storage_[s]);
    storage_[s] = nullptr;
  }
}

void ScheduleRun::load_input(const std::vector<uint8_t>& input) {
  at_ = -1;
  hold_own_storage(0, model_.op(0).bytes);
  memory_.upload(act_[0], input.data(), input.size());
}

// A kernel reading a fetched tensor waits for its copy (CUDA: an event on the
// copy stream), not the fetch instruction itself: the copy overlaps the
// compute in between.
void ScheduleRun::wait_for_fetched_reads(const Instr& ins) {
  const OpIds* reads = activation_reads(model_, ins);
  if (!reads) return;
  for (int u : *reads) {
    auto& f = fetched_[static_cast<std::size_t>(u)];
    if (f) host_.wait_for_copy(act_[static_cast<std::size_t>(u)]);
    f = 0;
  }
}

void ScheduleRun::run(const Instr& ins, int64_t at) {
  at_ = at;
  wait_for_fetched_reads(ins);
  switch (ins.kind) {
    case InstrKind::Fwd: return fwd(ins.op);
    case InstrKind::Bwd: return bwd(ins.op);
    case InstrKind::FreeAct: return free_act(ins.op);
    case InstrKind::FreeGrad: return free_grad(ins.op);
    case InstrKind::FreeAux: return free_aux(ins.op);
    case InstrKind::Offload: return offload(ins.op);
    case InstrKind::Fetch: return fetch(ins.op);
    case InstrKind::CompressBF16:
    case InstrKind::CompressF16:
    case InstrKind::CompressInt8: return compress(ins.op, packing_of(ins.kind));
    case InstrKind::Decompress: return decompress(ins.op);
    case InstrKind::FreePacked: return free_packed(ins.op);
  }
}

// fwd v: bytes(v) for A(v) (none for a view: its input, resident as
// simulate() checked, holds the storage), aux_bytes(v) for aux(v).
void ScheduleRun::fwd(int op_id) {
  const auto v = static_cast<std::size_t>(op_id);
  const Op& op = model_.op(op_id);
  if (op.view) {
    const auto s = static_cast<std::size_t>(op.storage);
    ++holders_[s];
    act_[v] = static_cast<char*>(storage_[s]) + dtype_size(model_.op(op.storage).dtype) * view_offset_[v];
  } else {
    hold_own_storage(v, op.bytes);
  }
  if (op.aux_bytes > 0) aux_[v] = allocate(op.aux_bytes);
  compute_.forward(model_, op_id, TensorTable{act_, grad_, aux_});
}

// bwd v, for each input u with a gradient tensor, as ResidentSet::apply:
// G(u) not resident: G(v)'s buffer itself for a plain Add's input (the
// kernel sees no G(u) and writes nothing), else a new buffer, overwritten;
// resident: added into, in place unless another gradient shares its buffer
// (G(v) included), then into a copy of its own (the same values, so the same
// sums). So no kernel ever adds into the buffer it reads G(v) from.
void ScheduleRun::bwd(int op_id) {
  const Op& op = model_.op(op_id);
  accumulate_.assign(op.inputs.size(), 0);
  shared_.clear();
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    const int u = op.inputs[k];
    if (!model_.has_grad_tensor(u)) continue;
    const auto uu = static_cast<std::size_t>(u);
    auto& g = grad_[uu];
    if (!g && model_.shares_grad(op_id, u)) {
      shared_.push_back(u);
      continue;
    }
    if (!g) {
      own_grad(u, allocate(model_.grad_bytes(u)));
      continue;
    }
    accumulate_[k] = 1;
    const auto s = static_cast<std::size_t>(grad_storage_[uu]);
    if (grad_holders_[s] > 1) {
      void* mine = allocate(model_.grad_bytes(u));
      memory_.copy(mine, g, model_.grad_bytes(u));
      --grad_holders_[s];
      own_grad(u, mine);
    }
  }
  // An op that carries no gradient to a parameter (grad_flow.h: what the model
  // computes from its input before any weight) has no backward in PyTorch,
  // which saved nothing for it: its inputs' gradient buffers are taken as
  // the schedule says and left unwritten, read by no backward that runs.
  if (carries_grad_[static_cast<std::size_t>(op_id)])
    compute_.backward(model_, op_id, TensorTable{act_, grad_, aux_}, accumulate_);
  const auto v = static_cast<std::size_t>(op_id);
  for (int u : shared_) {
    const auto uu = static_cast<std::size_t>(u);
    grad_storage_[uu] = grad_storage_[v];
    ++grad_holders_[static_cast<std::size_t>(grad_storage_[v])];
    grad_[uu] = grad_[v];
  }
}

// G(u) gets `buffer`, a storage of its own named u (ResidentSet's rule).
void ScheduleRun::own_grad(int u, void* buffer) {
  const auto uu = static_cast<std::size_t>(u);
  grad_buffer_[uu] = grad_[uu] = buffer;
  grad_storage_[uu] = u;
  grad_holders_[uu] = 1;
}

void ScheduleRun::free_act(int v) { drop_act(static_cast<std::size_t>(v)); }

void ScheduleRun::free_grad(int op) {
  const auto v = static_cast<std::size_t>(op);
  const auto s = static_cast<std::size_t>(grad_storage_[v]);
  grad_[v] = nullptr;
  if (--grad_holders_[s] == 0) {
    memory_.release(grad_buffer_[s]);
    grad_buffer_[s] = nullptr;
  }
}

void ScheduleRun::free_aux(int op) {
  const auto v = static_cast<std::size_t>(op);
  memory_.release(aux_[v]);
  aux_[v] = nullptr;
}

// v owns its storage and no view holds it (simulate() checked): the bytes
// move whole; or C(v), when that is the one form on the device.
void ScheduleRun::offload(int op) {
  const auto v = static_cast<std::size_t>(op);
  const uint64_t bytes = model_.op(op).bytes;
  if (act_[v]) {
    host_copy_[v] = allocate_host(bytes);
    host_.copy_to_host(host_copy_[v], storage_[v], bytes);
    drop_act(v);
  } else {
    const uint64_t b = packed_bytes(bytes, static_cast<Packing>(form_[v]));
    host_copy_[v] = allocate_host(b);
    host_.copy_to_host(host_copy_[v], packed_[v], b);
    memory_.release(packed_[v]);
    packed_[v] = nullptr;
    host_form_[v] = form_[v];
  }
  fetched_[v] = 0;
}

// The form that was offloaded comes back: A(v), or C(v).
void ScheduleRun::fetch(int op) {
  const auto v = static_cast<std::size_t>(op);
  const uint64_t bytes = model_.op(op).bytes;
  if (host_form_[v] == 0) {
    hold_own_storage(v, bytes);
    host_.copy_to_device(storage_[v], host_copy_[v], bytes);
  } else {
    const uint64_t b = packed_bytes(bytes, static_cast<Packing>(host_form_[v]));
    packed_[v] = allocate(b);
    host_.copy_to_device(packed_[v], host_copy_[v], b);
    host_form_[v] = 0;
  }
  host_.release_host(host_copy_[v]);
  host_copy_[v] = nullptr;
  fetched_[v] = 1;
}

// An f32 owner (simulate() checked); C(v) is made beside A(v), which a
// `free A` then releases, so both count while the conversion runs.
void ScheduleRun::compress(int op, Packing p) {
  const auto v = static_cast<std::size_t>(op);
  const uint64_t bytes = model_.op(op).bytes;
  packed_[v] = allocate(packed_bytes(bytes, p));
  form_[v] = static_cast<uint8_t>(p);
  if (fetched_[v]) host_.wait_for_copy(act_[v]);
  fetched_[v] = 0;
  host_.compress(packed_[v], act_[v], bytes / 4, p);
}

void ScheduleRun::decompress(int op) {
  const auto v = static_cast<std::size_t>(op);
  const uint64_t bytes = model_.op(op).bytes;
  hold_own_storage(v, bytes);
  if (fetched_[v]) host_.wait_for_copy(packed_[v]);
  fetched_[v] = 0;
  host_.decompress(act_[v], packed_[v], bytes / 4, static_cast<Packing>(form_[v]));
}

void ScheduleRun::free_packed(int op) {
  const auto v = static_cast<std::size_t>(op);
  memory_.release(packed_[v]);
  packed_[v] = nullptr;
  form_[v] = 0;
}

}  // namespace remat
