#include "core/io/graphviz.h"

#include <boost/graph/graphviz.hpp>

#include "core/io/atomic_file.h"
#include "core/model/model_graph.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

// DOT string literal: quotes and backslashes escaped, newlines as \n.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string shape_text(const Op& op) {
  if (op.shape.empty()) return "scalar";
  std::string s = "[";
  for (std::size_t i = 0; i < op.shape.size(); ++i) s += (i ? "," : "") + std::to_string(op.shape[i]);
  return s + "]";
}

struct OpWriter {
  const Model* model;
  template <typename Vertex>
  void operator()(std::ostream& out, const Vertex& v) const {
    const Op& op = model->op(static_cast<int>(v));
    out << "[label=" << quoted(op.name + "\n" + std::string(kind_name(op.kind)) + " " + shape_text(op));
    if (op.kind == OpKind::Input || is_loss(op.kind)) out << ", shape=ellipse";
    if (op.simulate_only) out << ", style=dashed";
    out << "]";
  }
};

struct GraphWriter {
  const Model* model;
  void operator()(std::ostream& out) const {
    out << "label=" << quoted(model->name) << ";\nrankdir=TB;\nnode [shape=box, fontname=\"Helvetica\"];\n";
  }
};

}  // namespace

void write_model_dot(std::ostream& out, const Model& model) {
  boost::write_graphviz(out, model.graph(), OpWriter{&model}, boost::default_writer(), GraphWriter{&model});
}

void save_model_dot(const Model& model, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) { write_model_dot(out, model); });
}

}  // namespace remat
