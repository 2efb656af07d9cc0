// Every strategy states the length of its schedule before making it
// (Strategy::size); the instruction limit refuses the ones that would not fit.
// Exact statements must equal the schedules' lengths, bounds must bound them,
// and the chain's recompute-all count must be the textbook formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "core/strategies/checkpoint_sets.h"
#include "core/base/errors.h"
#include "core/sim/instruction_limit.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

// recompute-all on chain:N (ops 0..N): the forward pass computes ops 1..N and
// the backward phase of op v < N recomputes ops 1..v (Dense reads its input
// and output), so N(N+1)/2 forward steps; N backward steps; a free after every
// forward, for the input and for every gradient but the loss's (N-1).
uint64_t recompute_all_chain(uint64_t N) {
  const uint64_t fwd = N * (N + 1) / 2;
  return fwd + N + (fwd + 1) + (N - 1);
}

// Same-shaped ops reading random earlier ones, Add(x, x) included; ops nothing
// reads are summed into the last so that everything reaches the loss.
Model random_dag(unsigned seed, int ops) {
  std::mt19937 rng(seed);
  Model m;
  m.name = "dag" + std::to_string(seed);
  auto make = [](OpKind k, std::vector<int> in) {
    Op op;
    op.kind = k;
    op.inputs = in;
    if (k == OpKind::Input || k == OpKind::Linear) op.shape = {2, 4};
    return op;
  };
  m.add(make(OpKind::Input, {}));
  std::vector<char> read(1, 0);
  const OpKind kinds[] = {OpKind::Linear, OpKind::ReLU, OpKind::GELU, OpKind::Add};
  for (int i = 1; i < ops; ++i) {
    const OpKind k = kinds[rng() % 4];
    const int a = static_cast<int>(rng() % static_cast<unsigned>(i));
    std::vector<int> in = k == OpKind::Add ? std::vector<int>{a, rng() % 3 ? i - 1 : a} : std::vector<int>{rng() % 2 ? a : i - 1};
    for (int u : in) read[static_cast<std::size_t>(u)] = 1;
    m.add(make(k, in));
    read.push_back(0);
  }
  int last = ops - 1;
  for (int u = 0; u < ops - 1; ++u)
    if (!read[static_cast<std::size_t>(u)]) last = m.add(make(OpKind::Add, {last, u}));
  m.add(make(OpKind::MSELoss, {last}));
  m.finalize();
  return m;
}

std::vector<Model> models() {
  std::vector<Model> out;
  for (const char* spec : {"chain:1", "chain:2", "chain:16", "chain:37:8", "mlp:5:8:2", "transformer:2:8:2:1",
                           "transformer:3:8:4:1", "gpt:1:16:2:8:1:f32:64", "resnet:18:4:32:1:10"})
    out.push_back(make_preset(spec));
  for (unsigned seed : {1u, 2u, 3u}) out.push_back(random_dag(seed, 30));
  out.push_back(random_dag(4, 10));
  return out;
}

uint64_t store_all_peak(const Model& m) { return simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes; }

}  // namespace

TEST(ScheduleSize, StatedLengthIsTheLengthOfEveryStrategysSchedule) {
  int exact = 0, bounded = 0;
  for (const Model& m : models()) {
    std::vector<std::string> specs = {"store-all", "recompute-all", "sqrt", "every-k:1", "every-k:3", "auto",
                                      "selective", "revolve:1", "revolve:3", "manual:0"};
    if (m.loss() > 5) specs.push_back("manual:2,5");
    specs.push_back("budget:" + std::to_string(store_all_peak(m)));
    if (m.size() < 20) specs.push_back("optimal:" + std::to_string(store_all_peak(m)) + ":1");  // a search: small ones
    for (const std::string& spec : specs) {
      SCOPED_TRACE(m.name + " " + spec);
      const auto strategy = make_strategy(spec);
      Schedule s;
      try {
        s = strategy->schedule(m);
      } catch (const InputError&) {  // not for this model (revolve on a DAG): size says so too
        EXPECT_THROW((void)strategy->size(m, kNoLimit), InputError);
        continue;
      }
      const ScheduleSize size = strategy->size(m, kNoLimit);
      if (size.bound == ScheduleSize::Bound::Exact) {
        EXPECT_EQ(size.instructions, s.code.size());
        ++exact;
      } else {
        EXPECT_EQ(size.bound, ScheduleSize::Bound::AtMost);
        EXPECT_LE(s.code.size(), size.instructions);
        ++bounded;
      }
    }
  }
  EXPECT_GT(exact, 70);   // every strategy but the searches
  EXPECT_GE(bounded, 8);   // budget (chains) and optimal
}

TEST(ScheduleSize, RecomputeAllOnAChainIsQuadraticAndCountedWithoutTheSchedule) {
  for (uint64_t N : {1u, 2u, 3u, 16u, 100u}) {
    const Model m = make_preset("chain:" + std::to_string(N));
    const auto s = make_strategy("recompute-all");
    EXPECT_EQ(s->size(m, kNoLimit).instructions, recompute_all_chain(N)) << N;
    EXPECT_EQ(s->schedule(m).code.size(), recompute_all_chain(N)) << N;
  }
  // 2.5·10^11 instructions would take terabytes; counting them takes one pass.
  const Model big = make_preset("chain:500000");
  const ScheduleSize size = make_strategy("recompute-all")->size(big, kNoLimit);
  EXPECT_EQ(size.bound, ScheduleSize::Bound::Exact);
  EXPECT_EQ(size.instructions, recompute_all_chain(500000));
}

TEST(ScheduleSize, StoreAllIsFourInstructionsPerOp) {
  // n-1 forward, n-1 backward, n frees of activations (the input's too), n-2
  // of gradients (neither the input nor the loss has one) less the ops with an
  // integer output (no gradient), and a free of aux(v) per op that has one.
  int with_aux = 0, integer = 0;
  for (const Model& m : models()) {
    const auto n = static_cast<uint64_t>(m.size());
    uint64_t aux = 0, no_grad = 0;
    for (int v = 1; v + 1 < m.size(); ++v) {
      aux += m.op(v).aux_bytes > 0;
      no_grad += is_integer(m.op(v).dtype);
    }
    with_aux += aux > 0;
    integer += no_grad > 0;
    const uint64_t expected = 4 * n - 4 + aux - no_grad;
    EXPECT_EQ(make_strategy("store-all")->size(m, kNoLimit).instructions, expected) << m.name;
    EXPECT_EQ(make_strategy("store-all")->schedule(m).code.size(), expected) << m.name;
  }
  EXPECT_GE(with_aux, 2);  // the formula's aux term is exercised
}

TEST(ScheduleSize, CountingOnADagStopsPastTheLimit) {
  const Model m = make_preset("transformer:4:8:2:1");
  const auto s = make_strategy("recompute-all");
  const uint64_t exact = s->size(m, kNoLimit).instructions;
  ASSERT_EQ(exact, s->schedule(m).code.size());
  const uint64_t limit = exact / 3;
  const ScheduleSize stopped = s->size(m, limit);
  EXPECT_EQ(stopped.bound, ScheduleSize::Bound::AtLeast);
  EXPECT_GT(stopped.instructions, limit);
  EXPECT_LE(stopped.instructions, exact);
  // At the exact length the count runs to the end.
  EXPECT_EQ(s->size(m, exact).bound, ScheduleSize::Bound::Exact);
}

TEST(ScheduleSize, SegmentBoundHoldsForEveryCheckpointSet) {
  std::mt19937 rng(7);
  for (const Model& m : models()) {
    const ScheduleSize bound = segment_schedule_bound(m);
    EXPECT_EQ(bound.bound, ScheduleSize::Bound::AtMost);
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<int> ckpt;
      for (int v = 1; v < m.loss(); ++v)
        if (rng() % (1 + trial % 5) == 0) ckpt.push_back(v);
      EXPECT_LE(segment_schedule(m, ckpt, "t").code.size(), bound.instructions) << m.name;
    }
  }
}

TEST(InstructionLimit, RefusesBeforeMakingWithTheLengthAndTheMemory) {
  const Model m = make_preset("chain:100");
  const auto s = make_strategy("recompute-all");
  const uint64_t n = recompute_all_chain(100);
  InstructionLimit limit;
  limit.max = n - 1;
  limit.how_to_change = "--max-instructions N changes it";
  try {
    (void)bounded_schedule(*s, m, limit);
    FAIL() << "not refused";
  } catch (const ScheduleTooLarge& e) {
    EXPECT_EQ(e.size().instructions, n);
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("too large to simulate (" + std::to_string(n) + " instructions, about ", 0), 0u) << what;
    // 10300 instructions at 16 bytes: 164,800 bytes, 160.9 KiB.
    EXPECT_NE(what.find("about 160.9 KiB"), std::string::npos) << what;
    EXPECT_NE(what.find("the limit is " + std::to_string(n - 1) + " instructions: --max-instructions N changes it)"),
              std::string::npos)
        << what;
  }
  limit.max = n;
  EXPECT_EQ(bounded_schedule(*s, m, limit).code.size(), n);
}

TEST(InstructionLimit, DescribesEachKindOfBound) {
  EXPECT_EQ(describe({12, ScheduleSize::Bound::Exact}), "12 instructions");
  EXPECT_EQ(describe({12, ScheduleSize::Bound::AtMost}), "up to 12 instructions");
  EXPECT_EQ(describe({12, ScheduleSize::Bound::AtLeast}), "at least 12 instructions");
}

TEST(InstructionLimit, DefaultIsAQuarterOfTheAvailableMemory) {
  const uint64_t avail = available_memory_bytes();
  ASSERT_GT(avail, 0u);  // Linux: /proc/meminfo
  // MemAvailable moves between the two reads; a 10% window is plenty.
  const double expected = static_cast<double>(avail) / 4 / kSimulationBytesPerInstruction;
  EXPECT_NEAR(static_cast<double>(default_max_instructions()), expected, expected * 0.1);
  EXPECT_NEAR(static_cast<double>(default_max_instructions(64)), expected / 4, expected * 0.1 / 4);
}
