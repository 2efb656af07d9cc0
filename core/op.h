// One forward op of a model: what it computes, the tensor it produces and what
// its backward reads (the memory model of DESIGN.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

enum class OpKind : uint8_t {
  Input, Linear, ReLU, GELU, Tanh, LayerNorm, Add, Dropout, MSELoss, SoftmaxCELoss,
  Dense,    // Linear followed by an activation, fused (the teaching chain)
  Generic,  // imported op we cannot execute: simulate only
};

enum class DType : uint8_t { F32, F16, BF16, I32 };

// Activation fused into a Dense op.
enum class Activation : uint8_t { None, ReLU, Tanh };

std::string_view kind_name(OpKind k);
bool parse_kind(std::string_view s, OpKind& out);
std::string_view dtype_name(DType d);
bool parse_dtype(std::string_view s, DType& out);
uint64_t dtype_size(DType d);
std::string_view activation_name(Activation a);
bool parse_activation(std::string_view s, Activation& out);

// Ops id-ed by their position in topological order; op 0 is the input batch,
// the last op is the loss.
struct Op {
  OpKind kind = OpKind::Input;
  std::string name;
  std::vector<int> inputs;     // producer op ids, in argument order
  std::vector<int64_t> shape;  // output shape; (rows, features) for the built-in ops
  DType dtype = DType::F32;
  uint64_t bytes = 0;          // bytes of A(v); may exceed the shape's (LayerNorm stats)
  double fwd_flops = 0;
  double bwd_flops = 0;
  std::vector<int> saved;      // forward tensors its backward reads (op ids; may include itself)
  uint64_t param_bytes = 0;    // weights of this op (baseline, not an activation)
  Activation act = Activation::None;  // Dense only
  float dropout_p = 0.0f;             // Dropout only
  bool simulate_only = false;         // no kernel can run it
  // Initial parameter values (e.g. ONNX initializers), in kernel order: Linear
  // and Dense {W (out,in), b}, LayerNorm {gamma, beta}. Empty: the executor
  // initialises from its seed. Shared so copying a Model stays cheap.
  std::vector<std::shared_ptr<const std::vector<float>>> param_init;

  int64_t numel() const;
  // Features: the last dimension (1 for a scalar).
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
};

// Bytes of `numel` elements of `dtype`; throws InputError on overflow.
uint64_t tensor_bytes(const std::vector<int64_t>& shape, DType dtype);

}  // namespace remat
