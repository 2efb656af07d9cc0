#include "gpu/backend/cuda_mixed.h"

#include <cuda_runtime.h>

#include "core/exec/mixed_call.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {

void dense_input(CudaOpState& s, OpCall& c, bool backward) {
  const DenseCopy d = dense_copy(c.model, c.v);
  if (d == DenseCopy::None || (backward && !dense_copy_in_backward(c.model, c.v))) return;
  float* to = d == DenseCopy::Aux ? c.aux() : s.scratch[kDenseInput];
  if (!(backward && d == DenseCopy::Aux)) {
    const float* x[3] = {c.in(0), nullptr, nullptr};
    pointwise_fwd(dense_copy_geom(c.model, c.op.inputs[0]), x, to, s.stream);
  }
  c.set_dense_in0(to);
}

namespace {

// The device's memory and kernels for mixed::WidenedCall, all on s.stream.
struct CudaDev {
  using State = CudaOpState;
  // The 16-bit kernels (pointwise_path.h's lowp_io) read IoOperands alone:
  // their calls take no f32 copies they would leave unwritten.
  static constexpr bool io_kernels_read_only_handed = true;
  CudaOpState& s;
  CudaOpState& state() { return s; }
  void widen(DType d, const void* src, float* dst, int64_t n) {
    if (d == DType::BF16) bf16_to_f32(static_cast<const uint16_t*>(src), dst, n, s.stream);
    else if (d == DType::F16) f16_to_f32(static_cast<const uint16_t*>(src), dst, n, s.stream);
    else copy(dst, static_cast<const float*>(src), n);
  }
  void narrow(DType d, const float* src, void* dst, int64_t n) {
    if (d == DType::BF16) f32_to_bf16(src, static_cast<uint16_t*>(dst), n, s.stream);
    else if (d == DType::F16) f32_to_f16(src, static_cast<uint16_t*>(dst), n, s.stream);
    else copy(static_cast<float*>(dst), src, n);
  }
  void round_to(DType d, float* x, int64_t n) {
    if (d == DType::BF16) round_bf16(x, n, s.stream);
    else if (d == DType::F16) round_f16(x, n, s.stream);
  }
  void add_stored(DType d, void* g, const float* c, int64_t n) {
    if (d == DType::BF16) add_to_bf16(static_cast<uint16_t*>(g), c, n, s.stream);
    else if (d == DType::F16) add_to_f16(static_cast<uint16_t*>(g), c, n, s.stream);
    else add_f32(static_cast<float*>(g), c, n, s.stream);
  }
  void scale(float* x, int64_t n, float f) { scale_f32(x, n, f, s.stream); }
  void add(float* dst, const float* src, int64_t n) { add_f32(dst, src, n, s.stream); }
  void copy(float* dst, const float* src, int64_t n) {
    if (n > 0 && dst != src)
      CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, 4 * static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s.stream));
  }
  void zero(float* x, int64_t n) {
    if (n > 0) CUDA_CHECK_THROW(cudaMemsetAsync(x, 0, 4 * static_cast<std::size_t>(n), s.stream));
  }
  void write_loss(float* dst) { copy(dst, s.loss, 1); }
  GemmMode gemm_mode() const { return s.gemm_mode; }
  GemmMode conv_mode() const { return s.cudnn ? s.conv_mode : GemmMode::F32; }
  bool lowp_refused(int v) const {
    return static_cast<std::size_t>(v) < s.conv_f32.size() && s.conv_f32[static_cast<std::size_t>(v)];
  }
  void set_lowp(const LowpOperands& o) { s.lowp = o; }
  PointwiseMode pointwise_mode() const { return s.pointwise_mode; }
  void set_io(const IoOperands& o) { s.io = o; }
  void forward(OpCall& c) {
    dense_input(s, c, false);
    cuda_forward(s, c);
  }
  void backward(OpCall& c) {
    dense_input(s, c, true);
    cuda_backward(s, c);
  }
};

}  // namespace

void mixed_forward(CudaOpState& s, const Model& model, int v, const TensorTable& t, MixedScratch& scratch) {
  CudaDev dev{s};
  mixed::forward(dev, model, v, t, scratch);
}

void mixed_backward(CudaOpState& s, const Model& model, int v, const TensorTable& t,
                    std::span<const uint8_t> accumulate, MixedScratch& scratch, float seed) {
  CudaDev dev{s};
  mixed::backward(dev, model, v, t, accumulate, scratch, seed);
}

}  // namespace remat::cuda
