// Compressed checkpoints (docs/memory-model.md#compressed-checkpoints): the
// types a checkpoint can be stored in between its forward and the recompute
// that reads it, and the bytes it then holds. The IR's compress kinds name
// the type; the memory model, the time model and the backends all take the
// stored size from here, so they agree to the byte.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/sim/instr.h"

namespace remat {

struct Op;

// None = 0 so that a per-op byte of state reads "not compressed" when zero.
enum class Packing : uint8_t { None = 0, BF16 = 1, F16 = 2, Int8 = 3 };

std::string_view packing_name(Packing p);            // "bf16", "f16", "int8" ("none")
bool parse_packing(std::string_view s, Packing& out);  // the three names above
// "bf16, f16, int8": for error messages.
std::string_view packing_names();

InstrKind compress_kind(Packing p);   // CompressBF16, ... (p != None)
Packing packing_of(InstrKind k);      // the type a compress kind writes; None for every other kind
inline bool is_compress(InstrKind k) { return packing_of(k) != Packing::None; }

// Bytes C(v) holds for an f32 tensor of `f32_bytes` (a whole number of floats):
// bf16 and f16 two bytes an element; int8 one byte an element plus the f32
// scale (symmetric, one per tensor) stored in front of them.
uint64_t packed_bytes(uint64_t f32_bytes, Packing p);

// What a compress may convert: an f32 storage owner of whole floats (a view
// aliases another op's storage; integer ids and simulate-only byte sizes have
// no f32 values to convert).
bool compressible(const Op& op);

}  // namespace remat
