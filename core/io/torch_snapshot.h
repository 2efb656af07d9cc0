// PyTorch's memory snapshot format (torch.cuda.memory._snapshot() and
// _dump_snapshot(), PyTorch 2.x): writing the allocation trace of a schedule,
// predicted or measured, so that PyTorch's memory viewer opens it; reading a
// snapshot a user recorded into its active-memory curve (docs/pytorch.md).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

// One allocation or free of an allocation trace. `instruction` is the index in
// the schedule it happens in; kBeforeStep for the input batch (allocated
// before the first instruction), code.size() after the last one.
struct AllocEvent {
  static constexpr std::size_t kBeforeStep = std::numeric_limits<std::size_t>::max();
  bool alloc = true;       // false: a free
  uint64_t handle = 0;     // which allocation (a pointer, or a number): a free names its alloc's
  uint64_t bytes = 0;
  std::size_t instruction = kBeforeStep;
  std::string label;       // "fwd conv3 (recompute)", "grad fc1 (bwd fc2)", "free(conv3)"
  double time_us = -1;     // measured time since the step began; < 0: none
};

// What the simulator counts, allocation by allocation: exactly the bytes of
// simulate()'s timeline (A(0) first; fwd v: A(v) unless a view, aux(v); bwd v:
// G(u) of each input without one; frees when the last alias of a storage goes).
// The schedule must be valid.
std::vector<AllocEvent> simulated_allocations(const Model& model, const Schedule& schedule);

// A snapshot dict: {"segments": [one segment], "device_traces": [[...]]}.
// Addresses are laid out first-fit in one segment at 512-byte granularity (the
// CUDA caching allocator's block size): blocks of a segment tile it, sizes in
// the trace are the bytes asked. Each entry's frames name the instruction:
// {"filename": "remat <source>", "line": instruction index, "name": label}.
nlohmann::json make_torch_snapshot(const std::vector<AllocEvent>& events, const std::string& source);

// .pickle or .pkl: pickle protocol 4 (what _dump_snapshot writes and the viewer
// loads); .json: the same dict as JSON. Anything else is an InputError.
// Written atomically.
void write_torch_snapshot(const nlohmann::json& snapshot, const std::string& path);
// The extension check alone, before any work.
void check_snapshot_path(const std::string& path);

// A recorded snapshot's active memory, event by event (alloc and free of one
// device's trace; other entries are skipped).
struct SnapshotCurve {
  int device = 0;
  uint64_t initial_active = 0;     // allocated before recording began, still allocated (or freed in it)
  std::vector<uint64_t> active;    // after each alloc/free event
  std::vector<uint8_t> in_backward;  // per point: 1 when the event's frames are under autograd's backward
  std::size_t backward_start = std::numeric_limits<std::size_t>::max();  // first point of the backward pass
  std::string split;               // how backward_start was found
  uint64_t peak = 0;               // max of initial_active and active
  std::size_t peak_index = 0;
  uint64_t reserved_end = 0;       // the segments' total size when the snapshot was taken
  uint64_t rounding_end = 0;       // size - requested size of the blocks active then
  std::size_t trace_entries = 0;   // entries of the device trace, all actions
};

// Reads a .pickle (from the first byte, 0x80) or .json snapshot file.
nlohmann::json load_torch_snapshot(const std::string& path);
// `origin` names the file in errors. device < 0: the first device with trace entries.
SnapshotCurve snapshot_curve(const nlohmann::json& snapshot, const std::string& origin, int device = -1);

}  // namespace remat
