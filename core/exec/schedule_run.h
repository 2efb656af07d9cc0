// One run of a validated schedule on a backend's roles: the tensors resident
// now and one small function per instruction kind, each doing exactly what
// the memory model says that instruction allocates, converts, copies or frees
// (docs/memory-model.md). The executor (executor.cpp) drives it: the warm-up
// and the timed runs, the marks, the results and the errors.
//
// A(v)'s pointer is where its elements start: its own storage for an owner,
// a pointer into the owner's storage for a view. Only storages are allocated
// and released; a storage stays while any op aliasing it (the owner or a
// view) is resident, as the simulator counts it (holders). Gradients alias
// the same way: G(u) of a plain Add's input is G(v)'s buffer (the Add's
// backward writes nothing for it), a buffer goes with its last alias, and a
// gradient that shares its buffer gets a buffer of its own, a copy, before
// another part is added to it (ResidentSet's rule, exactly).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "core/exec/backend.h"
#include "core/sim/schedule.h"

namespace remat {

// A tracked allocation that did not fit: at instruction `instruction` (-1:
// before the first, the input), `needed` bytes asked, `free` left (max():
// the device does not say).
struct TensorOutOfMemory {
  int64_t instruction;
  uint64_t needed, free;
};

class ScheduleRun {
 public:
  // `view_offset[v]`: A(v)'s start in its storage, in elements of the storage's dtype.
  // `memory_limit`: tracked bytes allowed (0: none), as ExecOptions.
  ScheduleRun(const Model& model, Backend& backend, const std::vector<int64_t>& view_offset, uint64_t memory_limit);
  // Releases whatever the run still holds, also when a kernel threw.
  ~ScheduleRun() { release_all(); }
  ScheduleRun(const ScheduleRun&) = delete;
  ScheduleRun& operator=(const ScheduleRun&) = delete;

  // A(0): allocated and filled with the input batch.
  void load_input(const std::vector<uint8_t>& input);
  // Instruction `at` of the schedule. Throws TensorOutOfMemory, or what the backend throws.
  void run(const Instr& ins, int64_t at);
  void release_all();

 private:
  void* allocate(uint64_t bytes);  // tracked, under the limit; TensorOutOfMemory otherwise
  void* allocate_host(uint64_t bytes);
  void hold_own_storage(std::size_t v, uint64_t bytes);
  void drop_act(std::size_t v);  // its storage goes when its last holder does
  void own_grad(int u, void* buffer);
  void wait_for_fetched_reads(const Instr& ins);

  void fwd(int v);
  void bwd(int v);
  void free_act(int v);
  void free_grad(int v);
  void free_aux(int v);
  void offload(int v);
  void fetch(int v);
  void compress(int v, Packing p);
  void decompress(int v);
  void free_packed(int v);

  const Model& model_;
  DeviceMemory& memory_;
  Compute& compute_;
  HostTier& host_;
  const std::vector<int64_t>& view_offset_;
  uint64_t memory_limit_;
  int64_t at_ = -1;  // the instruction running now

  // act, grad, aux: the tensor table the kernels read. storage[s]: the
  // allocation of storage owner s, held by holders[s] resident ops.
  // host[v]: A(v)'s copy (or C(v)'s, host_form[v] != 0) in the backend's host
  // pool while it is offloaded; fetched[v]: A(v) or C(v) came back by a fetch
  // whose copy no kernel has waited for yet. packed[v]: C(v), the compressed
  // copy on the device, of type form[v].
  std::vector<void*> act_, grad_, aux_, storage_, host_copy_, packed_;
  std::vector<int32_t> holders_;
  // grad_[v] is grad_buffer_[grad_storage_[v]]: the buffer G(v) aliases,
  // named by the op whose gradient allocated it, held by grad_holders_ aliases.
  std::vector<void*> grad_buffer_;
  std::vector<int32_t> grad_storage_, grad_holders_;
  std::vector<int32_t> shared_;  // bwd's inputs that get G(v) itself, reused
  std::vector<uint8_t> fetched_, form_, host_form_;
  std::vector<uint8_t> accumulate_;  // bwd's overwrite/add flags, reused
  std::vector<char> carries_grad_;   // per op, grad_carriers(): bwd runs only those
};

}  // namespace remat
