// Internal to the ONNX importer: onnx_model.cpp walks the graph's nodes (and
// makes Generic ops of what it cannot map); onnx_patterns.cpp matches what
// torch.onnx.export decomposes (Linear as Gemm or MatMul+Add, GELU via Erf,
// LayerNorm before opset 17) back into one op. Needs REMAT_HAVE_ONNX.
#pragma once
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/errors.h"
#include "core/model/model.h"

namespace remat::onnx_import {

using onnx::NodeProto;
using onnx::TensorProto;

[[noreturn]] void fail_node(const std::string& origin, const NodeProto& n, const std::string& what);
std::string shape_str(const std::vector<int64_t>& s);
bool dtype_of(int32_t elem, DType& out);  // false: not a dtype remat holds
uint64_t elem_size(int32_t elem);
// onnx::shape_inference::InferShapes in a helper process (remat-onnx-infer,
// onnx_shape_inference.cpp): a crash or hang there is reported in `why`;
// false leaves `proto` as it was.
bool infer_shapes_isolated(onnx::ModelProto& proto, std::string& why);

struct Value {
  enum Kind { Activation, Constant } kind = Constant;
  int op = -1;                     // Activation: our op producing it
  const TensorProto* tensor = nullptr;  // Constant: its value when known
};

class RnnLayer;

class Importer {
  friend class RnnLayer;  // the LSTM's and GRU's shared part (onnx_rnn_layer.h)

 public:
  Importer(onnx::ModelProto& proto, const std::string& origin, std::vector<std::string>* warnings)
      : g_(*proto.mutable_graph()), origin_(origin), warnings_(warnings) {
    for (const auto& o : proto.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    // torch.onnx.export writes its own version ("1.13.0"): what autograd
    // saves differs between its releases (a mean keeps its input before 2.0).
    if (proto.producer_name() == "pytorch") torch_major_ = std::atoi(proto.producer_version().c_str());
  }

  Model run(const std::string& default_name);

 private:
  onnx::GraphProto& g_;
  const std::string& origin_;
  std::vector<std::string>* warnings_;
  Model model_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, std::vector<int64_t>> shapes_;  // known positive shapes
  std::unordered_map<std::string, int32_t> elem_types_;
  std::unordered_map<std::string, std::vector<int>> consumers_;   // tensor -> live node indices
  std::vector<bool> live_;
  std::set<int> done_;
  std::vector<std::string> generic_;  // names of simulate-only ops
  bool softmax_head_ = false;         // the output is a Softmax of the logits
  std::string softmax_type_;
  std::string output_;                // the graph output the model leads to (onnx_loss.cpp)
  std::string labels_;                // a graph input that only feeds the file's loss its labels
  std::string file_loss_;             // the file's own loss node, when it ends in one
  std::deque<TensorProto> folded_;    // constants computed here (a transposed weight)
  // A folded constant that is an initializer reshaped or broadcast (ViT's
  // class token, cls.expand(B, -1, -1)): that initializer, and its shape
  // before the broadcast. A Concat of it learns the initializer.
  struct Origin {
    std::string init;
    std::vector<int64_t> shape;
  };
  std::unordered_map<std::string, Origin> param_origin_;
  int64_t opset_ = 17;                // of the default domain
  int torch_major_ = 0;               // the exporting PyTorch's major version; 0: not PyTorch
  bool has_batchnorm_ = false;        // any BatchNormalization node
  std::vector<std::string> eval_mode_;  // nodes exported in inference mode

  [[noreturn]] void fail(const std::string& what) { throw InputError(origin_ + ": " + what); }
  void warn(const std::string& w) {
    if (warnings_) warnings_->push_back(w);
  }

  void note_type(const onnx::ValueInfoProto& vi);
  void collect_shapes();

  // One of the graph's initializers itself (not a Constant node or a folded value).
  bool is_graph_initializer(const std::string& name) const {
    const TensorProto* t = constant(name);
    for (const auto& i : g_.initializer())
      if (&i == t) return true;
    return false;
  }
  bool is_initializer(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Constant;
  }

  void add_input();

  // --- the file's own loss (onnx_loss.cpp) --------------------------------------

  // The output to train: the only one, or among several the one a loss node
  // makes (nanoGPT returns logits and loss).
  std::string choose_output();
  // An integer graph input whose every use, through views and casts, is the
  // labels of a SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss.
  bool labels_only(const onnx::ValueInfoProto& vi) const;
  // The output node is such a loss over (N, classes) logits: it becomes the
  // model's SoftmaxCELoss (true), or fails naming what remat cannot take.
  bool file_loss(const NodeProto& n, int x);
  // LogSoftmax over the classes whose only reader is the output NLL loss.
  bool log_softmax_of_loss(const NodeProto& n, int x);

  // Nodes that lead to the graph output; the rest (unused Dropout masks,
  // dead code) are skipped.
  std::vector<bool> live_nodes();
  void consumers_index(int i);
  // The node producing each tensor (live nodes), for patterns that need a
  // constant computed by a node listed after them (an Unsqueeze of a weight).
  std::unordered_map<std::string, int> producer_;
  // explicit_saved: op.saved is what the backward keeps, not the kind's rule
  // (a torch 1.x mean, which keeps its input).
  int add_op(Op op, const std::string& output, const std::string& where, bool explicit_saved = false);

  // --- constants -------------------------------------------------------------

  const TensorProto* constant(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.kind != Value::Constant) return nullptr;
    return it->second.tensor;
  }
  bool is_constant(const std::string& name) const {
    if (name.empty()) return true;  // an omitted optional input
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Constant;
  }
  int activation(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Activation ? it->second.op : -1;
  }

  // Values of a float/double tensor; nullopt when absent, external or malformed.
  std::optional<std::vector<float>> floats(const TensorProto* t) const;
  // Values of an int64/int32 tensor (shapes, axes, split sizes).
  std::optional<std::vector<int64_t>> ints(const TensorProto* t) const;
  // A constant boolean (Dropout's training_mode).
  std::optional<bool> flag(const std::string& name) const;
  // --- constant folding (onnx_fold.cpp) -----------------------------------------

  // A constant's values as the folder computes with them: float32, int32/64
  // and bool values held as doubles (exact for shapes and masks), row-major.
  struct Dense {
    std::vector<int64_t> dims;
    std::vector<double> v;
    int32_t type = 0;  // TensorProto element type; 0: an omitted optional input
  };
  std::optional<Dense> dense(const std::string& name) const;
  std::optional<Dense> dense(const TensorProto* t) const;
  const TensorProto* store(const Dense& d);  // kept alive in folded_
  // The values of `name`: a known constant, or one that its producer (and
  // theirs) compute from constants alone, folded now (and marked done).
  std::optional<Dense> dense_now(const std::string& name, int depth = 0);
  void set_constant(const std::string& name, const Dense& d);
  // A node whose inputs are all constants, evaluated (shape arithmetic, masks,
  // transposed weights); false leaves its outputs constants of unknown value.
  bool fold_constant(const NodeProto& n);
  // Shape or Size of activation x: a constant, from its known shape.
  bool fold_shape_of(const NodeProto& n, int x);
  std::optional<float> scalar(const std::string& name) const;
  // A float32 epsilon as the double the model was written with: the shortest
  // decimal that rounds to it (1e-6f is 1e-6, as PyTorch's Python float);
  // 0 for PyTorch's default 1e-5, so that the op compares equal to a default one.
  static double decimal_eps(float eps);
  bool scalar_is(const std::string& name, float x, float tol = 1e-4f) const {
    auto s = scalar(name);
    return s && std::fabs(*s - x) <= tol * std::max(1.0f, std::fabs(x));
  }
  std::vector<int64_t> dims(const TensorProto* t) const { return {t->dims().begin(), t->dims().end()}; }

  // --- pattern helpers ---------------------------------------------------------

  // The only live consumer of `tensor`, if it has exactly one and it is of `type`.
  int sole_consumer(const std::string& tensor, const char* type) const;
  static const std::string& out0(const NodeProto& n) {
    static const std::string none;
    return n.output_size() ? n.output(0) : none;
  }
  // The other input of a binary node, given one of them.
  static const std::string* other(const NodeProto& n, const std::string& one) {
    if (n.input_size() != 2) return nullptr;
    if (n.input(0) == one) return &n.input(1);
    if (n.input(1) == one) return &n.input(0);
    return nullptr;
  }
  int64_t attr_int(const NodeProto& n, const char* name, int64_t fallback) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.i();
    }
    return fallback;
  }
  float attr_float(const NodeProto& n, const char* name, float fallback) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.f();
    }
    return fallback;
  }
  std::vector<int64_t> attr_ints(const NodeProto& n, const char* name) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return {a.ints().begin(), a.ints().end()};
    }
    return {};
  }
  bool last_axis_only(const NodeProto& n, std::size_t rank) const;

  std::string op_name(const NodeProto& n) const { return n.name().empty() ? out0(n) : n.name(); }
  // A matched pattern is named after its scope: "/ln/ReduceMean" -> "/ln/LayerNorm".
  std::string pattern_name(const NodeProto& first, const char* kind) const;
  std::string where(const NodeProto& n) const { return "node '" + op_name(n) + "' (" + n.op_type() + ")"; }

  // --- mapping -----------------------------------------------------------------

  void import_node(int i);
  void alias(const NodeProto& n, int x);
  bool zero_pad(const NodeProto& n) const;  // a Pad whose pads are all zero (torch's AvgPool2d export)
  bool pad(const NodeProto& n, int x);      // constant, reflect, edge or wrap Pad (onnx_pad.cpp)
  // The elements of real networks (onnx_layers.cpp); false: not this pattern.
  bool conv(const NodeProto& n, int x);
  bool conv_transpose(const NodeProto& n, int x);
  bool resize(const NodeProto& n, int x);  // nearest or (bi)linear Resize of the spatial dims: Upsample
  bool batchnorm(const NodeProto& n, int x);
  bool pool(const NodeProto& n, int x);
  bool softmax(const NodeProto& n, int x);
  bool with_constant(const NodeProto& n, int x);  // Mul/Div/Add/Sub by a constant
  // A constant of shape c that scales x (shape x) along one axis: its
  // features (last) or its channels (1).
  static bool scale_vector(const std::vector<int64_t>& c, const std::vector<int64_t>& x);
  bool masked_fill(const NodeProto& n, int x);    // Where(constant mask, constant, x)
  bool embedding(const NodeProto& n, int ids);    // Gather(constant table, ids)
  bool silu(const NodeProto& sigmoid, int x);     // x * Sigmoid(x)
  bool view(const NodeProto& n, int x);           // Reshape, Flatten, (Un)Squeeze, Transpose, Expand, Slice
  bool split(const NodeProto& n, int x);          // one Slice view per output
  // TopK(x, constant k), largest and sorted: a TopK op (the indices) and a
  // Gather of x by them (the values).
  bool topk(const NodeProto& n, int x);
  // DepthToSpace (DCR, CRD) and SpaceToDepth: a Reshape and a Transpose as
  // views, then a copying Reshape (onnx_shuffle.cpp); CumSum by a constant
  // axis, neither exclusive nor reversed: a Cumsum.
  bool depth_space(const NodeProto& n, int x);
  bool cumsum(const NodeProto& n, int x);
  bool select(const NodeProto& n, int x);         // Gather(x, constant scalar index): x[:, i] as views
  // Concat of activations and at most one constant piece that an initializer
  // broadcasts (a class token, learned); false: not this form.
  bool concat(const NodeProto& n, const std::vector<std::string>& acts);
  int add_kind(OpKind k, const NodeProto& n, std::vector<int> inputs, std::vector<int64_t> shape = {});
  // add_op, or -1 (nothing added) when the kind's rule refuses the node.
  int try_add(Op op, const std::string& output, const NodeProto& n, bool explicit_saved = false);
  std::optional<std::vector<int64_t>> known_shape(const std::string& name) const;
  std::optional<std::vector<int64_t>> reshape_target(const NodeProto& n, const Op& in) const;
  // A Reshape-like op that changes nothing on remat's (rows, features) view of
  // a contiguous tensor (last dimension and element count kept) is folded into
  // its input, as before views existed, so such models stay executable.
  bool foldable_view(const NodeProto& n, const Op& in) const;

  bool identity_perm(const NodeProto& n) const;
  void dropout(const NodeProto& n, int x);

  // Linear y = x W^T + b, W (out, in) as the kernels take it.
  int add_linear(const NodeProto& n, const std::string& output, int x, std::vector<float> w_out_in, int64_t out, std::vector<float> bias);

  // A constant weight of shape (rows, cols), transposed into (out, in) when
  // `in_out` (MatMul's and Gemm transB=0's layout).
  std::optional<std::vector<float>> weight(const NodeProto& n, const std::string& name, int64_t in_features, bool in_out, int64_t& out);
  std::optional<std::vector<float>> bias_of(const std::string& name, int64_t out) const;
  // The values of constant `name`, a parameter's initial ones (a Conv's weight,
  // a BatchNorm's scale): fails naming the node when they cannot be read
  // (external data, not float) or are not `numel` floats (-1: any count);
  // nullptr when the constant's values are not known here (computed by nodes
  // the importer does not evaluate).
  std::shared_ptr<const std::vector<float>> initializer(const NodeProto& n, const std::string& name, int64_t numel = -1) const;
  // Op's initial parameters from the file; an op with one whose values are
  // unknown is simulate-only (running it with seeded weights would not be the
  // file's model), and a note says so.
  void set_params(Op& op, const NodeProto& n, std::vector<std::shared_ptr<const std::vector<float>>> init);
  bool gemm(const NodeProto& n, int x);

  // MatMul(x, W) [+ Add(b)]: torch's Linear on inputs of rank > 2.
  bool matmul(const NodeProto& n, int x);

  // torch's exact GELU before opset 20: Div(x, √2) → Erf → Add(1) → Mul(x) → Mul(0.5).
  bool gelu_erf(const NodeProto& div, int x);
  int add_layernorm(const NodeProto& n, const std::string& name, const std::string& output, int x, std::optional<std::vector<float>> gamma, std::optional<std::vector<float>> beta, float eps);
  std::optional<std::vector<float>> vector_of(const std::string& name, int64_t d) const;
  bool layernorm(const NodeProto& n, int x);

  // torch's LayerNorm before opset 17: ReduceMean → Sub → Pow(2) → ReduceMean →
  // Add(eps) → Sqrt → Div, then optional Mul(gamma), Add(beta).
  bool layernorm_decomposed(const NodeProto& mean, int x);
  // torch's GroupNorm: Reshape(x, (N, G, -1)) → InstanceNormalization(1, 0,
  // eps) → Reshape to x's shape [→ Mul(γ) → Add(β)].
  bool groupnorm(const NodeProto& reshape, int x);

  // The pointwise family and reductions (onnx_family.cpp); false: not this form.
  bool clip(const NodeProto& n, int x);        // Clip with constant bounds: clamp (ReLU6)
  bool unary_fn(const NodeProto& n, int x);    // Neg, Exp, HardSwish, ...: one function of x
  bool reduce(const NodeProto& n, int x);      // ReduceSum/Mean/Max over constant axes
  // Add/Sub/Mul/Div/Pow/Max/Min of two activations, or of one and a constant
  // that with_constant does not take (c - x, x ** 2, a broadcast that grows x).
  bool binary_fn(const NodeProto& n, const std::vector<std::string>& acts);

  // LSTM as the cell ops PyTorch's CPU LSTM runs (onnx_rnn.cpp); false: a
  // form it does not take (bidirectional, peepholes, a non-zero initial state).
  bool lstm(const NodeProto& n, int x);
  // GRU likewise (onnx_gru.cpp): forward, linear_before_reset = 1, a zero initial state.
  bool gru(const NodeProto& n, int x);

  // Anything else: a simulate-only op sized from its (inferred) output shape.
  void generic(const NodeProto& n, const std::vector<std::string>& acts);
  void add_loss();
  // The `note:` for an export that lost its batch norms or dropout (eval mode).
  void eval_mode_note();
};

}  // namespace remat::onnx_import
