// Words for the graph's nodes on real models: a short op type (LN, MatMul,
// Softmax, Conv), a name shortened from the left, a tooltip with everything
// about the tensor, and the model's blocks (h.0, b3 ...) for the overview.
#pragma once
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

#include "core/sim/compression.h"

namespace remat {
struct Model;

// "LN" for LayerNorm, "MatMul" for Linear, ... (the kind's own name otherwise).
QString op_type_label(const Model& model, int op);
// Worth drawing: the model mixes op kinds (a chain of Dense ops says nothing).
bool shows_type_labels(const Model& model);

// A run of consecutive ops that share a numbered name prefix ("b3." in
// "b3.mlp.up", "h.0" in "/h.0/attn/MatMul").
struct ModelBlock {
  QString name;
  int first = 0, last = 0;
};
// The blocks, when the model has at least two of at least two ops each.
std::vector<ModelBlock> model_blocks(const Model& model);

// The node's label: its name without the block prefix ("mlp.up"), "op7" when
// it has none. Elide it from the left when it is still too long.
QString node_label(const Model& model, int op);
// The graph's label forms per op, longest first, never elided: the node label
// (with its block prefix where the bare label repeats in the model: "b3.mlp.up"
// rather than a tenth "mlp.up"), then that name with every component but the
// last shortened to its initial and its number ("b3.m.up", "l1.0.conv1"), the
// block prefix kept. The painter draws the first that fits.
std::vector<QStringList> node_label_forms(const Model& model);
// `label`, then its abbreviate_name when that differs.
QStringList label_forms(const QString& label);
// "layer1.0.conv1" -> "l1.0.conv1": components but the last to initial + digits.
QString abbreviate_name(const QString& name);
// An op no backend can run on a model that is meant to run (a captured
// model's Generic ops, an unsupported type): the graph badges it. A counting
// model's 1-byte tensors (chain:16) are not badged: none of its ops runs, and
// the Run item says why once.
bool marks_simulate_only(const Model& model, int op);
// Full name, kind, shape, bytes, saved tensors and readers (activation), or
// what the backward reads and writes (backward); a badged op says why it
// cannot run.
QString node_tooltip(const Model& model, int op, bool backward);
// What a forward node's tooltip adds while only C(op), its compressed copy, is
// held: "held compressed: bf16, 128 B stored of 256 B".
QString compressed_note(const Model& model, int op, Packing packing);

}  // namespace remat
