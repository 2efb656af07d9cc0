// Mixed precision as torch.autocast runs a model (docs/memory-model.md#mixed-precision-autocast):
// which dtype each op computes and stores in, per device, and the copies
// autocast's casts leave saved for the backward.
//
// PyTorch sorts ops into three lists per device: lower_precision_fp (run in
// bf16/f16, their floating inputs and weights cast to it), fp32 (run in f32,
// low-precision inputs cast up) and everything else, which runs in what its
// inputs hold (the widest of them, by type promotion; f32 parameters and
// tensor constants take part). remat's kinds map onto those lists in one
// table (autocast.cpp), read from torch's aten/src/ATen/autocast_mode.{h,cpp}
// (torch 2.x); tests/core/test_autocast.cpp pins it kind by kind.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/model/op.h"

namespace remat {

// The device whose autocast lists decide: CPU autocast (torch.autocast("cpu"))
// or CUDA's (torch.autocast("cuda")).
enum class AutocastDevice : uint8_t { Cpu, Cuda };
std::string_view device_name(AutocastDevice d);
bool parse_autocast_device(std::string_view s, AutocastDevice& out);

// What autocast does with an op of this kind on that device.
enum class CastPolicy : uint8_t {
  Lower,    // lower_precision_fp: computes in the low dtype, inputs and weights cast to it
  F32,      // fp32: computes in f32, low-precision inputs cast up
  Promote,  // neither: computes in the widest dtype among its inputs, f32 parameters and tensor constants
};
std::string_view policy_name(CastPolicy p);
// `op`'s policy (its kind; for Pointwise its function, for Reduce its reduction).
CastPolicy autocast_policy(const Op& op, AutocastDevice d);

// The dtype autocast gives op (its inputs' dtypes already among `before`):
// the low dtype for Lower, f32 for F32 (and for a float model input, which the
// user feeds in f32, and for an Embedding, whose f32 table it gathers), the
// promotion for Promote; views keep their input's. Integer tensors keep theirs.
DType autocast_dtype(const Op& op, std::span<const Op> before, DType low, AutocastDevice d);

// The dtype op casts its floating inputs to, read from its kind and dtype
// alone (whatever the device): a lowered kind (Linear, Dense, MatMul, Conv,
// ConvTranspose, Attention) of dtype bf16/f16 casts to that; a kind some
// device's fp32 list holds (LayerNorm, GroupNorm) of dtype f32 casts up to f32.
// nullopt: the op casts nothing (it computes from what its inputs hold).
std::optional<DType> autocast_cast(const Op& op);
// True for the lowered kinds (torch's lower_precision_fp list on both devices).
bool autocast_lowers(OpKind kind);

// The copies of op's inputs its backward reads in place of the input: where
// the op casts an input (autocast_cast) whose dtype differs, autograd saves
// the cast, not the input. Each copy is the input's elements in the cast's
// dtype, contiguous, at `offset` bytes into aux(v), after the kind's own aux
// (statistics, a matmul's operand copies). A MatMul operand that the product
// copies anyway (a strided one, layout.h's matmul_copies) has no second copy:
// that copy is made in the cast's dtype.
struct CastCopy {
  int input;        // index into op.inputs
  DType dtype;      // the cast's
  uint64_t offset;  // bytes into aux(v)
  uint64_t bytes;
};
// `before` holds the ops up to op (op ids index it); `self` is op's id.
std::vector<CastCopy> cast_copies(const Op& op, std::span<const Op> before);
uint64_t cast_copy_bytes(const Op& op, std::span<const Op> before);
// The dtype op v's kernels read input k in: the cast's where the op casts it, else the input's own.
DType operand_dtype(const Op& op, std::span<const Op> before, std::size_t k);

}  // namespace remat
