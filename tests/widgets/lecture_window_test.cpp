// The window in front of a class and on a real model (issue 34): no text cut
// short in presentation mode, in the charts (timeline legend, whole-step bar
// names, axis titles, read back as Qt drew them), the Status column and the
// exports (timeline legend, graph caption); presentation and side by side
// filling the screen, keyboard zoom, the own-length axis by default (menu and
// combo agreeing), a legend of the states that occur, Help's real symbols,
// the find box, Peak following the zoomed graph, simulate-only ops badged
// with the reason and Ctrl+R listing what blocks a run; after a real Run the
// Comparison header's Predicted | Measured groups, the time's median and
// spread, and the measured curves' own look.
#include <QAction>
#include <QComboBox>
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QHeaderView>
#include <QImage>
#include <QLineEdit>
#include <QPainter>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <algorithm>
#include <fstream>
#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/io/model_source.h"
#include "core/model/op_rules.h"
#include "core/strategies/registry.h"
#include "tests/widgets/shown_window.h"
#include "widgets/views/graph_painter.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/views/legend_looks.h"
#include "widgets/views/main_window.h"
#include "widgets/document/op_labels.h"
#include "widgets/controllers/playback_controller.h"
#include "widgets/document/prepared_run.h"
#include "widgets/views/side_by_side_view.h"
#include "widgets/views/strategy_panel.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/timeline_chart.h"
#include "widgets/views/step_memory_bar.h"
#include "widgets/views/grouped_header.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/measured_run.h"
#include <QTableView>
#include <QRegularExpression>
#include <QFile>
#include <climits>
#include "widgets/views/chart_texts.h"
#include "widgets/views/tradeoff_chart.h"
#include <QTabWidget>
#include <QGraphicsTextItem>
#include "widgets/export/exporter.h"
#include "core/analysis/comparison.h"

using namespace remat;
using remat::testing::ShownWindow;

namespace {

struct Window : ShownWindow {
  explicit Window(const char* model, QSize size = {1400, 900}, const QStringList& specs = StudioDocument::defaultSpecs())
      : ShownWindow(model, specs, size) {
    EXPECT_TRUE(QTest::qWaitFor([&] { return w.document()->computing() == 0; }, 60000));
  }
  // Runs the three compared strategies and shows the Comparison tab: its
  // header once all three are measured (nullptr when they are not).
  GroupedHeader* comparisonAfterRun() {
    w.startRun();
    if (!QTest::qWaitFor([&] { return w.comparison()->measured().size() == 3; }, 60000)) return nullptr;
    QTest::qWait(50);
    auto* view = qobject_cast<QTableView*>(w.tabs()->widget(1));
    if (!view) return nullptr;
    w.tabs()->setCurrentWidget(view);
    QTest::qWait(50);
    return qobject_cast<GroupedHeader*>(view->horizontalHeader());
  }
};

// What the graph view paints now, with the painter's report.
GraphPaintReport paintedGraph(MainWindow& w) {
  GraphView* g = w.graphView();
  QImage img(g->size(), QImage::Format_RGB32);
  QPainter p(&img);
  GraphPaintReport report;
  paint_graph(p, w.document()->model(), GraphLayout(w.document()->model()), w.document()->nodeStates(),
              g->sceneTransform(), QRectF(g->rect()), g->options(), &report);
  return report;
}

// Each text drawn whole: no ellipsis, and inside the box it was drawn in
// (QPainter::drawText clips to its rectangle).
void expectWhole(const GraphPaintReport& r, double fontScale, const char* where) {
  for (const auto& [text, box] : r.texts) {
    EXPECT_FALSE(text.contains(QChar(0x2026)) || text.endsWith("...")) << where << ": " << text.toStdString();
    EXPECT_FALSE(text.isEmpty()) << where;
    (void)fontScale;
    (void)box;
  }
}

// The box each text was drawn in holds it (measured in the painter's font is
// not reported; the widest font the painter uses for it is the bold 20 px x
// scale readout, so the check uses each text's own font through the box
// height: a line box is the font's height).
bool fitsItsBox(const QString& text, const QRectF& box) {
  for (int px = 6; px <= 80; ++px) {
    QFont f;
    f.setPixelSize(px);
    const QFontMetricsF fm(f);
    if (fm.height() > box.height() + 0.5) break;
    // Some font of this line height draws it inside the box.
    QFont bold = f;
    bold.setBold(true);
    if (QFontMetricsF(bold).horizontalAdvance(text) <= box.width() + 0.5 || fm.horizontalAdvance(text) <= box.width() + 0.5)
      return true;
  }
  return false;
}

}  // namespace

// chain:16 and gpt:2 in presentation mode at the default size: every label,
// the readout, the lanes' headers and the legends are drawn whole.
TEST(LectureWindow, NoLabelIsCutShortInPresentationMode) {
  for (const char* model : {"chain:16", "gpt:2"}) {
    SCOPED_TRACE(model);
    Window t(model, {1920, 1080});
    t.w.setPresentation(true);
    // The offscreen screen (800x600) is smaller than a projector's: the same
    // mode in a 1920x1080 window.
    t.w.showNormal();
    t.w.resize(1920, 1080);
    QTest::qWait(50);
    ASSERT_GE(t.w.graphView()->width(), 1900);
    t.w.graphView()->fitToView();
    // The whole story: several steps, the peak among them.
    std::vector<std::size_t> steps{0, t.w.document()->stepCount() / 3, t.w.document()->stepCount() / 2};
    t.w.player()->toPeak();
    steps.push_back(t.w.document()->step());
    for (std::size_t s : steps) {
      t.w.document()->setStep(s);
      const GraphPaintReport r = paintedGraph(t.w);
      ASSERT_TRUE(r.detailed);
      expectWhole(r, 1.8, "graph");
      for (const auto& [text, box] : r.texts) EXPECT_TRUE(fitsItsBox(text, box)) << text.toStdString();
      // Labels are drawn: at least one per op above the forward row.
      std::size_t gradients = 0;
      for (const auto& [text, box] : r.texts) gradients += text.startsWith("G(") ? 1 : 0;
      if (QString(model) == "chain:16") EXPECT_EQ(gradients, std::size_t(t.w.document()->model().size() - 2));
    }
    // Side by side in presentation mode: the lanes' headers whole.
    t.w.setSideBySide(true);
    QTest::qWait(20);
    SideBySideView* v = t.w.sideBySideView();
    const std::vector<GraphPaintReport> reports =
        remat::testing::painted_lanes(*v, *t.w.document(), 1.8, t.w.document()->legendMask());
    ASSERT_EQ(reports.size(), 3u);
    for (const GraphPaintReport& r : reports) {
      expectWhole(r, 1.8, "lane");
      for (const auto& [text, box] : r.texts)
        for (const QString& line : text.split('\n'))
          EXPECT_TRUE(fitsItsBox(line, QRectF(box.topLeft(), QSizeF(box.width(), box.height() / (text.count('\n') + 1)))))
              << line.toStdString();
    }
    t.w.setPresentation(false);
  }
}

// The readout of 714 MiB and a long spec's name are whole in a lane, which
// was cut at "resident 714.43 M" in a 170 px column.
TEST(LectureWindow, LaneHeadersGrowForLongReadoutsAndNames) {
  GraphPaintOptions o;
  o.sideHeader = true;
  o.fontScale = 1.8;
  o.title = "offload+revolve:4";
  o.readout = "resident 714.43 MiB · peak 714.43 MiB";
  QFont bold;
  bold.setPixelSize(int(15 * 1.8));
  bold.setBold(true);
  EXPECT_GE(side_header_width(o), QFontMetricsF(bold).horizontalAdvance("resident 714.43 MiB") + 12);
  const QRectF area = graph_area(QRectF(0, 0, 1900, 300), o);
  EXPECT_GE(area.left(), QFontMetricsF(bold).horizontalAdvance("resident 714.43 MiB"));
}

// What the timeline's legend draws is every curve's entry whole: the label
// Qt drew (a wrapped one read with its lines joined) has every word of the
// series' name ("sqrt · peak 9 B"), none cut with "...".
void expectLegendWhole(const TimelineChart& c, const char* where) {
  QStringList wanted, drawn;
  for (const auto& list : {c.strategySeries(), c.hostSeries(), c.measuredSeries()})
    for (const QLineSeries* s : list) wanted.append(QString(s->name()).replace(" · ", " "));
  for (const QScatterSeries* s : c.stallMarkers()) wanted.append(s->name());
  for (QString text : c.drawnLegendLabels()) {
    EXPECT_FALSE(text.endsWith("...") || text.contains(QChar(0x2026))) << where << ": " << text.toStdString();
    drawn.append(text.replace(QChar::LineSeparator, ' ').replace('\n', ' ').replace(" · ", " "));
  }
  wanted.sort();
  drawn.sort();
  EXPECT_EQ(drawn.join(" | ").toStdString(), wanted.join(" | ").toStdString()) << where;
  EXPECT_FALSE(wanted.isEmpty()) << where;
}

// The timeline's legend never elides: below the plot when its entries fit in
// a row, else on the right, name over peak where one line would not fit.
TEST(LectureWindow, TimelineLegendEntriesAreWhole) {
  // The issue's case: "store-all · peak…", "every-k:4 · pe…" at 1400 px.
  Window t("gpt:2", {1400, 900}, {"store-all", "recompute-all", "sqrt", "every-k:4"});
  TimelineChart* c = t.w.timeline();
  ASSERT_EQ(c->strategySeries().size(), 4);
  auto check = [&](const char* where) {
    c->chart()->layout()->activate();
    QTest::qWait(20);
    // Below the plot only when the row fits whole (Qt cuts a row that does not).
    if (c->legendAlignment() == Qt::AlignBottom) EXPECT_LE(c->legendRowWidth(), c->width() - 16) << where;
    else EXPECT_GT(c->legendRowWidth(), c->width() - 16) << where;
    expectLegendWhole(*c, where);
  };
  check("window");
  EXPECT_EQ(c->legendAlignment(), Qt::AlignRight);  // four strategies with peaks do not fit in a row
  // Beside a plot of about 500 px, one entry a line would need more than Qt
  // gives the legend: name over peak, in the window's type size.
  EXPECT_LT(c->width(), 600);
  EXPECT_TRUE(c->drawnLegendLabels().front().contains('\n') || c->drawnLegendLabels().front().contains(QChar::LineSeparator));
  EXPECT_GE(c->chart()->legend()->font().pixelSize(), 10);
  // An offload adds its host curve and (with stalls) a long stall entry.
  t.w.document()->setSpecs({"store-all", "recompute-all", "sqrt", "every-k:4", "offload:4"});
  ASSERT_TRUE(QTest::qWaitFor([&] { return t.w.document()->computing() == 0; }, 60000));
  QTest::qWait(50);
  check("with offload");
  c->resize(2600, 400);
  QTest::qWait(20);
  check("wide");
  EXPECT_EQ(c->legendAlignment(), Qt::AlignBottom);
  c->resize(360, 300);
  QTest::qWait(20);
  check("narrow");
  // The tooltip over a curve gives its step and bytes, not the usage tip.
  c->resize(900, 400);
  QTest::qWait(20);
  const QPointF at = c->positionOf(0, 5);
  const QString hover = c->hoverText(at);
  EXPECT_TRUE(hover.contains(" · step ") && hover.contains("B")) << hover.toStdString();
}

// `remat export --timeline` at its default size (1200x600, type 1.5x) and a
// small one: every legend entry whole in the picture's chart.
TEST(LectureWindow, ExportedTimelineLegendIsWhole) {
  const Model m = load_model("gpt:2");
  const std::vector<StrategyRun> runs =
      simulate_strategies(m, {"store-all", "recompute-all", "sqrt", "every-k:4", "offload:4", "revolve:4"});
  for (const QSize size : {TimelineExport{}.size, QSize(640, 360), QSize(480, 300)}) {
    SCOPED_TRACE(size.width());
    TimelineExport o;
    o.size = size;
    o.title = "gpt:2";
    TimelineChart chart;
    prepare_timeline_chart(chart, runs, o);
    expectLegendWhole(chart, "export");
    // The entries stay readable: at most a fifth smaller than asked for.
    EXPECT_GE(chart.chart()->legend()->font().pixelSize(), int(11 * o.fontScale * 0.8)) << size.width();
  }
}

// Presentation mode fills the screen; Ctrl+= / Ctrl++ / Ctrl+- zoom.
TEST(LectureWindow, PresentationFillsTheScreenAndTheKeyboardZooms) {
  Window t("chain:16", {1920, 1080});
  t.w.setPresentation(true);
  t.w.showNormal();  // the offscreen screen (800x600) is smaller than a projector's
  t.w.resize(1920, 1080);
  QTest::qWait(50);
  ASSERT_GE(t.w.graphView()->width(), 1900);
  GraphView* g = t.w.graphView();
  g->fitToView();
  const Model& m = t.w.document()->model();
  const double span = g->nodePosition(m.size() - 2).x() - g->nodePosition(0).x();
  EXPECT_GT(span, 0.8 * g->width()) << span << " of " << g->width();  // was about 55 %
  const double before = g->sceneTransform().m11();
  QTest::keyClick(&t.w, Qt::Key_Equal, Qt::ControlModifier);
  EXPECT_NEAR(g->sceneTransform().m11(), before * 1.25, 1e-9);
  QTest::keyClick(&t.w, Qt::Key_Plus, Qt::ControlModifier);
  EXPECT_NEAR(g->sceneTransform().m11(), before * 1.25 * 1.25, 1e-9);
  QTest::keyClick(&t.w, Qt::Key_Minus, Qt::ControlModifier);
  EXPECT_NEAR(g->sceneTransform().m11(), before * 1.25, 1e-9);
  t.w.setPresentation(false);
  // Side by side in the normal window: the lanes fill their width.
  t.w.setSideBySide(true);
  QTest::qWait(20);
  SideBySideView* v = t.w.sideBySideView();
  const std::vector<GraphPaintReport> reports =
      remat::testing::painted_lanes(*v, *t.w.document(), 1, t.w.document()->legendMask());
  for (const GraphPaintReport& r : reports) {
    ASSERT_FALSE(r.nodes.empty());
    double lo = 1e9, hi = -1e9;
    for (const auto& n : r.nodes) lo = std::min(lo, n.second.x()), hi = std::max(hi, n.second.x());
    EXPECT_GT(hi - lo, 0.6 * v->width());
  }
}

// The own-length axis by default; the View menu and the chart's combo box agree.
TEST(LectureWindow, OwnLengthAxisByDefaultAndTheMenuAgrees) {
  QSettings().remove("timeline/ownLength");
  Window t("chain:16");
  EXPECT_EQ(t.w.timeline()->xMode(), TimelineChart::XMode::OwnLength);
  auto* box = t.w.findChild<QComboBox*>("xMode");
  QAction* own = t.w.findChild<QAction*>("ownLength");
  ASSERT_TRUE(box && own);
  EXPECT_TRUE(own->isChecked());
  box->setCurrentIndex(0);
  EXPECT_FALSE(own->isChecked());
  EXPECT_EQ(t.w.timeline()->xMode(), TimelineChart::XMode::Steps);
  own->trigger();
  EXPECT_EQ(box->currentIndex(), 1);
  EXPECT_EQ(t.w.timeline()->xMode(), TimelineChart::XMode::OwnLength);
  QSettings().remove("timeline/ownLength");
}

// The legend lists exactly the looks that occur in the compared strategies.
TEST(LectureWindow, TheLegendListsTheStatesThatOccur) {
  Window t("chain:16");
  StudioDocument* doc = t.w.document();
  LegendMask occurring = 0;
  for (int r = 0; r < doc->runCount(); ++r) {
    const auto p = doc->prepared(r);
    ASSERT_TRUE(p && p->index && p->facts);
    occurring |= legend_mask_by_steps(doc->model(), p->run.schedule, *p->index, *p->facts);
  }
  EXPECT_EQ(doc->legendMask(), occurring);
  // chain:16 has neither offload, compression, views nor simulate-only ops.
  for (NodeLook none : {NodeLook::ActOnHost, NodeLook::ActFetching, NodeLook::ActCompressed})
    EXPECT_FALSE(occurring & legend_bit(none));
  EXPECT_FALSE(occurring & kViewLegendBit);
  // The picture's legend entries are those states' labels, in order.
  const GraphPaintReport r = paintedGraph(t.w);
  std::vector<QString> all = legend_labels(kFullLegend), drawn;
  for (const auto& [text, box] : r.texts)
    if (std::find(all.begin(), all.end(), text) != all.end()) drawn.push_back(text);
  EXPECT_EQ(drawn, legend_labels(occurring));
  EXPECT_LT(drawn.size(), all.size());
}

// The one-pass mask equals painting every step, for every kind of look.
TEST(LectureWindow, LegendMaskMatchesEveryStepsStates) {
  const struct {
    const char* model;
    std::vector<std::string> specs;
  } cases[] = {{"chain:16", {"store-all", "recompute-all", "sqrt", "revolve:4", "offload:4", "sqrt+compress:bf16"}},
               {"gpt:2", {"store-all", "sqrt", "offload:4"}},
               {"mlp:8", {"every-k:3", "recompute-all"}}};
  for (const auto& c : cases) {
    auto m = std::make_shared<const Model>(load_model(c.model));
    for (const std::string& spec : c.specs) {
      const auto p = prepare_run(m, request_strategy(spec), InstructionLimit{});
      ASSERT_TRUE(p->run.ok()) << spec << ": " << p->run.error;
      EXPECT_EQ(p->legend, legend_mask_by_steps(*m, p->run.schedule, *p->index, *p->facts)) << c.model << " " << spec;
    }
  }
}

// Help's legend draws the graph's own symbols: "not computed yet" is hollow.
TEST(LectureWindow, HelpUsesTheRealSymbols) {
  const QImage hollow = legend_symbol(int(NodeLook::ActNotComputed), 9);
  const QImage filled = legend_symbol(int(NodeLook::ActResident), 9);
  const QPoint c(hollow.width() / 2, hollow.height() / 2);
  EXPECT_EQ(hollow.pixelColor(c).rgb(), QColor(Qt::white).rgb());
  EXPECT_EQ(filled.pixelColor(c).rgb(), node_style(NodeLook::ActResident).fill.rgb());
}

// Ctrl+F: the find box marks the op, zooms in far enough for labelled nodes
// and scrolls there; Enter goes to the next match; Peak follows the zoomed graph.
TEST(LectureWindow, FindSelectsAndScrollsToTheOp) {
  Window t("transformer:84", {1400, 900}, {"sqrt"});
  const Model& m = t.w.document()->model();
  int want = -1;
  for (int v = 0; v < m.size() && want < 0; ++v)
    if (m.op(v).name == "b60.mlp.up") want = v;
  ASSERT_GE(want, 0);
  GraphView* g = t.w.graphView();
  EXPECT_FALSE(g->showsOp(want) && paintedGraph(t.w).detailed);  // fitted: a strip
  QTest::keyClick(&t.w, Qt::Key_F, Qt::ControlModifier);
  EXPECT_TRUE(t.w.findBox()->hasFocus());
  QTest::keyClicks(t.w.findBox(), "b60.mlp.up");
  QTest::keyClick(t.w.findBox(), Qt::Key_Return);
  EXPECT_EQ(g->markedOp(), want);
  EXPECT_TRUE(g->showsOp(want));
  const GraphPaintReport r = paintedGraph(t.w);
  EXPECT_TRUE(r.detailed);
  // The marked node is ringed: vermillion pixels round its centre.
  const QImage img = g->grab().toImage();
  const QPointF c = g->nodePosition(want) * img.devicePixelRatio();
  int ring = 0;
  for (int dx = -40; dx <= 40; ++dx)
    for (int dy = -40; dy <= 40; ++dy) {
      const QPoint q = c.toPoint() + QPoint(dx, dy);
      if (img.rect().contains(q) && img.pixelColor(q) == okabe_ito::vermillion()) ++ring;
    }
  EXPECT_GT(ring, 20);
  // Enter again: the next "mlp.up" after b60's.
  t.w.findBox()->setText("mlp.up");
  const int next = t.w.findOp("mlp.up");
  EXPECT_GT(next, want);
  EXPECT_EQ(QString::fromStdString(m.op(next).name), "b61.mlp.up");
  // Peak: the zoomed graph scrolls to the running node.
  t.w.player()->toPeak();
  const NodeStates st = t.w.document()->nodeStates();
  ASSERT_TRUE(st.has_running);
  EXPECT_TRUE(g->showsOp(st.running.op));
}

// A model with ops that no kernel runs: badged in the graph, the reason in
// the tooltip and the legend, a short Run item, and Ctrl+R lists them.
TEST(LectureWindow, SimulateOnlyOpsAreMarkedAndCtrlRSaysWhy) {
  QTemporaryDir dir;
  const QString path = dir.filePath("rotary.json");
  std::ofstream(path.toStdString()) << R"({"format": "remat-model", "version": 1, "name": "rotary", "ops": [
    {"id":0,"name":"x","kind":"Input","shape":[4,8]},
    {"id":1,"name":"h0.q","kind":"Linear","inputs":[0],"shape":[4,8]},
    {"id":2,"name":"h0.rotary","kind":"Generic","inputs":[1],"shape":[4,8],"saved":[1]},
    {"id":3,"name":"h0.out","kind":"Linear","inputs":[2],"shape":[4,8]},
    {"id":4,"name":"h1.rotary","kind":"Generic","inputs":[3],"shape":[4,8],"saved":[3]},
    {"id":5,"name":"loss","kind":"MSELoss","inputs":[4]}]})";
  Window t("chain:16");
  ASSERT_TRUE(t.w.openModel(path, true));
  ASSERT_TRUE(QTest::qWaitFor([&] { return t.w.document()->computing() == 0; }, 60000));
  const Model& m = t.w.document()->model();
  const GraphPaintReport r = paintedGraph(t.w);
  EXPECT_EQ(r.simulateOnly, (std::vector<int>{2, 4}));
  EXPECT_TRUE(t.w.document()->legendMask() & kSimulateOnlyLegendBit);
  const QString tip = t.w.graphView()->toolTipAt(t.w.graphView()->nodePosition(2));
  EXPECT_TRUE(tip.contains("simulate-only")) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QString::fromStdString(exec_problem(m.op(2))).toHtmlEscaped())) << tip.toStdString();
  EXPECT_FALSE(t.w.graphView()->toolTipAt(t.w.graphView()->nodePosition(1)).contains("simulate-only"));
  // The Run item is short and disabled; Ctrl+R goes to the list instead.
  QAction* run = t.w.runAction();
  EXPECT_FALSE(run->isEnabled());
  EXPECT_EQ(run->text(), "Run (cannot: 2 ops cannot run)");
  EXPECT_TRUE(run->shortcut().isEmpty());
  QAction* why = t.w.whyNotRunAction();
  EXPECT_TRUE(why->isVisible() && why->isEnabled());
  EXPECT_EQ(why->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_R));
  const QString list = t.w.whyNotRunText();
  EXPECT_TRUE(list.contains("2 of the model's 6 ops cannot run")) << list.toStdString();
  EXPECT_TRUE(list.contains("h0.rotary (Generic)") && list.contains("h1.rotary (Generic)")) << list.toStdString();
  // A runnable model gives Ctrl+R back to Run.
  ASSERT_TRUE(t.w.openModel("chain:16:4", true));
  EXPECT_EQ(run->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_R));
  EXPECT_FALSE(why->isVisible());
}

// The Status column shows a real model's status whole ("ok, peak 714.43 MiB"
// was cut at "ok, peak 714.43 …").
TEST(LectureWindow, StatusColumnShowsTheWholeStatus) {
  Window t("gpt:2", {1400, 900}, {"store-all", "sqrt", "recompute-all"});
  QTreeWidget* tree = t.w.strategyPanel()->tree();
  for (const char* name : {"store-all", "sqrt", "recompute-all"}) {
    QTreeWidgetItem* it = t.w.strategyPanel()->row(name);
    ASSERT_NE(it, nullptr);
    const QString text = it->text(2);
    ASSERT_TRUE(text.startsWith("ok, peak")) << text.toStdString();
    EXPECT_LE(tree->fontMetrics().horizontalAdvance(text) + 8, tree->columnWidth(2)) << text.toStdString();
  }
}


// The charts beside the graph draw every text whole, as Qt drew it: the
// whole-step bar's strategy names (cut at "store-...", "reco..." at 1400 px),
// the axis titles and labels of the timeline, the bars and the trade-off.
TEST(LectureWindow, ChartNamesAndAxisTitlesAreWhole) {
  const QStringList specs{"store-all", "recompute-all", "sqrt", "every-k:4", "sqrt+compress:bf16"};
  for (QSize size : {QSize(1400, 900), QSize(1920, 1080)}) {
    SCOPED_TRACE(size.width());
    Window t("gpt:2", size, specs);
    QTest::qWait(50);
    auto expectWhole = [&](const QStringList& drawn, const char* where) {
      EXPECT_FALSE(drawn.isEmpty()) << where;
      for (const QString& text : drawn) EXPECT_FALSE(is_cut(text)) << where << ": " << text.toStdString();
    };
    StepMemoryBar* bar = t.w.stepMemory();
    const QStringList barTexts = bar->drawnTexts();
    expectWhole(barTexts, "whole-step bar");
    for (const QString& name : specs) EXPECT_TRUE(barTexts.contains(name)) << name.toStdString();
    // The y title is whole, or its unit alone where the chart is too low for it.
    EXPECT_TRUE(barTexts.contains("step memory (GiB)") || barTexts.contains("GiB"));
    bar->setActivationsOnly(true);
    QTest::qWait(20);
    expectWhole(bar->drawnTexts(), "activations only");
    bar->setActivationsOnly(false);
    // Under the side-by-side lanes the timeline tab is low: the bars keep
    // their ticks and title whole (they were "..." at 1400x900).
    t.w.setSideBySide(true);
    QTest::qWait(50);
    expectWhole(bar->drawnTexts(), "bars under the lanes");
    t.w.setSideBySide(false);
    QTest::qWait(20);
    const QStringList timeline = drawn_texts(t.w.timeline()->chart());
    expectWhole(timeline, "timeline");
    EXPECT_TRUE(timeline.contains("resident (MiB)") || timeline.contains("MiB"));
    // A low timeline keeps its axis titles whole (in their short forms).
    t.w.timeline()->resize(t.w.timeline()->width(), 180);
    QTest::qWait(20);
    // (Once the chart has settled: the resize lays it out over a few events.)
    // The wait's result is not asserted: expectWhole below names what is cut.
    (void)QTest::qWaitFor([&] {
      const QStringList d = drawn_texts(t.w.timeline()->chart());
      return std::none_of(d.begin(), d.end(), is_cut);
    }, 2000);
    expectWhole(drawn_texts(t.w.timeline()->chart()), "low timeline");
    if (size.width() != 1400) continue;  // the sweep takes seconds: at the narrower size only
    auto* tradeoff = t.w.tradeoffTab();
    t.w.tabs()->setCurrentWidget(tradeoff);  // starts the sweep in a worker
    ASSERT_TRUE(QTest::qWaitFor([&] { return !tradeoff->namedSpecs().empty(); }, 60000));
    QTest::qWait(50);
    expectWhole(drawn_texts(tradeoff->chart()), "trade-off");
  }
}

// Measured beside predicted after a real Run (chain:16:4 on the CPU): the
// Comparison header groups its columns as Predicted | Measured with time and
// gradient match in view at 1400 px, the time is the median of the timed
// repeats with their spread, and the measured curves have their own look.
TEST(LectureWindow, MeasuredBesidePredictedAfterARun) {
  Window t("chain:16:4", {1400, 900});
  // The header: two bands, side by side, each over exactly its own columns.
  GroupedHeader* header = t.comparisonAfterRun();
  ASSERT_NE(header, nullptr);
  ComparisonModel* table = t.w.comparison();
  auto* view = qobject_cast<QTableView*>(header->parentWidget());
  ASSERT_NE(view, nullptr);
  ASSERT_EQ(header->groups().size(), 2u);
  EXPECT_TRUE(header->groups()[0].name.startsWith("Predicted"));
  EXPECT_TRUE(header->groups()[1].name.startsWith("Measured"));
  auto span = [&](const GroupedHeader::Group& g) {
    int lo = INT_MAX, hi = INT_MIN;
    for (int s : g.sections) {
      lo = std::min(lo, header->visualIndex(s));
      hi = std::max(hi, header->visualIndex(s));
    }
    return std::pair(lo, hi);
  };
  const auto [plo, phi] = span(header->groups()[0]);
  const auto [mlo, mhi] = span(header->groups()[1]);
  EXPECT_EQ(phi - plo + 1, int(header->groups()[0].sections.size()));  // adjacent
  EXPECT_EQ(mhi - mlo + 1, int(header->groups()[1].sections.size()));
  EXPECT_LT(phi, mlo);  // predicted, then measured
  const QRect pBand = header->groupRect(0), mBand = header->groupRect(1);
  ASSERT_FALSE(pBand.isEmpty());
  EXPECT_EQ(pBand.left(), header->sectionViewportPosition(header->logicalIndex(plo)));
  EXPECT_LE(pBand.right(), mBand.left());
  // The bands are painted with their names: the band's pixels are not the
  // plain header's alone (text is darker than any header background).
  const QImage img = header->grab().toImage();
  auto darkIn = [&](const QRect& r) {
    int dark = 0;
    for (int x = r.left(); x <= std::min(r.right(), img.width() - 1); ++x)
      for (int y = r.top(); y <= r.bottom(); ++y)
        if (qGray(img.pixel(x, y)) < 100) ++dark;
    return dark;
  };
  EXPECT_GT(darkIn(pBand), 20);
  if (mBand.left() < img.width()) EXPECT_GT(darkIn(mBand.intersected(img.rect())), 20);
  // Time and match come first in the measured group and are in view at 1400 px.
  EXPECT_EQ(header->visualIndex(ComparisonModel::Time), header->visualIndex(ComparisonModel::MeasuredPeak) + 1);
  EXPECT_EQ(header->visualIndex(ComparisonModel::Match), header->visualIndex(ComparisonModel::Time) + 1);
  // (chain:16:4 does not offload: the host peak and stall columns are hidden.)
  EXPECT_TRUE(header->isSectionHidden(ComparisonModel::HostPeak) && header->isSectionHidden(ComparisonModel::Stall));
  for (int c : {int(ComparisonModel::Time), int(ComparisonModel::Match)})
    EXPECT_LE(header->sectionViewportPosition(c) + header->sectionSize(c), view->viewport()->width()) << c;

  // The time: the median of the repeats, with the fastest, the slowest and
  // how many, each row's cell shown whole.
  for (int row = 0; row < table->rowCount(); ++row) {
    const std::string spec = t.w.document()->runs()[std::size_t(row)].spec;
    const MeasuredRun& m = table->measured().at(spec);
    ASSERT_GE(m.run_ms.size(), 2u) << spec;
    const auto [lo, hi] = std::minmax_element(m.run_ms.begin(), m.run_ms.end());
    EXPECT_LE(*lo, m.time_ms);
    EXPECT_GE(*hi, m.time_ms);
    const QString cell = table->data(table->index(row, ComparisonModel::Time)).toString();
    EXPECT_EQ(cell, QString("%1 ms (%2 to %3, %4 runs)")
                        .arg(m.time_ms, 0, 'f', 2)
                        .arg(*lo, 0, 'f', 2)
                        .arg(*hi, 0, 'f', 2)
                        .arg(m.run_ms.size()));
    EXPECT_LE(view->fontMetrics().horizontalAdvance(cell), header->sectionSize(ComparisonModel::Time)) << cell.toStdString();
  }

  // The measured curves: one per strategy, a pen unlike its predicted
  // curve's (thinner, dotted, darker), rings along it, and in the picture.
  TimelineChart* c = t.w.timeline();
  t.w.tabs()->setCurrentIndex(0);
  QTest::qWait(50);
  ASSERT_EQ(c->measuredSeries().size(), c->strategySeries().size());
  ASSERT_EQ(c->measuredMarkers().size(), c->measuredSeries().size());
  for (int i = 0; i < c->measuredSeries().size(); ++i) {
    const QPen measured = c->measuredSeries()[i]->pen();
    QPen predicted;
    for (const QLineSeries* s : c->strategySeries())
      if (s->name().section(" · ", 0, 0) + " (measured)" == c->measuredSeries()[i]->name()) predicted = s->pen();
    ASSERT_NE(predicted.style(), Qt::NoPen) << c->measuredSeries()[i]->name().toStdString();
    EXPECT_NE(measured.color(), predicted.color());
    EXPECT_EQ(measured.style(), Qt::DotLine);
    EXPECT_LT(measured.widthF(), predicted.widthF());
    EXPECT_FALSE(c->measuredMarkers()[i]->points().isEmpty());
    // The measured look is drawn: its colour (within antialiasing's blend)
    // is in the grabbed chart.
    const QImage chart = c->grab().toImage();
    const QColor want = measured.color();
    int found = 0;
    for (int y = 0; y < chart.height(); ++y)
      for (int x = 0; x < chart.width(); ++x) {
        const QColor got = chart.pixelColor(x, y);
        found += std::abs(got.red() - want.red()) + std::abs(got.green() - want.green()) + std::abs(got.blue() - want.blue()) < 24;
      }
    EXPECT_GT(found, 10) << c->measuredSeries()[i]->name().toStdString();
  }
  expectLegendWhole(*c, "with measured curves");
}

// A strategy that cannot apply says why in the Status column, wrapped whole
// ("no attention core (a MatMul, ...) in chain:16" was cut after "(a").
// With an offloading strategy compared, the host peak and stall columns
// show, last, under a band of their own, and the measured time and gradient
// match still stay in view at 1400 px.
TEST(LectureWindow, MeasuredTimeAndMatchStayInViewWithOffload) {
  Window t("chain:16:4", {1400, 900}, {"store-all", "sqrt", "offload"});
  GroupedHeader* header = t.comparisonAfterRun();
  ASSERT_NE(header, nullptr);
  auto* view = qobject_cast<QTableView*>(header->parentWidget());
  ASSERT_NE(view, nullptr);
  EXPECT_FALSE(header->isSectionHidden(ComparisonModel::HostPeak));
  EXPECT_FALSE(header->isSectionHidden(ComparisonModel::Stall));
  ASSERT_EQ(header->groups().size(), 3u);
  EXPECT_EQ(header->groups()[2].sections, (std::vector<int>{ComparisonModel::HostPeak, ComparisonModel::Stall}));
  EXPECT_EQ(header->visualIndex(ComparisonModel::Stall), ComparisonModel::ColumnCount - 1);
  EXPECT_EQ(header->visualIndex(ComparisonModel::HostPeak), ComparisonModel::ColumnCount - 2);
  for (int c : {int(ComparisonModel::Time), int(ComparisonModel::Match)}) {
    EXPECT_GE(header->sectionViewportPosition(c), 0) << c;
    EXPECT_LE(header->sectionViewportPosition(c) + header->sectionSize(c), view->viewport()->width()) << c;
  }
}

TEST(LectureWindow, StatusColumnShowsWhyAStrategyCannotApplyWhole) {
  for (QSize size : {QSize(1400, 900), QSize(1920, 1080)}) {
    Window t("chain:16", size);
    QTest::qWait(50);
    QTreeWidget* tree = t.w.strategyPanel()->tree();
    int checked = 0;
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
      QTreeWidgetItem* it = tree->topLevelItem(i);
      const QString text = it->text(2);
      if (text.isEmpty()) continue;
      const QRect cell = tree->visualRect(tree->indexFromItem(it, 2));
      const QRect need = tree->fontMetrics().boundingRect(QRect(0, 0, cell.width() - 8, 10000), Qt::TextWordWrap, text);
      EXPECT_LE(need.height(), cell.height()) << size.width() << ": " << text.toStdString();
      ++checked;
    }
    EXPECT_GE(checked, 5);
  }
}

// The exported graph's caption is whole on a narrow picture: wrapped, no "…"
// (it was cut to the picture's width). Read from the SVG's text.
TEST(LectureWindow, ExportedGraphCaptionIsWhole) {
  const Model m = load_model("gpt:2");
  const std::vector<StrategyRun> runs = simulate_strategies(m, {"sqrt"});
  QTemporaryDir dir;
  const std::size_t step = runs[0].schedule.code.size() * 2 / 3;  // in the backward: a long caption
  const std::string path = dir.filePath("g.svg").toStdString();
  export_graph(m, runs[0], step, path, QSize(480, 360));
  QFile f(QString::fromStdString(path));
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const QString svg = QString::fromUtf8(f.readAll());
  QString all;
  static const QRegularExpression text("<text[^>]*>([^<]*)</text>");
  for (auto it = text.globalMatch(svg); it.hasNext();) {
    QString t = it.next().captured(1);
    t.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&#x2026;", QChar(0x2026));
    EXPECT_FALSE(is_cut(t)) << t.toStdString();
    all += t + ' ';
  }
  const QString head = QString("sqrt, step %1 of %2:").arg(step + 1).arg(runs[0].schedule.code.size());
  EXPECT_TRUE(all.simplified().contains(head)) << all.toStdString();
  // The caption's last word is drawn too (the cut one stopped far before it).
  EXPECT_GT(all.simplified().length(), head.length() + 30);
}
