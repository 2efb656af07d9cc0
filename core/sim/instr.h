// One instruction of the schedule IR: its kind and the op it acts on. Apart
// from schedule.h so that what only names a kind (compression.h's compress
// kinds) does not depend on the schedule, which prints those kinds with
// compression's type names.
#pragma once
#include <cstdint>

namespace remat {

enum class InstrKind : uint8_t {
  Fwd,       // compute (or recompute) A(op)
  Bwd,       // backward of op: reads G(op) and saved(op), writes G of its inputs
  FreeAct,   // release A(op)
  FreeGrad,  // release G(op)
  FreeAux,   // release aux(op), the op's private saved tensors (made by fwd op)
  // The host tier (docs/memory-model.md#offload-and-fetch). op is a storage
  // owner, never a view.
  Offload,   // copy A(op) to host memory and release its device bytes
  Fetch,     // copy A(op) back to the device and release the host copy
  // Compressed checkpoints (docs/memory-model.md#compressed-checkpoints).
  // op is an f32 storage owner. A compress makes C(op), A(op) converted to a
  // smaller type, beside A(op), which a following `free A` releases; a
  // decompress makes A(op) again from C(op), which `free C` then releases.
  // Each allocates or frees, never both, like fwd and free: the co-residency
  // while a conversion runs is in the timeline.
  CompressBF16,  // C(op) = A(op) rounded to bfloat16 (2 bytes an element)
  CompressF16,   // C(op) = A(op) rounded to IEEE half (2 bytes an element)
  CompressInt8,  // C(op) = A(op) quantised to int8 with one f32 scale (1 byte an element + 4)
  Decompress,    // A(op) = C(op) widened back to f32
  FreePacked,    // release C(op)
};

// Four bytes: schedules reach hundreds of millions of instructions
// (recompute-all is quadratic), so their size is what memory and speed are
// made of. Op ids fit the 28-bit signed field (Model::kMaxOps); the kind's
// four bits hold 0 to 15: twelve kinds used (Fwd = 0 to FreePacked = 11).
struct Instr {
  Instr() = default;
  // A constructor, not aggregate initialisation: {kind, v} with an int v
  // would be a narrowing into the bit-field.
  constexpr Instr(InstrKind k, int32_t v) : kind(k), op(v) {}
  InstrKind kind : 4 = InstrKind::Fwd;
  int32_t op : 28 = 0;
  bool operator==(const Instr&) const = default;
};
static_assert(sizeof(Instr) == 4);
static_assert(static_cast<unsigned>(InstrKind::FreePacked) == 11, "the comment above counts the kinds");

}  // namespace remat
