#include "gpu/backend/cuda_backend.h"

#include <algorithm>
#include <limits>

#include "core/errors.h"
#include "core/op_rules.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

constexpr uint64_t kAlignFloats = 64;  // 256 bytes: every parameter tensor starts aligned

Act to_act(Activation a) {
  switch (a) {
    case Activation::ReLU: return Act::ReLU;
    case Activation::Tanh: return Act::Tanh;
    case Activation::None: break;
  }
  return Act::None;
}

Act act_of(OpKind k) { return k == OpKind::ReLU ? Act::ReLU : k == OpKind::Tanh ? Act::Tanh : Act::GELU; }

std::string op_label(const Model& m, int v) {
  const Op& op = m.op(v);
  return "op " + std::to_string(v) + (op.name.empty() ? "" : " ('" + op.name + "')");
}

// As the CPU backend: a custom `saved` set that leaves a tensor out would
// otherwise read freed memory.
const float* need(const Model& m, int v, const TensorTable& t, int u, const char* what) {
  const void* p = t.act[static_cast<std::size_t>(u)];
  if (!p)
    throw InputError(op_label(m, v) + ": " + what + " needs A(" + std::to_string(u) +
                     ") which is not resident (is it missing from the op's saved set?)");
  return static_cast<const float*>(p);
}

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  CUDA_CHECK_THROW(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK_THROW(cudaGetDeviceProperties(&prop, device_));
  name_ = std::string("cuda: ") + prop.name;
  // cuBLAS's default workspace pool (cuBLAS docs, cublasSetWorkspace): 32 MiB
  // from Hopper on, 4 MiB before. It cannot be replaced by our own buffer: the
  // GEMM launchers call cublasSetStream, which resets the workspace.
  workspace_bytes_ = prop.major >= 9 ? (uint64_t{32} << 20) : (uint64_t{4} << 20);
  CUDA_CHECK_THROW(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    CUBLAS_CHECK_THROW(cublasCreate(&cublas_));
    CUBLAS_CHECK_THROW(cublasSetStream(cublas_, stream_));
    pool_ = std::make_unique<DevicePool>(device_, stream_);
    timer_ = std::make_unique<EventTimer>(stream_);
  } catch (...) {
    timer_.reset();
    pool_.reset();
    if (cublas_) cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  (void)cudaStreamSynchronize(stream_);
  timer_.reset();
  pool_.reset();  // frees what the executor still held, in stream order
  for (auto& s : scratch_) s = DeviceBuffer();
  params_ = DeviceBuffer();
  grads_ = DeviceBuffer();
  target_ = DeviceBuffer();
  labels_ = DeviceBuffer();
  loss_ = DeviceBuffer();
  if (cublas_) (void)cublasDestroy(cublas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

// ---- Baseline -------------------------------------------------------------------

void CudaBackend::load(const Model& model, const HostData& data) {
  const auto tensors = parameter_tensors(model);
  if (data.params.size() != tensors.size()) throw InputError("cuda backend: parameter count does not match the model");
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (static_cast<int64_t>(data.params[k].size()) != tensors[k].numel())
      throw InputError("cuda backend: parameter " + tensors[k].name + " has the wrong size");
  }
  CUDA_CHECK_THROW(cudaSetDevice(device_));
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  loaded_ = false;
  // Drop the previous model's baseline first, so that both never need to fit.
  params_ = DeviceBuffer();
  grads_ = DeviceBuffer();
  target_ = DeviceBuffer();
  labels_ = DeviceBuffer();
  loss_ = DeviceBuffer();
  baseline_bytes_ = baseline_device_bytes_ = 0;
  offset_.clear();
  numel_.clear();
  first_param_.assign(static_cast<std::size_t>(model.size()), -1);

  size_t free_now = 0, total = 0;
  CUDA_CHECK_THROW(cudaMemGetInfo(&free_now, &total));
  free_before_load_ = free_now;

  uint64_t floats = 0, bytes = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    offset_.push_back(floats);
    numel_.push_back(data.params[k].size());
    floats += round_up(data.params[k].size(), kAlignFloats);
    bytes += 2 * 4 * data.params[k].size();
    auto& first = first_param_[static_cast<std::size_t>(tensors[k].op)];
    if (first < 0) first = static_cast<int>(k);
  }
  params_ = DeviceBuffer(4 * floats);
  grads_ = DeviceBuffer(4 * floats);
  target_n_ = data.target.size();
  labels_n_ = data.labels.size();
  target_ = DeviceBuffer(4 * target_n_);
  labels_ = DeviceBuffer(4 * labels_n_);
  loss_ = DeviceBuffer(4);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (numel_[k] == 0) continue;
    CUDA_CHECK_THROW(cudaMemcpyAsync(params_.f32() + offset_[k], data.params[k].data(), 4 * numel_[k],
                                     cudaMemcpyHostToDevice, stream_));
  }
  if (target_n_)
    CUDA_CHECK_THROW(cudaMemcpyAsync(target_.get(), data.target.data(), 4 * target_n_, cudaMemcpyHostToDevice, stream_));
  if (labels_n_)
    CUDA_CHECK_THROW(cudaMemcpyAsync(labels_.get(), data.labels.data(), 4 * labels_n_, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK_THROW(cudaMemsetAsync(loss_.get(), 0, 4, stream_));
  seed_ = data.seed;
  baseline_bytes_ = bytes + 4 * target_n_ + 4 * labels_n_ + 4;  // the CPU's figure
  baseline_device_bytes_ = params_.bytes() + grads_.bytes() + target_.bytes() + labels_.bytes() + loss_.bytes();
  zero_param_grads();

  // Scratch of the backward passes, sized now so that a run does not fail half
  // way for it: Dense's pre-activation gradient, and the throw-away dx of a
  // Linear/Dense/LayerNorm whose input has no gradient tensor.
  int64_t pre = 0, dx = 0;
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    if (op.inputs.empty()) continue;
    const Op& in0 = model.op(op.inputs[0]);
    if (op.kind == OpKind::Dense) pre = std::max(pre, in0.rows() * op.cols());
    if ((op.kind == OpKind::Linear || op.kind == OpKind::Dense || op.kind == OpKind::LayerNorm) &&
        !model.has_grad_tensor(op.inputs[0]))
      dx = std::max(dx, op.kind == OpKind::LayerNorm ? op.numel() : in0.rows() * in0.cols());
  }
  (void)scratch(0, pre);
  (void)scratch(1, dx);

  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));  // the host vectors may go now
  CUDA_CHECK_THROW(cudaMemGetInfo(&free_now, &total));
  free_after_load_ = free_now;
  reset_peaks();
  loaded_ = true;
}

void CudaBackend::zero_param_grads() {
  if (grads_.bytes()) CUDA_CHECK_THROW(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), stream_));
}

const float* CudaBackend::param(int op, int slot) const {
  return params_.f32() + offset_[static_cast<std::size_t>(first_param_[static_cast<std::size_t>(op)] + slot)];
}

float* CudaBackend::param_grad(int op, int slot) const {
  return grads_.f32() + offset_[static_cast<std::size_t>(first_param_[static_cast<std::size_t>(op)] + slot)];
}

float* CudaBackend::scratch(int which, int64_t floats) {
  DeviceBuffer& s = scratch_[which];
  const uint64_t need_bytes = 4 * static_cast<uint64_t>(std::max<int64_t>(floats, 0));
  if (s.bytes() < need_bytes) {
    // No queued kernel may still use the old buffer (load() sizes both, so
    // this happens only for a model it did not foresee).
    CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
    s = DeviceBuffer();
    s = DeviceBuffer(need_bytes);
  }
  return s.f32();
}

// ---- Tracked memory -------------------------------------------------------------

void* CudaBackend::allocate(uint64_t bytes) { return pool_->allocate(bytes); }

void CudaBackend::release(void* p) { pool_->release(p); }

uint64_t CudaBackend::device_peak_bytes() const {
  // The pool's high-water mark is never below the bytes asked for; the max
  // guards a driver that reports 0 right after its reset.
  const uint64_t pool = std::max(pool_->used_high_bytes(), pool_->peak_bytes());
  return baseline_device_bytes_ + scratch_bytes() + workspace_bytes_ + pool;
}

void CudaBackend::reset_peaks() { pool_->reset_peaks(); }

uint64_t CudaBackend::device_free_bytes() const {
  size_t free_now = 0, total = 0;
  if (cudaMemGetInfo(&free_now, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::numeric_limits<uint64_t>::max();
  }
  return free_now + pool_->unused_reserved_bytes();
}

void CudaBackend::upload(void* dst, const void* src, uint64_t bytes) {
  // Pageable source: the call returns once the bytes are staged, so the
  // caller's buffer may change afterwards.
  if (bytes) CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}

// ---- Compute --------------------------------------------------------------------

void CudaBackend::forward(const Model& m, int v, const TensorTable& t) {
  if (!loaded_ || static_cast<std::size_t>(m.size()) != first_param_.size())
    throw InputError("cuda backend: forward before load() of this model");
  const Op& op = m.op(v);
  auto* y = static_cast<float*>(t.act[static_cast<std::size_t>(v)]);
  auto x = [&](std::size_t k) { return need(m, v, t, op.inputs.at(k), "forward"); };
  const Op* in0 = op.inputs.empty() ? nullptr : &m.op(op.inputs[0]);
  switch (op.kind) {
    case OpKind::Linear:
      linear_fwd(x(0), param(v, 0), param(v, 1), y, in0->rows(), in0->cols(), op.cols(), cublas_, stream_);
      return;
    case OpKind::Dense:
      dense_fwd(to_act(op.act), x(0), param(v, 0), param(v, 1), y, in0->rows(), in0->cols(), op.cols(), cublas_,
                stream_);
      return;
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU: act_fwd(act_of(op.kind), x(0), y, op.numel(), stream_); return;
    case OpKind::LayerNorm:
      // A(v) holds y (rows, cols) then the stats (2, rows), as on the CPU.
      layernorm_fwd(x(0), param(v, 0), param(v, 1), y, y + op.numel(), op.rows(), op.cols(), stream_);
      return;
    case OpKind::Add: add_fwd(x(0), x(1), y, op.numel(), stream_); return;
    case OpKind::Dropout:
      dropout_fwd(x(0), y, op.numel(), op.dropout_p, seed_, static_cast<uint32_t>(v), stream_);
      return;
    case OpKind::MSELoss:
      if (target_n_ != static_cast<uint64_t>(in0->numel())) throw InputError(op_label(m, v) + ": no MSE target loaded");
      mse_fwd(x(0), target_.f32(), loss_.f32(), in0->numel(), stream_);
      break;
    case OpKind::SoftmaxCELoss:
      if (labels_n_ != static_cast<uint64_t>(in0->rows())) throw InputError(op_label(m, v) + ": no labels loaded");
      softmax_ce_fwd(x(0), static_cast<const int32_t*>(labels_.get()), loss_.f32(), in0->rows(), in0->cols(), stream_);
      break;
    case OpKind::Input:
    case OpKind::Generic:
      throw InputError(op_label(m, v) + ": the cuda backend cannot run a " + std::string(kind_name(op.kind)));
  }
  // A loss: its value is in the baseline scalar (read_loss), and A(v) gets a copy, as on the CPU.
  if (y && op.bytes >= sizeof(float))
    CUDA_CHECK_THROW(cudaMemcpyAsync(y, loss_.get(), sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) {
  if (!loaded_ || static_cast<std::size_t>(m.size()) != first_param_.size())
    throw InputError("cuda backend: backward before load() of this model");
  const Op& op = m.op(v);
  const auto* dy = static_cast<const float*>(t.grad[static_cast<std::size_t>(v)]);
  if (!dy && !is_loss(op.kind)) throw InputError(op_label(m, v) + ": backward without its gradient G");
  auto dx = [&](std::size_t k) { return static_cast<float*>(t.grad[static_cast<std::size_t>(op.inputs.at(k))]); };
  auto x = [&](std::size_t k) { return need(m, v, t, op.inputs.at(k), "backward"); };
  auto self = [&] { return need(m, v, t, v, "backward"); };
  const Op* in0 = op.inputs.empty() ? nullptr : &m.op(op.inputs[0]);
  const bool a0 = !acc.empty() && acc[0];
  switch (op.kind) {
    case OpKind::Linear: {
      const int64_t rows = in0->rows(), in = in0->cols(), out = op.cols();
      float* d = dx(0) ? dx(0) : scratch(1, rows * in);
      linear_bwd(x(0), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), rows, in, out, dx(0) && a0, cublas_,
                 stream_);
      return;
    }
    case OpKind::Dense: {
      const int64_t rows = in0->rows(), in = in0->cols(), out = op.cols();
      float* pre = scratch(0, rows * out);
      float* d = dx(0) ? dx(0) : scratch(1, rows * in);
      dense_bwd(to_act(op.act), x(0), self(), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), pre, rows, in,
                out, dx(0) && a0, cublas_, stream_);
      return;
    }
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU:
      if (dx(0)) act_bwd(act_of(op.kind), op.kind == OpKind::GELU ? x(0) : self(), dy, dx(0), op.numel(), a0, stream_);
      return;
    case OpKind::LayerNorm: {
      float* d = dx(0) ? dx(0) : scratch(1, op.numel());
      const float* y = self();
      layernorm_bwd(x(0), y + op.numel(), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), op.rows(), op.cols(),
                    dx(0) && a0, stream_);
      return;
    }
    case OpKind::Add:
      for (std::size_t k = 0; k < op.inputs.size(); ++k) {
        if (dx(k)) add_into(dy, dx(k), op.numel(), acc[k] != 0, stream_);
      }
      return;
    case OpKind::Dropout:
      if (dx(0)) dropout_bwd(dy, dx(0), op.numel(), op.dropout_p, seed_, static_cast<uint32_t>(v), a0, stream_);
      return;
    case OpKind::MSELoss:
      if (dx(0)) mse_bwd(x(0), target_.f32(), dx(0), in0->numel(), a0, stream_);
      return;
    case OpKind::SoftmaxCELoss:
      if (dx(0))
        softmax_ce_bwd(x(0), static_cast<const int32_t*>(labels_.get()), dx(0), in0->rows(), in0->cols(), a0, stream_);
      return;
    case OpKind::Input:
    case OpKind::Generic: break;
  }
  throw InputError(op_label(m, v) + ": the cuda backend cannot run the backward of a " +
                   std::string(kind_name(op.kind)));
}

// ---- Read back ------------------------------------------------------------------

float CudaBackend::read_loss() {
  float loss = 0;
  CUDA_CHECK_THROW(cudaMemcpyAsync(&loss, loss_.get(), sizeof loss, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  return loss;
}

std::vector<float> CudaBackend::read_param_grad(std::size_t index) {
  std::vector<float> out(static_cast<std::size_t>(numel_.at(index)));
  if (!out.empty()) {
    CUDA_CHECK_THROW(cudaMemcpyAsync(out.data(), grads_.f32() + offset_[index], 4 * out.size(),
                                     cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  return out;
}

// ---- Synchronisation and timing -------------------------------------------------

void CudaBackend::synchronize() { CUDA_CHECK_THROW(cudaStreamSynchronize(stream_)); }

void CudaBackend::begin_marks(std::size_t count) { timer_->begin(count); }

void CudaBackend::mark(std::size_t index) { timer_->record(index); }

std::vector<double> CudaBackend::mark_times_ms() { return timer_->elapsed_ms(); }

}  // namespace remat::cuda
