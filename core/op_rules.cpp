#include "core/op_rules.h"
#include <algorithm>

#include "core/errors.h"
#include "core/exec/op_exec.h"
#include "core/model.h"

namespace remat {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

void expect_inputs(const Op& op, std::size_t n, const std::string& where) {
  if (op.inputs.size() != n)
    throw InputError(where + ": " + std::string(kind_name(op.kind)) + " takes " + std::to_string(n) +
                     " input(s), got " + std::to_string(op.inputs.size()));
}

// Shape-preserving kinds copy their input's shape; a given shape must agree.
void same_shape(Op& op, const Op& in, const std::string& where) {
  if (op.shape.empty()) op.shape = in.shape;
  if (op.shape != in.shape)
    throw InputError(where + ": shape " + shape_str(op.shape) + " does not match input shape " + shape_str(in.shape));
}

struct Costs {
  double fwd, bwd;
};

}  // namespace

bool executable(const Op& op) {
  if (op.simulate_only || (op.kind != OpKind::Input && !exec_kind_listed(op.kind)) || op.dtype != DType::F32)
    return false;
  return op.bytes >= tensor_bytes(op.shape, op.dtype) && (op.kind != OpKind::LayerNorm ||
         op.bytes >= tensor_bytes(op.shape, op.dtype) + 8 * static_cast<uint64_t>(op.rows()));
}

void derive_op(Op& op, const Model& model, const std::string& where, bool explicit_saved) {
  const int self = model.size();
  auto in = [&](std::size_t i) -> const Op& { return model.op(op.inputs.at(i)); };
  Costs c{0, 0};
  std::vector<int> saved;
  uint64_t params = 0;
  uint64_t extra_bytes = 0;

  switch (op.kind) {
    case OpKind::Input:
      expect_inputs(op, 0, where);
      if (op.shape.empty()) throw InputError(where + ": Input needs a shape");
      break;
    case OpKind::Linear:
    case OpKind::Dense: {
      expect_inputs(op, 1, where);
      const Op& x = in(0);
      if (x.shape.empty()) throw InputError(where + ": input of a " + std::string(kind_name(op.kind)) + " must have rank >= 1");
      if (op.shape.size() != x.shape.size() ||
          !std::equal(x.shape.begin(), x.shape.end() - 1, op.shape.begin()))
        throw InputError(where + ": output shape " + shape_str(op.shape) + " must equal input shape " +
                         shape_str(x.shape) + " except the last dimension");
      const double rows = static_cast<double>(x.rows()), fin = static_cast<double>(x.cols()),
                   fout = static_cast<double>(op.cols());
      params = (tensor_bytes({x.cols(), op.cols()}, op.dtype) + tensor_bytes({op.cols()}, op.dtype));
      c = {2 * rows * fin * fout, 4 * rows * fin * fout};
      saved = {op.inputs[0]};
      if (op.kind == OpKind::Dense) {
        c.fwd += rows * fout;
        c.bwd += rows * fout;
        saved.push_back(self);
      }
      break;
    }
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU: {
      expect_inputs(op, 1, where);
      same_shape(op, in(0), where);
      const double n = static_cast<double>(op.numel());
      const bool gelu = op.kind == OpKind::GELU;
      c = {gelu ? 8 * n : n, gelu ? 12 * n : 2 * n};
      // ReLU and Tanh differentiate from their output; GELU needs its input.
      saved = {gelu ? op.inputs[0] : self};
      break;
    }
    case OpKind::LayerNorm: {
      expect_inputs(op, 1, where);
      same_shape(op, in(0), where);
      const double n = static_cast<double>(op.numel());
      c = {5 * n, 8 * n};
      params = 2 * tensor_bytes({op.cols()}, op.dtype);
      extra_bytes = 2 * 4 * static_cast<uint64_t>(op.rows());  // mean and rstd per row, f32
      saved = {op.inputs[0], self};  // self: the statistics stored beside y
      break;
    }
    case OpKind::Add:
      expect_inputs(op, 2, where);
      same_shape(op, in(0), where);
      if (in(1).shape != op.shape)
        throw InputError(where + ": Add inputs have different shapes " + shape_str(in(0).shape) + " and " +
                         shape_str(in(1).shape));
      c = {static_cast<double>(op.numel()), static_cast<double>(op.numel())};
      break;
    case OpKind::Dropout:
      expect_inputs(op, 1, where);
      same_shape(op, in(0), where);
      if (!(op.dropout_p >= 0.0f && op.dropout_p < 1.0f))
        throw InputError(where + ": dropout p must be in [0, 1), got " + std::to_string(op.dropout_p));
      c = {2.0 * op.numel(), static_cast<double>(op.numel())};
      break;  // the mask is regenerated from (seed, op), nothing is saved
    case OpKind::MSELoss:
    case OpKind::SoftmaxCELoss: {
      expect_inputs(op, 1, where);
      if (in(0).shape.empty()) throw InputError(where + ": loss input must have rank >= 1");
      const double n = static_cast<double>(in(0).numel());
      if (!op.shape.empty()) throw InputError(where + ": a loss produces a scalar; leave its shape empty");
      c = op.kind == OpKind::MSELoss ? Costs{3 * n, 3 * n} : Costs{5 * n, 3 * n};
      saved = {op.inputs[0]};
      break;
    }
    case OpKind::Generic: {
      if (op.inputs.empty()) throw InputError(where + ": a generic op needs at least one input");
      const double n = static_cast<double>(op.numel());
      c = {n, 2 * n};
      saved = op.inputs;
      op.simulate_only = true;
      break;
    }
  }
  if (op.kind == OpKind::Dense && op.act != Activation::None && op.act != Activation::ReLU &&
      op.act != Activation::Tanh)
    throw InputError(where + ": Dense activation must be none, relu or tanh");
  for (int64_t d : op.shape) {
    if (d <= 0) throw InputError(where + ": dimension " + std::to_string(d) + " in shape " + shape_str(op.shape) + " must be positive");
  }

  const uint64_t shape_bytes = tensor_bytes(op.shape, op.dtype) + extra_bytes;
  if (op.bytes == 0) op.bytes = shape_bytes;
  if (op.fwd_flops <= 0) op.fwd_flops = c.fwd;
  if (op.bwd_flops <= 0) op.bwd_flops = c.bwd;
  if (!explicit_saved) op.saved = saved;
  if (op.param_bytes == 0) op.param_bytes = params;
  for (int s : op.saved) {
    if (s != self && std::find(op.inputs.begin(), op.inputs.end(), s) == op.inputs.end())
      throw InputError(where + ": saved tensor " + std::to_string(s) + " is neither an input nor the op itself");
  }
}

}  // namespace remat
