#include "core/exec/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"
#include "core/kernels/cpu_kernels.h"
#include "core/op_rules.h"

namespace remat {
namespace {

constexpr std::size_t kAlign = 64;

cpu::Act to_cpu(Activation a) {
  switch (a) {
    case Activation::ReLU: return cpu::Act::ReLU;
    case Activation::Tanh: return cpu::Act::Tanh;
    case Activation::None: break;
  }
  return cpu::Act::None;
}

cpu::Act act_of(OpKind k) {
  return k == OpKind::ReLU ? cpu::Act::ReLU : k == OpKind::Tanh ? cpu::Act::Tanh : cpu::Act::GELU;
}

std::string op_label(const Model& m, int v) {
  const Op& op = m.op(v);
  return "op " + std::to_string(v) + (op.name.empty() ? "" : " ('" + op.name + "')");
}

// A tensor the kernel needs; a custom `saved` set that leaves it out would
// otherwise read freed memory.
const float* need(const Model& m, int v, const TensorTable& t, int u, const char* what) {
  const void* p = t.act[static_cast<std::size_t>(u)];
  if (!p)
    throw InputError(op_label(m, v) + ": " + what + " needs A(" + std::to_string(u) +
                     ") which is not resident (is it missing from the op's saved set?)");
  return static_cast<const float*>(p);
}

}  // namespace

namespace {
uint64_t rounded_size(uint64_t bytes) { return std::max<uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign); }
}  // namespace

CpuBackend::~CpuBackend() {
  for (auto& [p, bytes] : blocks_) std::free(p);
  for (auto& [size, ps] : spare_)
    for (void* p : ps) std::free(p);
}

void CpuBackend::load(const Model& model, const HostData& data) {
  const auto tensors = parameter_tensors(model);
  if (data.params.size() != tensors.size()) throw InputError("cpu backend: parameter count does not match the model");
  params_ = data.params;
  grads_.assign(params_.size(), {});
  first_param_.assign(static_cast<std::size_t>(model.size()), -1);
  uint64_t bytes = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (static_cast<int64_t>(params_[k].size()) != tensors[k].numel())
      throw InputError("cpu backend: parameter " + tensors[k].name + " has the wrong size");
    grads_[k].assign(params_[k].size(), 0.0f);
    auto& first = first_param_[static_cast<std::size_t>(tensors[k].op)];
    if (first < 0) first = static_cast<int>(k);
    bytes += 2 * 4 * params_[k].size();
  }
  seed_ = data.seed;
  target_ = data.target;
  labels_ = data.labels;
  baseline_bytes_ = bytes + 4 * target_.size() + 4 * labels_.size() + 4;  // + the loss scalar
  loss_ = 0;
  reset_peaks();
}

void CpuBackend::zero_param_grads() {
  for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
}

void* CpuBackend::allocate(uint64_t bytes) {
  const uint64_t rounded = rounded_size(bytes);
  void* p = nullptr;
  if (auto it = spare_.find(rounded); it != spare_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = std::aligned_alloc(kAlign, rounded);
  }
  if (!p) return nullptr;
  blocks_.emplace(p, bytes);
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  note_device();
  return p;
}

void CpuBackend::release(void* p) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  live_ -= it->second;
  spare_[rounded_size(it->second)].push_back(p);
  blocks_.erase(it);
}

void CpuBackend::note_device() { device_peak_ = std::max(device_peak_, baseline_bytes_ + live_ + scratch_bytes_); }

void CpuBackend::reset_peaks() {
  peak_ = live_;
  device_peak_ = 0;
  note_device();
}

void CpuBackend::upload(void* dst, const void* src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

float* CpuBackend::scratch(int which, int64_t floats) {
  auto& s = scratch_[which];
  if (static_cast<int64_t>(s.size()) < floats) {
    scratch_bytes_ += 4 * (static_cast<uint64_t>(floats) - s.size());
    s.resize(static_cast<std::size_t>(floats));
    note_device();
  }
  return s.data();
}

const float* CpuBackend::param(int op, int slot) const {
  return params_[static_cast<std::size_t>(first_param_[static_cast<std::size_t>(op)] + slot)].data();
}

float* CpuBackend::param_grad(int op, int slot) {
  return grads_[static_cast<std::size_t>(first_param_[static_cast<std::size_t>(op)] + slot)].data();
}

void CpuBackend::forward(const Model& m, int v, const TensorTable& t) {
  const Op& op = m.op(v);
  auto* y = static_cast<float*>(t.act[static_cast<std::size_t>(v)]);
  auto x = [&](std::size_t k) { return need(m, v, t, op.inputs.at(k), "forward"); };
  const Op* in0 = op.inputs.empty() ? nullptr : &m.op(op.inputs[0]);
  switch (op.kind) {
    case OpKind::Linear:
      cpu::linear_fwd(x(0), param(v, 0), param(v, 1), y, in0->rows(), in0->cols(), op.cols());
      return;
    case OpKind::Dense:
      cpu::dense_fwd(to_cpu(op.act), x(0), param(v, 0), param(v, 1), y, in0->rows(), in0->cols(), op.cols());
      return;
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU: cpu::act_fwd(act_of(op.kind), x(0), y, op.numel()); return;
    case OpKind::LayerNorm:
      cpu::layernorm_fwd(x(0), param(v, 0), param(v, 1), y, y + op.numel(), op.rows(), op.cols());
      return;
    case OpKind::Add: cpu::add_fwd(x(0), x(1), y, op.numel()); return;
    case OpKind::Dropout:
      cpu::dropout_fwd(x(0), y, op.numel(), op.dropout_p, seed_, static_cast<uint32_t>(v));
      return;
    case OpKind::MSELoss:
      if (static_cast<int64_t>(target_.size()) != in0->numel()) throw InputError(op_label(m, v) + ": no MSE target loaded");
      loss_ = cpu::mse_fwd(x(0), target_.data(), in0->numel());
      std::memcpy(y, &loss_, sizeof loss_);
      return;
    case OpKind::SoftmaxCELoss:
      if (static_cast<int64_t>(labels_.size()) != in0->rows()) throw InputError(op_label(m, v) + ": no labels loaded");
      loss_ = cpu::softmax_ce_fwd(x(0), labels_.data(), in0->rows(), in0->cols());
      std::memcpy(y, &loss_, sizeof loss_);
      return;
    case OpKind::Input:
    case OpKind::Generic: break;
  }
  throw InputError(op_label(m, v) + ": the cpu backend cannot run a " + std::string(kind_name(op.kind)));
}

void CpuBackend::backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) {
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
      cpu::linear_bwd(x(0), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), rows, in, out, dx(0) && a0);
      return;
    }
    case OpKind::Dense: {
      const int64_t rows = in0->rows(), in = in0->cols(), out = op.cols();
      float* pre = scratch(0, rows * out);
      float* d = dx(0) ? dx(0) : scratch(1, rows * in);
      cpu::dense_bwd(to_cpu(op.act), x(0), self(), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), pre,
                     rows, in, out, dx(0) && a0);
      return;
    }
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU:
      if (dx(0)) cpu::act_bwd(act_of(op.kind), op.kind == OpKind::GELU ? x(0) : self(), dy, dx(0), op.numel(), a0);
      return;
    case OpKind::LayerNorm: {
      float* d = dx(0) ? dx(0) : scratch(1, op.numel());
      const float* y = self();
      cpu::layernorm_bwd(x(0), y + op.numel(), param(v, 0), dy, d, param_grad(v, 0), param_grad(v, 1), op.rows(),
                         op.cols(), dx(0) && a0);
      return;
    }
    case OpKind::Add:
      for (std::size_t k = 0; k < op.inputs.size(); ++k) {
        if (dx(k)) cpu::add_into(dy, dx(k), op.numel(), acc[k] != 0);
      }
      return;
    case OpKind::Dropout:
      if (dx(0)) cpu::dropout_bwd(dy, dx(0), op.numel(), op.dropout_p, seed_, static_cast<uint32_t>(v), a0);
      return;
    case OpKind::MSELoss:
      if (dx(0)) cpu::mse_bwd(x(0), target_.data(), dx(0), in0->numel(), a0);
      return;
    case OpKind::SoftmaxCELoss:
      if (dx(0)) cpu::softmax_ce_bwd(x(0), labels_.data(), dx(0), in0->rows(), in0->cols(), a0);
      return;
    case OpKind::Input:
    case OpKind::Generic: break;
  }
  throw InputError(op_label(m, v) + ": the cpu backend cannot run the backward of a " + std::string(kind_name(op.kind)));
}

std::vector<float> CpuBackend::read_param_grad(std::size_t index) { return grads_.at(index); }

void CpuBackend::begin_marks(std::size_t count) { marks_.assign(count, {}); }

void CpuBackend::mark(std::size_t index) { marks_[index] = std::chrono::steady_clock::now(); }

std::vector<double> CpuBackend::mark_times_ms() {
  std::vector<double> out(marks_.size(), 0.0);
  for (std::size_t i = 0; i < marks_.size(); ++i)
    out[i] = std::chrono::duration<double, std::milli>(marks_[i] - marks_[0]).count();
  return out;
}

}  // namespace remat
