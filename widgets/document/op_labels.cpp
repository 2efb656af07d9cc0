#include "widgets/document/op_labels.h"

#include <QHash>
#include <QRegularExpression>
#include <QStringList>
#include <algorithm>
#include <cctype>
#include <set>

#include "core/model/model.h"
#include "core/model/op_rules.h"
#include "widgets/document/comparison_model.h"

namespace remat {
namespace {

QString fullName(const Model& m, int v) {
  const std::string& n = m.op(v).name;
  return n.empty() ? QString("op%1").arg(v) : QString::fromStdString(n);
}

// The name up to and including its first component with a digit, split at
// '.' and '/': "b3.mlp.up" -> "b3", "/h.0/attn/MatMul" -> "/h.0". Empty when
// no component is numbered.
std::string blockKey(const std::string& name) {
  std::size_t start = 0;
  while (start < name.size()) {
    std::size_t end = name.find_first_of("./", start);
    if (end == std::string::npos) end = name.size();
    const bool digit = std::any_of(name.begin() + long(start), name.begin() + long(end),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
    // A component that is a bare number joins its parent ("h" + "0").
    if (digit) return end == name.size() ? std::string() : name.substr(0, end);
    start = end + 1;
  }
  return {};
}

// The block's numbered component, with its parent when it is a bare number:
// "/transformer/h.0" -> "h.0", "b3" -> "b3".
QString blockDisplayName(const std::string& key) {
  auto startOf = [&](std::size_t end) {
    const std::size_t sep = key.find_last_of("./", end ? end - 1 : 0);
    return sep == std::string::npos || end == 0 ? std::size_t(0) : sep + 1;
  };
  std::size_t start = startOf(key.size());
  const bool bare = std::all_of(key.begin() + long(start), key.end(),
                                [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  if (bare && start > 1) start = startOf(start - 1);
  return QString::fromStdString(key.substr(start));
}

QString shape(const std::vector<int64_t>& s) {
  QStringList parts;
  for (int64_t d : s) parts << QString::number(d);
  return parts.isEmpty() ? QString("scalar") : parts.join(" × ");
}

QString names(const Model& m, const std::vector<int>& ops) {
  QStringList out;
  for (int v : ops) out << fullName(m, v);
  return out.isEmpty() ? QString("nothing") : out.join(", ");
}

}  // namespace

// The tooltip without the simulate-only line (below node_tooltip).
QString node_tooltip_body(const Model& m, int v, bool backward);

QString op_type_label(const Model& m, int op) {
  const std::string kind(kind_name(m.op(op).kind));
  static const std::pair<const char*, const char*> kShort[] = {
      {"Input", "in"},       {"Linear", "MatMul"}, {"LayerNorm", "LN"},      {"BatchNorm", "BN"},
      {"Dropout", "Drop"},   {"MSELoss", "MSE"},   {"SoftmaxCELoss", "CE"}, {"BCEWithLogitsLoss", "BCE"},  {"Generic", "op"},
      {"Conv2d", "Conv"},    {"MaxPool", "Pool"},  {"Attention", "Attn"}};
  for (const auto& [k, s] : kShort)
    if (kind == k) return s;
  return QString::fromStdString(kind);
}

bool shows_type_labels(const Model& m) {
  std::set<int> kinds;
  for (int v = 1; v < m.loss(); ++v) kinds.insert(static_cast<int>(m.op(v).kind));
  return kinds.size() >= 2;
}

std::vector<ModelBlock> model_blocks(const Model& m) {
  std::vector<ModelBlock> out;
  std::string current;
  for (int v = 0; v < m.size(); ++v) {
    const std::string key = blockKey(m.op(v).name);
    if (!key.empty() && key == current) {
      out.back().last = v;
      continue;
    }
    current = key;
    if (!key.empty()) {
      out.push_back({blockDisplayName(key), v, v});
    }
  }
  const bool blocky = out.size() >= 2 && std::all_of(out.begin(), out.end(), [](const ModelBlock& b) {
                        return b.last > b.first;
                      });
  return blocky ? out : std::vector<ModelBlock>{};
}

QString node_label(const Model& m, int op) {
  const std::string& n = m.op(op).name;
  if (n.empty()) return QString("op%1").arg(op);
  const std::string key = blockKey(n);
  std::string rest = key.empty() || key.size() >= n.size() ? n : n.substr(key.size() + 1);
  return QString::fromStdString(rest.empty() ? n : rest);
}

QString abbreviate_name(const QString& name) {
  const QStringList parts = name.split(QRegularExpression("[./]"), Qt::SkipEmptyParts);
  QStringList out;
  for (int i = 0; i < parts.size(); ++i) {
    const QString& c = parts[i];
    if (i + 1 == parts.size()) {
      out << c;
      continue;
    }
    QString digits;
    for (QChar ch : c)
      if (ch.isDigit()) digits += ch;
    const bool bare = digits.size() == c.size();
    out << (bare ? c : QString(c.front()) + digits);
  }
  return out.join('.');
}

std::vector<QStringList> node_label_forms(const Model& m) {
  std::vector<QString> bare;
  QHash<QString, int> uses;
  for (int v = 0; v < m.size(); ++v) {
    bare.push_back(node_label(m, v));
    ++uses[bare.back()];
  }
  std::vector<QStringList> out;
  for (int v = 0; v < m.size(); ++v) {
    // The bare label is only kept where it names one op of the model.
    const QString label = uses[bare[std::size_t(v)]] > 1 && !m.op(v).name.empty() ? QString::fromStdString(m.op(v).name)
                                                                                 : bare[std::size_t(v)];
    out.push_back(label_forms(label));
  }
  return out;
}

QStringList label_forms(const QString& label) {
  QStringList forms{label};
  const QString shorter = abbreviate_name(label);
  if (!shorter.isEmpty() && shorter != label) forms << shorter;
  return forms;
}

bool marks_simulate_only(const Model& m, int op) {
  const uint64_t unit = m.uniform_bytes();
  if (unit != 0 && unit % 4 != 0) return false;  // a counting model: nothing runs
  return !executable(m.op(op));
}

QString node_tooltip(const Model& m, int v, bool backward) {
  QString tip = node_tooltip_body(m, v, backward);
  if (marks_simulate_only(m, v))
    tip += QString("<br><b>simulate-only</b>: %1").arg(QString::fromStdString(exec_problem(m.op(v))).toHtmlEscaped());
  return tip;
}

QString node_tooltip_body(const Model& m, int v, bool backward) {
  const Op& op = m.op(v);
  const QString name = fullName(m, v);
  if (backward) {
    QStringList reads;
    for (int s : op.saved) reads << "A(" + fullName(m, s) + ")";
    if (m.has_grad_tensor(v)) reads << "G(" + name + ")";
    QStringList writes;
    for (int u : op.inputs)
      if (m.has_grad_tensor(u)) writes << "G(" + fullName(m, u) + ")";
    return QString("<b>backward of %1</b> (%2)<br>reads %3<br>writes %4<br>G(%1): %5")
        .arg(name.toHtmlEscaped(), QString::fromStdString(std::string(kind_name(op.kind))),
             reads.isEmpty() ? QString("the loss seed") : reads.join(", ").toHtmlEscaped(),
             writes.isEmpty() ? QString("no activation gradient") : writes.join(", ").toHtmlEscaped(),
             m.has_grad_tensor(v) ? format_bytes(m.grad_bytes(v)) : QString("none (the seed is implicit)"));
  }
  // Who reads A(v): the forward ops that take it, and the backward steps that saved it.
  QStringList readers;
  for (int c : m.consumers(v)) readers << "fwd " + fullName(m, c);
  for (int u = 0; u < m.size(); ++u)
    if (std::find(m.op(u).saved.begin(), m.op(u).saved.end(), v) != m.op(u).saved.end())
      readers << "bwd " + fullName(m, u);
  return QString("<b>%1</b> (op %2, %3)<br>shape %4 · %5<br>its backward reads %6<br>read by %7")
      .arg(name.toHtmlEscaped())
      .arg(v)
      .arg(QString::fromStdString(std::string(kind_name(op.kind))), shape(op.shape), format_bytes(op.bytes),
           names(m, op.saved).toHtmlEscaped(), readers.isEmpty() ? QString("nothing") : readers.join(", ").toHtmlEscaped());
}

QString compressed_note(const Model& m, int v, Packing packing) {
  const uint64_t f32 = m.op(v).bytes;
  return QString("held compressed: %1, %2 stored of %3")
      .arg(QString::fromUtf8(packing_name(packing).data(), qsizetype(packing_name(packing).size())),
           format_bytes(packed_bytes(f32, packing)), format_bytes(f32));
}

}  // namespace remat
