// A file that ends in its own loss (a module whose forward returns
// F.cross_entropy(logits, targets), exported in training mode): the loss node
// becomes the model's SoftmaxCELoss and the targets input the labels the
// executor draws, instead of a second loss appended after the first.
#ifdef REMAT_HAVE_ONNX
#include <unordered_map>

#include "core/io/onnx_importer.h"

namespace remat::onnx_import {

namespace {

bool is_loss(const std::string& type) { return type == "SoftmaxCrossEntropyLoss" || type == "NegativeLogLikelihoodLoss"; }

// Nodes that pass labels through unchanged in value: targets.view(-1) and the like.
bool labels_passthrough(const std::string& type) {
  return type == "Reshape" || type == "Flatten" || type == "Squeeze" || type == "Unsqueeze" || type == "Identity" ||
         type == "Cast";
}

std::string attr_string(const NodeProto& n, const char* name, const std::string& fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.s();
  }
  return fallback;
}

}  // namespace

std::string Importer::choose_output() {
  if (g_.output_size() == 1) return g_.output(0).name();
  std::unordered_map<std::string, const NodeProto*> producer;
  for (const auto& n : g_.node())
    for (const auto& o : n.output()) producer.emplace(o, &n);
  std::vector<std::string> losses;
  for (const auto& o : g_.output()) {
    auto it = producer.find(o.name());
    if (it != producer.end() && is_loss(it->second->op_type())) losses.push_back(o.name());
  }
  if (losses.size() != 1)
    fail("the graph has " + std::to_string(g_.output_size()) +
         " outputs; remat needs exactly one (the loss is appended to it), or one made by a SoftmaxCrossEntropyLoss");
  std::string others;
  for (const auto& o : g_.output())
    if (o.name() != losses[0]) others += (others.empty() ? "'" : ", '") + o.name() + "'";
  warn("the graph has " + std::to_string(g_.output_size()) + " outputs: the loss '" + losses[0] +
       "' is trained; " + others + " only read");
  return losses[0];
}

bool Importer::labels_only(const onnx::ValueInfoProto& vi) const {
  const int32_t elem = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
  if (elem != TensorProto::INT64 && elem != TensorProto::INT32) return false;
  bool feeds_a_loss = false;
  std::vector<std::string> stack = {vi.name()};
  while (!stack.empty()) {
    const std::string t = std::move(stack.back());
    stack.pop_back();
    for (const auto& n : g_.node()) {
      for (int k = 0; k < n.input_size(); ++k) {
        if (n.input(k) != t) continue;
        if (is_loss(n.op_type()) && k == 1) {
          feeds_a_loss = true;
        } else if (labels_passthrough(n.op_type()) && k == 0 && n.output_size() == 1) {
          stack.push_back(n.output(0));
        } else {
          return false;  // read as data somewhere: the model's input, not labels
        }
      }
    }
  }
  return feeds_a_loss;
}

bool Importer::file_loss(const NodeProto& n, int x) {
  if (out0(n) != output_) return false;  // a loss inside the graph: left to the generic path
  const Op& logits = model_.op(x);
  if (labels_.empty() || n.input_size() < 2 || activation(n.input(1)) >= 0)
    fail_node(origin_, n, "its labels do not come from an integer graph input (the targets)");
  if (n.input_size() > 2 && !n.input(2).empty())
    fail_node(origin_, n, "has class weights; remat's cross-entropy weighs every class alike");
  const std::string reduction = attr_string(n, "reduction", "mean");
  if (reduction != "mean")
    fail_node(origin_, n, "reduction '" + reduction + "'; remat's cross-entropy is the mean over the batch");
  if (logits.shape.size() != 2)
    fail_node(origin_, n, "its logits are " + shape_str(logits.shape) +
                              ": the classes are on axis 1, and remat's cross-entropy takes them on the last axis of "
                              "(N, classes); reshape the logits to (-1, classes) before the loss, as nanoGPT does");
  const int64_t ignore = attr_int(n, "ignore_index", -100);
  if (ignore >= 0 && ignore < logits.shape[1])
    warn(where(n) + ": ignore_index " + std::to_string(ignore) +
         " is a class; the executor draws labels among all classes and ignores none");
  file_loss_ = op_name(n);
  values_[out0(n)] = {Value::Activation, x, nullptr};
  return true;
}

bool Importer::log_softmax_of_loss(const NodeProto& n, int x) {
  const int nll = sole_consumer(out0(n), "NegativeLogLikelihoodLoss");
  if (nll < 0 || out0(g_.node(nll)) != output_ || g_.node(nll).input(0) != out0(n)) return false;
  const auto rank = static_cast<int64_t>(model_.op(x).shape.size());
  const int64_t axis = attr_int(n, "axis", -1);
  if (axis != -1 && axis != rank - 1) return false;
  values_[out0(n)] = {Value::Activation, x, nullptr};  // NLL(log_softmax(z)) is cross-entropy of z
  return true;
}

}  // namespace remat::onnx_import
#endif
