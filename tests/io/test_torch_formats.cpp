// The PyTorch formats: pickle (both ways), the simulated allocation trace
// against simulate()'s timeline, the snapshot's layout, reading a recorded
// snapshot's curve, the Chrome trace's shape.
#include <gtest/gtest.h>

#include <map>

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/pickle.h"
#include "core/io/snapshot_compare.h"
#include "core/io/torch_snapshot.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/strategies/strategy.h"

namespace remat {
namespace {

using nlohmann::json;

TEST(Pickle, RoundTripsPlainData) {
  const json v = {{"segments", json::array({{{"address", 0x7f0000000000ULL}, {"total_size", 1u << 21}, {"neg", -5},
                                              {"i32min", INT32_MIN}, {"big_neg", -(int64_t{1} << 40)}}})},
                  {"device_traces", json::array({json::array({{{"action", "alloc"}, {"size", 255}, {"f", 0.1}}})})},
                  {"long", std::string(300, 'x')}, {"utf8", "fwd Öl (recompute)"}, {"t", true}, {"f", false},
                  {"n", nullptr}, {"u64", UINT64_MAX}, {"empty", json::object()}, {"list", json::array()}};
  const std::string p = to_pickle(v);
  ASSERT_EQ(static_cast<uint8_t>(p[0]), 0x80);
  ASSERT_EQ(p[1], 4);
  // UINT64_MAX does not fit int64: written as a 9-byte LONG1, refused on reading.
  EXPECT_THROW((void)from_pickle(to_pickle(json{{"u64", UINT64_MAX}}), "t"), InputError);
  json w = v;
  w.erase("u64");
  EXPECT_EQ(from_pickle(to_pickle(w), "t"), w);
}

TEST(Pickle, ListsOverAThousandItemsAreBatched) {
  json v = json::array();
  for (int i = 0; i < 2500; ++i) v.push_back(i * 1000);
  json d = json::object();
  for (int i = 0; i < 1500; ++i) d["k" + std::to_string(i)] = i;
  EXPECT_EQ(from_pickle(to_pickle(v), "t"), v);
  EXPECT_EQ(from_pickle(to_pickle(d), "t"), d);
}

TEST(Pickle, MemoRefersToTheLiveObject) {
  // pickle.dumps({'a': f, 'b': f}, protocol=4) with f = [1], as Python 3.11
  // writes it: a FRAME, the list memoized empty then filled, 'b' by BINGET.
  const char bytes[] = "\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x4b"
                       "\x01\x61\x8c\x01\x62\x94\x68\x02\x75\x2e";
  const std::string p(bytes, sizeof bytes - 1);
  EXPECT_EQ(from_pickle(p, "t"), (json{{"a", {1}}, {"b", {1}}}));
}

TEST(Pickle, RefusesObjectsAndBrokenFiles) {
  // GLOBAL 'os\nsystem\n' then REDUCE: the classic code execution.
  const std::string evil = "\x80\x02" "cos\nsystem\n(S'true'\ntR.";
  try {
    (void)from_pickle(evil, "snapshot 'x'");
    FAIL() << "accepted a GLOBAL";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Python object"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte 2"), std::string::npos) << e.what();
  }
  const std::string whole = to_pickle(json{{"a", std::string(100, 'y')}});
  EXPECT_THROW((void)from_pickle(whole.substr(0, whole.size() - 20), "t"), InputError);  // cut short
  EXPECT_THROW((void)from_pickle("\x80\x04", "t"), InputError);                          // no STOP
  EXPECT_THROW((void)from_pickle("\x80\x04h\x05.", "t"), InputError);                    // memo never stored
}

// Replays the events: after each instruction's events, the bytes allocated
// must be simulate()'s timeline at that instruction.
void expect_trace_matches_timeline(const std::string& spec, const std::string& strategy) {
  const Model m = make_preset(spec);
  const auto run = simulate_strategies(m, {strategy}).front();
  ASSERT_TRUE(run.ok()) << run.error;
  const auto events = simulated_allocations(m, run.schedule);
  std::map<uint64_t, uint64_t> live;
  uint64_t bytes = 0;
  std::size_t e = 0;
  for (; e < events.size() && events[e].instruction == AllocEvent::kBeforeStep; ++e) {
    bytes += events[e].bytes;
    live[events[e].handle] = events[e].bytes;
  }
  for (std::size_t i = 0; i < run.schedule.code.size(); ++i) {
    for (; e < events.size() && events[e].instruction == i; ++e) {
      if (events[e].alloc) {
        ASSERT_FALSE(live.count(events[e].handle)) << spec << " " << strategy << ": allocated twice at " << i;
        live[events[e].handle] = events[e].bytes;
        bytes += events[e].bytes;
      } else {
        ASSERT_TRUE(live.count(events[e].handle)) << spec << " " << strategy << ": freed unallocated at " << i;
        ASSERT_EQ(live[events[e].handle], events[e].bytes);
        live.erase(events[e].handle);
        bytes -= events[e].bytes;
      }
    }
    ASSERT_EQ(bytes, run.sim.timeline[i]) << spec << " " << strategy << " at instruction " << i << " ("
                                          << to_string(run.schedule.code[i], m) << ")";
  }
  EXPECT_EQ(e, events.size());
}

TEST(SimulatedAllocations, EqualTheTimelineEveryInstruction) {
  for (const char* spec : {"chain:16", "mlp:4:64:8", "transformer:2:32:8:2", "gpt:1:32:2:16:1:f32:40", "resnet:10:8:32:2"})
    for (const char* strategy : {"store-all", "recompute-all", "sqrt"}) expect_trace_matches_timeline(spec, strategy);
}

TEST(SimulatedAllocations, LabelsSayWhatAndWhen) {
  const Model m = make_preset("chain:4");
  const auto run = simulate_strategies(m, {"recompute-all"}).front();
  const auto events = simulated_allocations(m, run.schedule);
  int recomputes = 0, grads = 0;
  for (const auto& e : events) {
    recomputes += e.label.find("(recompute)") != std::string::npos;
    grads += e.label.rfind("grad ", 0) == 0;
  }
  EXPECT_EQ(recomputes, run.sim.recompute_steps);  // chain: no views, no aux
  EXPECT_EQ(events.front().label, "input " + m.op(0).name);
  EXPECT_EQ(grads, m.size() - 2);  // every op but the input and the loss has a gradient tensor
}

TEST(TorchSnapshot, BlocksTileTheSegmentAndLiveBlocksNeverOverlap) {
  const Model m = make_preset("gpt:1:32:2:16:1:f32:40");
  const auto run = simulate_strategies(m, {"sqrt"}).front();
  const json s = make_torch_snapshot(simulated_allocations(m, run.schedule), "sqrt");
  const json& seg = s["segments"][0];
  uint64_t addr = seg["address"];
  for (const auto& b : seg["blocks"]) {
    EXPECT_EQ(b["address"].get<uint64_t>(), addr);
    EXPECT_EQ(b["size"].get<uint64_t>() % 512, 0u);
    addr += b["size"].get<uint64_t>();
  }
  EXPECT_EQ(addr, seg["address"].get<uint64_t>() + seg["total_size"].get<uint64_t>());
  std::map<uint64_t, uint64_t> live;  // addr -> end
  uint64_t active = 0, peak = 0;
  for (const auto& e : s["device_traces"][0]) {
    if (e["action"] == "alloc") {
      const uint64_t a = e["addr"], end = a + (e["size"].get<uint64_t>() + 511) / 512 * 512;
      auto next = live.lower_bound(a);
      ASSERT_TRUE(next == live.end() || next->first >= end);
      ASSERT_TRUE(next == live.begin() || std::prev(next)->second <= a);
      ASSERT_LE(end, seg["address"].get<uint64_t>() + seg["total_size"].get<uint64_t>());
      live[a] = end;
      active += e["size"].get<uint64_t>();
      peak = std::max(peak, active);
    } else if (e["action"] == "free_completed") {
      ASSERT_EQ(live.erase(e["addr"].get<uint64_t>()), 1u);
      active -= e["size"].get<uint64_t>();
    }
  }
  EXPECT_EQ(peak, run.sim.peak_bytes);
}

TEST(SnapshotCurve, ReadsWhatWasAllocatedBeforeAndTheBackwardPass) {
  const json bwd = json::array({{{"filename", "torch/autograd/__init__.py"}, {"line", 1}, {"name", "backward"}}});
  const json fwd = json::array({{{"filename", "train.py"}, {"line", 1}, {"name", "forward"}}});
  const json s = {
      {"segments", json::array({{{"device", 0}, {"address", 0}, {"total_size", 8192}, {"stream", 0},
                                 {"blocks", json::array({{{"size", 1024}, {"requested_size", 1000}, {"state", "active_allocated"}},
                                                         {{"size", 7168}, {"state", "inactive"}}})}}})},
      {"device_traces",
       json::array({json::array({{{"action", "alloc"}, {"addr", 4096}, {"size", 300}, {"frames", fwd}},
                                 {{"action", "segment_alloc"}, {"addr", 0}, {"size", 8192}},
                                 {{"action", "alloc"}, {"addr", 5120}, {"size", 200}, {"frames", bwd}},
                                 {{"action", "free_requested"}, {"addr", 4096}, {"size", 300}},
                                 {{"action", "free_completed"}, {"addr", 4096}, {"size", 300}, {"frames", bwd}},
                                 {{"action", "free_completed"}, {"addr", 2048}, {"size", 50}, {"frames", bwd}},
                                 {{"action", "free_completed"}, {"addr", 5120}, {"size", 200}, {"frames", bwd}}})})}};
  const SnapshotCurve c = snapshot_curve(s, "t");
  // Before recording: the active block (1000 asked) and the 50 freed without an alloc.
  EXPECT_EQ(c.initial_active, 1050u);
  EXPECT_EQ(c.active, (std::vector<uint64_t>{1350, 1550, 1250, 1200, 1000}));
  EXPECT_EQ(c.peak, 1550u);
  EXPECT_EQ(c.backward_start, 1u);
  EXPECT_EQ(c.rounding_end, 24u);
  EXPECT_EQ(c.reserved_end, 8192u);
  EXPECT_THROW((void)snapshot_curve(json::array(), "t"), InputError);
  EXPECT_THROW((void)snapshot_curve(json{{"segments", json::array()}, {"device_traces", json::array({json::array()})}}, "t"), InputError);
}

TEST(SnapshotCompare, AlignsThePhasesOnThePrediction) {
  const Model m = make_preset("mlp:2:16:4");
  const auto run = simulate_strategies(m, {"store-all"}).front();
  SnapshotCurve c;
  c.initial_active = 100;
  c.active = {110, 130, 160, 150, 120, 100};
  c.backward_start = 3;
  c.peak = 160;
  c.peak_index = 2;
  const auto cmp = compare_snapshot(m, run, c);
  EXPECT_EQ(cmp.measured, (std::vector<uint64_t>{10, 30, 60, 50, 20, 0}));
  EXPECT_EQ(cmp.measured_peak, 60u);
  EXPECT_EQ(cmp.difference, 60 - static_cast<int64_t>(run.sim.peak_bytes));
  ASSERT_EQ(cmp.measured_x.size(), 6u);
  EXPECT_DOUBLE_EQ(cmp.measured_x[3], static_cast<double>(cmp.predicted_backward));
  EXPECT_DOUBLE_EQ(cmp.measured_x[5], static_cast<double>(run.schedule.code.size()));
  EXPECT_DOUBLE_EQ(cmp.measured_x[0], 0.0);
}

}  // namespace
}  // namespace remat
