// Offload in the window: an offloaded activation is drawn as "on host", never
// as freed, and as fetched when it comes back; the timeline carries the host
// bytes as a second curve and the time model's stalls as markers.
#include <QLineSeries>
#include <QScatterSeries>
#include <QTest>
#include <algorithm>
#include <gtest/gtest.h>
#include <limits>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/strategies/registry.h"
#include "core/sim/time_model.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/node_states.h"
#include "widgets/views/node_style.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/timeline_chart.h"
#include "tests/widgets/schedule_case.h"

using namespace remat;

namespace {
// chain:8: x (op 0), a1..a7, the loss a8; one byte each. every-k:2 checkpoints
// x, a2, a4, a6; the last segment a7, a8 is kept from the forward pass and
// bwd a7 reads a6 at once, so offload:2 moves x, a2, a4 (docs/strategies.md):
// x after fwd a1 (its last forward read), a2 after fwd a3, a4 after fwd a5.
// In the order the backward first reads them (a4 by the recompute of a5, a2
// by that of a3, x by that of a1), a4 comes back when the backward starts
// (just before bwd loss), a2 just before the recompute of a5, x just before
// the recompute of a3.
struct Chain8 : ScheduleCase {
  Chain8() : ScheduleCase("chain:8", "offload:2") {}
};

std::vector<int> opsIn(const NodeStates& s, FwdState state) {
  std::vector<int> out;
  for (std::size_t v = 0; v < s.fwd.size(); ++v)
    if (s.fwd[v] == state) out.push_back(int(v));
  return out;
}
}  // namespace

TEST(OffloadView, Chain8OffloadTwoNodeStatesByHand) {
  Chain8 c;
  const std::size_t offX = c.first({InstrKind::Offload, 0}), offA2 = c.first({InstrKind::Offload, 2}),
                    offA4 = c.first({InstrKind::Offload, 4});
  const std::size_t getA4 = c.first({InstrKind::Fetch, 4}), getA2 = c.first({InstrKind::Fetch, 2}),
                    getX = c.first({InstrKind::Fetch, 0});
  const std::size_t n = c.schedule.code.size();
  for (std::size_t i : {offX, offA2, offA4, getA4, getA2, getX}) ASSERT_LT(i, n);
  EXPECT_EQ(c.first({InstrKind::Offload, 6}), n);  // a6 stays: bwd a7 reads it at once
  // Where the schedule puts them (the rule above).
  EXPECT_EQ(c.schedule.code[offX - 1], (Instr{InstrKind::Fwd, 1}));
  EXPECT_EQ(c.schedule.code[offA2 - 1], (Instr{InstrKind::Fwd, 3}));
  EXPECT_EQ(c.schedule.code[offA4 - 1], (Instr{InstrKind::Fwd, 5}));
  EXPECT_EQ(c.schedule.code[getA4 + 1], (Instr{InstrKind::Bwd, 8}));
  const std::size_t recompute5 = c.first({InstrKind::Fwd, 5}, c.first({InstrKind::Fwd, 5}) + 1);
  const std::size_t recompute3 = c.first({InstrKind::Fwd, 3}, c.first({InstrKind::Fwd, 3}) + 1);
  EXPECT_EQ(getA2 + 1, recompute5);
  EXPECT_EQ(getX + 1, recompute3);

  // At its offload the tensor is on the host, not freed.
  EXPECT_EQ(c.states(offX).fwd[0], FwdState::OnHost);
  EXPECT_EQ(activation_look(c.states(offX), 0), NodeLook::ActOnHost);
  // At the end of the forward pass (the step before a4's fetch) all three
  // wait on the host; a6 and a7 are live; the rest freed
  const NodeStates end = c.states(getA4 - 1);
  EXPECT_EQ(opsIn(end, FwdState::OnHost), (std::vector<int>{0, 2, 4}));
  // (the loss too: MSE's backward reads only its input, so A(loss) goes first).
  EXPECT_EQ(opsIn(end, FwdState::Freed), (std::vector<int>{1, 3, 5, 8}));
  EXPECT_EQ(opsIn(end, FwdState::Live), (std::vector<int>{6, 7}));
  // The fetch: a4 is back on the device while the copy lands, then resident
  // (a checkpoint, ringed) when bwd loss runs; x and a2 still on the host.
  const NodeStates fetching = c.states(getA4);
  EXPECT_EQ(fetching.fwd[4], FwdState::Fetching);
  EXPECT_EQ(activation_look(fetching, 4), NodeLook::ActFetching);
  const NodeStates bwdLoss = c.states(getA4 + 1);
  EXPECT_EQ(bwdLoss.fwd[4], FwdState::Live);
  EXPECT_EQ(activation_look(bwdLoss, 4), NodeLook::ActCheckpoint);
  EXPECT_EQ(opsIn(bwdLoss, FwdState::OnHost), (std::vector<int>{0, 2}));
  // a2 and x come back one after the other; at the recompute of a3 nothing is away.
  EXPECT_EQ(c.states(getA2).fwd[2], FwdState::Fetching);
  EXPECT_EQ(opsIn(c.states(getA2), FwdState::OnHost), (std::vector<int>{0}));
  EXPECT_EQ(c.states(getX).fwd[0], FwdState::Fetching);
  EXPECT_TRUE(opsIn(c.states(recompute3), FwdState::OnHost).empty());
  EXPECT_EQ(c.states(recompute3).fwd[0], FwdState::Live);
}

TEST(OffloadView, OnHostAtEveryStepIsWhatTheHostHolds) {
  // Every step of a larger case: the ops drawn on the host hold exactly the
  // simulator's host bytes, and none of them is resident on the device.
  const Model m = load_model("chain:30:16");
  const auto runs = simulate_strategies(m, {"offload+sqrt"});
  const StrategyRun& r = runs.front();
  ASSERT_TRUE(r.ok());
  ASSERT_GT(r.sim.transfers, 0);
  const ResidentIndex index(m, r.schedule);
  const ScheduleFacts facts(m, r.schedule);
  for (std::size_t t = 0; t < r.schedule.code.size(); ++t) {
    const NodeStates s = node_states_at(m, r.schedule, index, facts, t);
    uint64_t host = 0;
    for (int v : opsIn(s, FwdState::OnHost)) host += m.op(v).bytes;
    EXPECT_EQ(host, r.sim.host_timeline[t]) << "step " << t;
    const std::vector<uint8_t> act = index.activations_at(t);
    for (int v : opsIn(s, FwdState::OnHost)) EXPECT_EQ(act[std::size_t(v)], 0) << "step " << t << " op " << v;
  }
}

TEST(OffloadView, HostSeriesIsTheSimulatorsHostTimeline) {
  const Model m = load_model("chain:8");
  const auto runs = simulate_strategies(m, {"sqrt", "offload:2"});
  TimelineChart chart;
  chart.resize(900, 400);
  chart.setRuns(runs);
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  // Only the strategy that offloads has a host curve.
  ASSERT_EQ(chart.hostSeries().size(), 1);
  const QLineSeries* host = chart.hostSeries().front();
  // Three one-byte tensors away at once at the end of the forward pass.
  EXPECT_EQ(runs[1].sim.peak_host_bytes, 3u);
  EXPECT_EQ(host->name(), "offload:2 (host) · peak 3 B");
  EXPECT_EQ(host->pen().style(), Qt::DashLine);
  EXPECT_EQ(host->pen().color(), chart.strategySeries()[1]->pen().color());
  // A short schedule fits the plot: one point per instruction, (step, bytes).
  const std::vector<uint64_t>& tl = runs[1].sim.host_timeline;
  ASSERT_EQ(host->count(), int(tl.size()));
  for (int i = 0; i < host->count(); ++i) {
    EXPECT_DOUBLE_EQ(host->at(i).x(), double(i));
    EXPECT_DOUBLE_EQ(host->at(i).y(), double(tl[std::size_t(i)]) / chart.unitBytes());
  }
}

TEST(OffloadView, HoverOnTheHostCurveNamesIt) {
  const Model m = load_model("chain:8");
  const auto runs = simulate_strategies(m, {"offload:2"});
  TimelineChart chart;
  chart.resize(900, 400);
  chart.setRuns(runs);
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  // A step where the host holds 3 B and the device 2 B or more away from it.
  const std::vector<uint64_t>& host = runs[0].sim.host_timeline;
  const std::vector<uint64_t>& dev = runs[0].sim.timeline;
  std::size_t step = host.size();
  for (std::size_t t = 0; t < host.size() && step == host.size(); ++t)
    if (host[t] == 3 && (dev[t] >= 5 || dev[t] <= 1)) step = t;
  ASSERT_LT(step, host.size());
  const QLineSeries* s = chart.hostSeries().front();
  const QPointF at = chart.mapFromScene(chart.chart()->mapToScene(
      chart.chart()->mapToPosition(QPointF(double(step), double(host[step]) / chart.unitBytes()), const_cast<QLineSeries*>(s))));
  EXPECT_EQ(chart.hoverText(at), QString("offload:2 (host) · step %1 · 3 B").arg(step + 1));
}

TEST(OffloadView, StallsAreMarkedOnTheDeviceCurveAndNamed) {
  // An instant device and a slow link: every fetch the backward waits for stalls.
  const Model m = load_model("chain:8");
  const auto runs = simulate_strategies(m, {"offload:2"});
  const TimeModel slow{.device_flops = std::numeric_limits<double>::infinity(), .link_bandwidth = 1.0};
  std::vector<Stall> stalls;
  const StepTime t = predict_step_time(m, runs[0].schedule, slow, &stalls);
  ASSERT_FALSE(stalls.empty());
  TimelineChart chart;
  chart.resize(900, 400);
  chart.setRuns(runs);
  chart.setStalls({{"offload:2", stalls}});
  ASSERT_EQ(chart.stallMarkers().size(), 1);
  const QScatterSeries* marks = chart.stallMarkers().front();
  EXPECT_EQ(marks->name(), QString("offload:2 stalls %1 over %2 step(s)")
                               .arg(QString::fromStdString(format_seconds(t.stall_s)))
                               .arg(stalls.size()));
  ASSERT_EQ(marks->count(), int(stalls.size()));
  for (int i = 0; i < marks->count(); ++i) {
    const std::size_t step = stalls[std::size_t(i)].instruction;
    EXPECT_DOUBLE_EQ(marks->at(i).x(), double(step));
    EXPECT_DOUBLE_EQ(marks->at(i).y(), double(runs[0].sim.timeline[step]) / chart.unitBytes());
  }
  // A new set of runs drops them.
  chart.setRuns(runs);
  EXPECT_TRUE(chart.stallMarkers().isEmpty());
}

TEST(OffloadView, TheDocumentPredictsStallsForOffloadOnlyAndTheCaptionSaysSo) {
  StudioDocument doc;
  doc.loadModel("chain:8");
  doc.setSpecs({"sqrt", "offload:2"});
  ASSERT_EQ(doc.runCount(), 2);
  // Only the run that moves tensors gets the time model (a second pass).
  EXPECT_FALSE(doc.prepared(0)->run.sim.time.predicted);
  ASSERT_TRUE(doc.prepared(1)->run.sim.time.predicted);
  std::vector<Stall> expected;
  const StepTime t = predict_step_time(doc.model(), doc.prepared(1)->run.schedule, TimeModel{}, &expected);
  EXPECT_DOUBLE_EQ(doc.prepared(1)->run.sim.time.stall_s, t.stall_s);
  // One-byte tensors over 25 GB/s take longer than the chain's few FLOPs at
  // 50 TFLOP/s: the fetches stall.
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(doc.prepared(1)->stalls.size(), expected.size());
  doc.setCurrentRun(1);
  for (const Stall& s : expected) {
    doc.setStep(s.instruction);
    EXPECT_TRUE(doc.caption().contains(
        QString::fromStdString("stalls " + format_seconds(s.seconds) + " waiting for a fetch")))
        << doc.caption().toStdString();
  }
  // A step that does not wait says nothing of it.
  doc.setStep(0);
  EXPECT_FALSE(doc.caption().contains("stalls"));
  // The Comparison tab: the host peak and the stall of the strategy that offloads only.
  ComparisonModel table;
  table.setRuns(&doc.model(), doc.runs());
  EXPECT_FALSE(table.data(table.index(0, ComparisonModel::HostPeak)).isValid());
  EXPECT_FALSE(table.data(table.index(0, ComparisonModel::Stall)).isValid());
  EXPECT_EQ(table.data(table.index(1, ComparisonModel::HostPeak)).toString(), "3 B");  // x, a2, a4
  EXPECT_EQ(table.data(table.index(1, ComparisonModel::Stall), Qt::EditRole).toDouble(), t.stall_s);
  EXPECT_EQ(table.data(table.index(1, ComparisonModel::Stall)).toString(),
            QString::fromStdString(format_seconds(t.stall_s) + " of " + format_seconds(t.step_s)));
}
