#include "core/sim/compression.h"

#include "core/model/op.h"

namespace remat {

std::string_view packing_name(Packing p) {
  switch (p) {
    case Packing::None: return "none";
    case Packing::BF16: return "bf16";
    case Packing::F16: return "f16";
    case Packing::Int8: return "int8";
  }
  return "none";
}

std::string_view packing_names() { return "bf16, f16, int8"; }

bool parse_packing(std::string_view s, Packing& out) {
  for (Packing p : {Packing::BF16, Packing::F16, Packing::Int8}) {
    if (s == packing_name(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

InstrKind compress_kind(Packing p) {
  switch (p) {
    case Packing::F16: return InstrKind::CompressF16;
    case Packing::Int8: return InstrKind::CompressInt8;
    case Packing::BF16:
    case Packing::None: break;
  }
  return InstrKind::CompressBF16;
}

Packing packing_of(InstrKind k) {
  switch (k) {
    case InstrKind::CompressBF16: return Packing::BF16;
    case InstrKind::CompressF16: return Packing::F16;
    case InstrKind::CompressInt8: return Packing::Int8;
    default: return Packing::None;
  }
}

uint64_t packed_bytes(uint64_t f32_bytes, Packing p) {
  const uint64_t elements = f32_bytes / 4;
  switch (p) {
    case Packing::BF16:
    case Packing::F16: return 2 * elements;
    case Packing::Int8: return elements + 4;
    case Packing::None: break;
  }
  return f32_bytes;
}

bool compressible(const Op& op) {
  return !op.view && op.dtype == DType::F32 && op.bytes > 0 && op.bytes % 4 == 0 &&
         op.bytes == op.logical_bytes();
}

}  // namespace remat
