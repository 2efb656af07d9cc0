// Loads and stores of tensors as stored, for the 16-bit variants of mixed
// precision's kernels (pointwise_io.cu, batchnorm.cu; docs/gpu.md#16-bit-loads-and-stores).
// A kernel templated on its operand types reads with ld() and writes with
// st(): on plain f32 pointers they are the f32 kernel's own loads and
// store_grad, on DIn/DOut the stored dtype's, so one source serves both.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda::detail {

struct DIn {
  const void* p;
  IoType t;
};
struct DOut {
  void* p;
  IoType t;
  bool add;
};
inline DIn din(IoIn a) { return {a.p, a.t}; }
inline DOut dout(IoOut a) { return {a.p, a.t, a.add}; }

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(DIn a, int64_t i) {
  if (a.t == IoType::BF16) return __bfloat162float(__ushort_as_bfloat16(static_cast<const uint16_t*>(a.p)[i]));
  if (a.t == IoType::F16) return __half2float(__ushort_as_half(static_cast<const uint16_t*>(a.p)[i]));
  return static_cast<const float*>(a.p)[i];
}

// The f32 kernel's store: = v, or += v (__fadd_rn) with `accumulate`.
__device__ __forceinline__ void st(float* p, int64_t i, float v, bool accumulate) { store_grad(&p[i], v, accumulate); }
// v stored as the widening call stores a result computed in f32 scratch
// (the caller passes accumulate = false, as the call tells its f32 kernel):
// f32: v, or dst + v (__fadd_rn); bf16/f16: v rounded (narrow), or with add
// the stored value plus v rounded, the sum rounded (round_to, then
// add_to_bf16/f16).
__device__ __forceinline__ void st(DOut o, int64_t i, float v, bool /*accumulate: o.add says*/) {
  if (o.t == IoType::BF16) {
    auto* d = static_cast<uint16_t*>(o.p);
    __nv_bfloat16 r = __float2bfloat16_rn(v);
    if (o.add) r = __float2bfloat16_rn(__fadd_rn(__bfloat162float(__ushort_as_bfloat16(d[i])), __bfloat162float(r)));
    d[i] = __bfloat16_as_ushort(r);
  } else if (o.t == IoType::F16) {
    auto* d = static_cast<uint16_t*>(o.p);
    __half r = __float2half_rn(v);
    if (o.add) r = __float2half_rn(__fadd_rn(__half2float(__ushort_as_half(d[i])), __half2float(r)));
    d[i] = __half_as_ushort(r);
  } else {
    auto* d = static_cast<float*>(o.p);
    d[i] = o.add ? __fadd_rn(d[i], v) : v;
  }
}

}  // namespace remat::cuda::detail
