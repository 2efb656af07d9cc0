// The graph tells the memory story: node looks by residency (pixel colours at
// the nodes' centres), arrows from the running instruction to what it reads,
// the memory readout, a legend with every state, states that survive
// colour-blindness, readable labels and blocks on real models, tooltips.
#include <QImage>
#include <QPainter>
#include <QTest>
#include <algorithm>
#include <gtest/gtest.h>
#include <set>

#include "core/sim/instr_reads.h"
#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/strategies/registry.h"
#include "tests/widgets/color_vision.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/graph_painter.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/main_window.h"
#include "widgets/views/node_style.h"
#include "widgets/document/op_labels.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {

struct Picture {
  QImage image;
  GraphPaintReport report;
};

Picture paintAt(const Model& m, const Schedule& s, std::size_t step, QSize size = {1400, 420},
                GraphPaintOptions o = {}) {
  const ResidentIndex index(m, s);
  const ScheduleFacts facts(m, s);
  const NodeStates st = node_states_at(m, s, index, facts, step);
  const GraphLayout layout(m);
  Picture pic;
  pic.image = QImage(size, QImage::Format_RGB32);
  pic.image.fill(Qt::white);
  QPainter p(&pic.image);
  const QRectF target(QPointF(0, 0), QSizeF(size));
  paint_graph(p, m, layout, st, fit_transform(layout, graph_area(target, o)), target, o, &pic.report);
  return pic;
}

std::size_t indexOf(const Schedule& s, Instr ins) {
  return std::size_t(std::find(s.code.begin(), s.code.end(), ins) - s.code.begin());
}

bool hasText(const GraphPaintReport& r, const QString& t) {
  return std::any_of(r.texts.begin(), r.texts.end(), [&](const auto& x) { return x.first == t; });
}

// A node's colour at a point of its body away from marks and outline.
QColor bodyColor(const QImage& img, QPointF c, double r) {
  return img.pixelColor((c + QPointF(-0.6 * r, 0.5 * r)).toPoint());
}

}  // namespace

// Fill means "in memory", for gradients too; the running backward and what it
// reads, drawn at the right places.
TEST(GraphPicture, NodesShowResidencyAndTheRunningBackwardsReads) {
  const Model m = load_model("chain:16");
  const Schedule s = make_strategy("store-all")->schedule(m);
  const std::size_t t = indexOf(s, {InstrKind::Bwd, 5});
  ASSERT_LT(t, s.code.size());
  const Picture pic = paintAt(m, s, t);
  ASSERT_TRUE(pic.report.detailed);
  // Nodes are reported forward then backward per op: find each by position.
  const GraphLayout layout(m);
  std::map<std::pair<int, bool>, std::pair<NodeLook, QPointF>> node;
  {
    std::size_t k = 0;
    for (int v = 0; v < m.size(); ++v) {
      node[{v, false}] = pic.report.nodes[k++];
      if (v != 0 && v != m.loss()) node[{v, true}] = pic.report.nodes[k++];
    }
    ASSERT_EQ(k, pic.report.nodes.size());
  }
  const double r = std::abs(node[{1, false}].second.x() - node[{0, false}].second.x()) * GraphLayout::kRadius /
                   GraphLayout::kDx;
  const ResidentIndex index(m, s);
  const auto resident = index.resident_at(t);
  auto isResident = [&](int v, bool g) {
    return std::find(resident.begin(), resident.end(), TensorRef{v, g}) != resident.end();
  };
  for (int v = 1; v < m.loss(); ++v) {
    SCOPED_TRACE(v);
    const auto [fl, fc] = node[{v, false}];
    const auto [gl, gc] = node[{v, true}];
    // Activations: store-all keeps a1..a5 here; a6.. are freed after their backward.
    EXPECT_EQ(node_style(fl).filled, isResident(v, false));
    EXPECT_EQ(bodyColor(pic.image, fc, r), node_style(fl).fill);
    // Gradients: running for a5 (purple), resident G(a4) it writes... and done
    // (pale, dashed) above a5, not yet (white) below.
    if (v == 5) EXPECT_EQ(gl, NodeLook::BwdRunning);
    else if (isResident(v, true)) EXPECT_EQ(gl, NodeLook::GradResident);
    else EXPECT_EQ(gl, v > 5 ? NodeLook::GradFreed : NodeLook::GradNotYet);
    EXPECT_EQ(bodyColor(pic.image, gc, r), node_style(gl).fill);
  }
  EXPECT_EQ(node_style(NodeLook::BwdRunning).fill, okabe_ito::reddishPurple());
  // One arrow per activation the backward reads; its own gradient gets the halo only.
  int acts = 0;
  for (const TensorRef& x : tensors_read(m, s.code[t])) acts += !x.grad;
  EXPECT_EQ(pic.report.arrows, acts);
  for (const TensorRef& x : tensors_read(m, s.code[t])) {
    const QPointF c = node[{x.op, x.grad}].second;
    EXPECT_EQ(pic.image.pixelColor((c + QPointF(-1.3 * r, 0)).toPoint()), GraphPalette::highlight())
        << (x.grad ? "G" : "A") << x.op;
  }
  // A tensor not read has no halo.
  EXPECT_NE(pic.image.pixelColor((node[{2, false}].second + QPointF(-1.3 * r, 0)).toPoint()), GraphPalette::highlight());
}

TEST(GraphPicture, RecomputingIsHatchedAndCheckpointsRinged) {
  const Model m = load_model("chain:16");
  const Schedule s = make_strategy("sqrt")->schedule(m);
  // The first recompute of sqrt: a9 from checkpoint a8 for the third segment's backward.
  std::vector<uint8_t> seen(std::size_t(m.size()), 0);
  std::size_t t = 0;
  for (; t < s.code.size(); ++t) {
    if (s.code[t].kind != InstrKind::Fwd) continue;
    if (seen[std::size_t(s.code[t].op)]) break;
    seen[std::size_t(s.code[t].op)] = 1;
  }
  ASSERT_LT(t, s.code.size());
  const int v = s.code[t].op;
  const ResidentIndex index(m, s);
  const ScheduleFacts facts(m, s, make_strategy("sqrt")->declared_checkpoints(m));
  const NodeStates st = node_states_at(m, s, index, facts, t);
  EXPECT_EQ(activation_look(st, v), NodeLook::ActRecomputing);
  EXPECT_EQ(activation_look(st, m.op(v).inputs[0]), NodeLook::ActCheckpoint);  // read from a checkpoint
  // Hatching: both the vermillion fill and white lines inside the node.
  const GraphLayout layout(m);
  QImage img(60, 60, QImage::Format_RGB32);
  img.fill(Qt::white);
  {
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing, false);
    paint_node(p, NodeLook::ActRecomputing, QPointF(30, 30), 24);
  }
  int fill = 0, hatch = 0;
  for (int y = 16; y < 44; ++y)
    for (int x = 16; x < 28; ++x) {  // left half: away from the play mark
      const QColor c = img.pixelColor(x, y);
      fill += c == okabe_ito::vermillion();
      hatch += c == QColor(Qt::white);
    }
  EXPECT_GT(fill, 100);
  EXPECT_GT(hatch, 20);
}

// Every pair of states in a row stays distinguishable under protanopia,
// deuteranopia and tritanopia: their glyphs, simulated pixel by pixel, differ
// by a mean CIE76 ΔE of at least 10 over the node (about four "just
// noticeable differences"), and the filled states differ by colour alone too.
TEST(GraphPicture, StatesStayDistinguishableInColourBlindness) {
  auto glyph = [](NodeLook look) {
    QImage img(64, 64, QImage::Format_RGB32);
    img.fill(GraphPalette::background());
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing, true);
    paint_node(p, look, QPointF(32, 32), 24);
    return img;
  };
  std::vector<NodeLook> looks;
  for (int i = 0; i < int(NodeLook::Count); ++i) looks.push_back(NodeLook(i));
  for (cvd::Kind k : {cvd::Kind::Normal, cvd::Kind::Protanopia, cvd::Kind::Deuteranopia, cvd::Kind::Tritanopia}) {
    for (std::size_t i = 0; i < looks.size(); ++i)
      for (std::size_t j = i + 1; j < looks.size(); ++j) {
        if (is_activation(looks[i]) != is_activation(looks[j])) continue;  // circles vs squares: shape differs
        const QImage a = glyph(looks[i]), b = glyph(looks[j]);
        double sum = 0;
        int count = 0;
        for (int y = 10; y < 54; ++y)
          for (int x = 10; x < 54; ++x) {
            sum += cvd::deltaE(a.pixelColor(x, y), b.pixelColor(x, y), k);
            ++count;
          }
        EXPECT_GE(sum / count, 10.0) << node_style(looks[i]).legend << " vs " << node_style(looks[j]).legend
                                     << " (kind " << int(k) << ")";
        const NodeStyle &sa = node_style(looks[i]), &sb = node_style(looks[j]);
        if (sa.filled && sb.filled && sa.fill != sb.fill)
          EXPECT_GE(cvd::deltaE(sa.fill, sb.fill, k), 15.0) << sa.legend << " vs " << sb.legend;
      }
  }
  // And without any colour: each state's non-colour signature is its own.
  std::set<std::tuple<bool, int, int, int, int>> signatures;
  for (NodeLook l : looks) {
    const NodeStyle& s = node_style(l);
    signatures.insert({is_activation(l), int(s.pattern), int(s.outlineStyle), int(s.outlineWidth * 100), int(s.mark)});
  }
  // Resident and not-yet differ by fill (dark vs white), the rest by pattern,
  // outline or mark: at most those two pairs share a signature per row.
  EXPECT_GE(signatures.size(), looks.size() - 2);
}

TEST(GraphPicture, TheReadoutAndTheLegendAreDrawn) {
  const Model m = load_model("chain:16");
  const Schedule s = make_strategy("sqrt")->schedule(m);
  GraphPaintOptions o;
  o.readout = "resident 9 B · peak 9 B";
  o.atPeak = true;
  const Picture pic = paintAt(m, s, 10, {1400, 420}, o);
  EXPECT_TRUE(hasText(pic.report, o.readout));
  // At the peak the readout box is vermillion, with white text inside.
  const QRectF box = pic.report.readout;
  ASSERT_FALSE(box.isEmpty());
  EXPECT_GT(box.height(), 20);  // large
  EXPECT_EQ(pic.image.pixelColor((box.topLeft() + QPointF(3, box.height() / 2)).toPoint()), okabe_ito::vermillion());
  int white = 0;
  for (int x = int(box.left()); x < int(box.right()); ++x)
    white += pic.image.pixelColor(x, int(box.center().y())) == QColor(Qt::white);
  EXPECT_GT(white, 10);
  for (int i = 0; i < int(NodeLook::Count); ++i)
    EXPECT_TRUE(hasText(pic.report, node_style(NodeLook(i)).legend)) << node_style(NodeLook(i)).legend;
}

TEST(GraphPicture, RealModelLabelsAreShortTypedAndDoNotOverlap) {
  const Model m = load_model("transformer:1:16:4:2");
  const Schedule s = make_strategy("store-all")->schedule(m);
  const Picture pic = paintAt(m, s, 0, {1600, 420});
  ASSERT_TRUE(pic.report.detailed);
  EXPECT_TRUE(hasText(pic.report, "LN"));
  EXPECT_TRUE(hasText(pic.report, "MatMul"));
  EXPECT_TRUE(hasText(pic.report, "GELU"));
  EXPECT_TRUE(hasText(pic.report, "mlp.up"));  // "b0.mlp.up" without its block
  EXPECT_FALSE(hasText(pic.report, "b0.mlp.up"));
  // Names above the forward row never overlap each other, nor do the types.
  const double rowY = pic.report.nodes[0].second.y();
  std::set<QString> types;
  for (int v = 0; v < m.size(); ++v) types.insert(op_type_label(m, v));
  std::vector<QRectF> names, typeBoxes;
  for (const auto& [t, box] : pic.report.texts) {
    if (box.bottom() >= rowY) continue;
    (types.count(t) ? typeBoxes : names).push_back(box.adjusted(1, 1, -1, -1));
  }
  EXPECT_EQ(names.size(), std::size_t(m.size() - 1));  // the loss sits between the rows
  for (const auto* list : {&names, &typeBoxes})
    for (std::size_t i = 0; i < list->size(); ++i)
      for (std::size_t j = i + 1; j < list->size(); ++j) EXPECT_FALSE((*list)[i].intersects((*list)[j])) << i << " " << j;
}

TEST(GraphPicture, TheOverviewOfALargeModelLabelsItsBlocks) {
  const Model m = load_model("transformer:84");
  const Schedule s = make_strategy("store-all")->schedule(m);
  const Picture pic = paintAt(m, s, 0, {1400, 420});
  ASSERT_FALSE(pic.report.detailed);
  const auto blocks = model_blocks(m);
  ASSERT_EQ(blocks.size(), 84u);
  EXPECT_EQ(blocks[0].name, "b0");
  EXPECT_EQ(blocks[0].first, 1);
  EXPECT_EQ(blocks[0].last, 12);  // 12 ops per block
  std::vector<QRectF> boxes;
  for (const auto& [t, box] : pic.report.texts)
    if (t.startsWith('b') && t.mid(1).toInt() >= 0 && t.size() <= 3) boxes.push_back(box);
  EXPECT_TRUE(hasText(pic.report, "b0"));
  EXPECT_GE(boxes.size(), 10u);  // many labelled, never overlapping
  for (std::size_t i = 0; i + 1 < boxes.size(); ++i) EXPECT_LT(boxes[i].right(), boxes[i + 1].left());
  EXPECT_FALSE(hasText(pic.report, "forward"));  // the blocks replace the anonymous band's caption
}

TEST(GraphPicture, TooltipsSayEverythingAboutANode) {
  const Model m = load_model("transformer:1:16:4:2");
  int up = -1;
  for (int v = 0; v < m.size(); ++v)
    if (m.op(v).name == "b0.mlp.up") up = v;
  ASSERT_GE(up, 0);
  const QString tip = node_tooltip(m, up, false);
  EXPECT_TRUE(tip.contains("b0.mlp.up"));
  EXPECT_TRUE(tip.contains("Linear"));
  EXPECT_TRUE(tip.contains(QString("%1 × %2").arg(m.op(up).shape[0]).arg(m.op(up).shape[1])));
  EXPECT_TRUE(tip.contains(format_bytes(m.op(up).bytes)));
  for (int sv : m.op(up).saved) EXPECT_TRUE(tip.contains(QString::fromStdString(m.op(sv).name)));
  for (int c : m.consumers(up)) EXPECT_TRUE(tip.contains("fwd " + QString::fromStdString(m.op(c).name)));
  const QString back = node_tooltip(m, up, true);
  EXPECT_TRUE(back.contains("backward of b0.mlp.up"));
  EXPECT_TRUE(back.contains("G(b0.mlp.up)"));
  // The view shows the same text over the node.
  StudioDocument doc;
  doc.loadModel("transformer:1:16:4:2");
  GraphView view(&doc);
  view.resize(1600, 400);
  view.fitToView();
  EXPECT_EQ(view.toolTipAt(view.nodePosition(up)), tip);
  EXPECT_EQ(view.toolTipAt(view.nodePosition(up, true)), back);
  EXPECT_TRUE(view.toolTipAt(QPointF(1, 1)).isEmpty());
}
