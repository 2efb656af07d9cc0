// An Add's gradient in the memory model (docs/memory-model.md, "An Add's
// gradient: PyTorch shares it"): a plain Add hands G(v)'s storage to its
// inputs, a part added to a gradient whose storage another resident gradient
// shares goes out of place, and every reader of the resident set counts a
// gradient storage once. Timelines derived by hand in the comments.
#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_facts.h"
#include "tests/core/resident_grads_check.h"
#include "tests/support/model_builders.h"

using namespace remat;
using remat::testing::make_op;

namespace {

constexpr uint64_t u = 128;  // every activation and gradient: [4, 8] f32

// x -> a = Linear(x), b = Linear(x) -> t = Tanh(a) -> z = Add(a, b) ->
// s = Add(z, t) -> MSE loss(s). Backward (ids 6..1): bwd s gives G(z) and
// G(t) G(s)'s storage; bwd z gives it to G(a) and G(b) too; bwd t adds its
// part for a to G(a) while G(b) (and G(t)) still share that storage: out of
// place, G(a) gets a storage of its own.
Model residual() {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 8}));
  m.add(make_op(OpKind::Linear, {0}, {4, 8}));  // 1 a
  m.add(make_op(OpKind::Linear, {0}, {4, 8}));  // 2 b
  m.add(make_op(OpKind::Tanh, {1}));            // 3 t
  m.add(make_op(OpKind::Add, {1, 2}));          // 4 z
  m.add(make_op(OpKind::Add, {4, 3}));          // 5 s
  m.add(make_op(OpKind::MSELoss, {5}));         // 6 loss
  m.finalize();
  return m;
}

// Every instruction, frees included, as with_frees would place them.
std::vector<Instr> residual_program() {
  using K = InstrKind;
  return {{K::Fwd, 1},     {K::Fwd, 2},     {K::Fwd, 3},     {K::Fwd, 4},      {K::FreeAct, 1}, {K::FreeAct, 2},
          {K::Fwd, 5},     {K::FreeAct, 4}, {K::Fwd, 6},     {K::FreeAct, 6},  {K::Bwd, 6},     {K::FreeAct, 5},
          {K::Bwd, 5},     {K::FreeGrad, 5}, {K::Bwd, 4},    {K::FreeGrad, 4}, {K::Bwd, 3},     {K::FreeGrad, 3},
          {K::FreeAct, 3}, {K::Bwd, 2},     {K::FreeGrad, 2}, {K::Bwd, 1},     {K::FreeGrad, 1}, {K::FreeAct, 0}};
}

}  // namespace

TEST(AddGradient, OnlyAPlainAddOfTwoOpsShares) {
  const Model m = residual();
  ASSERT_EQ(m.op(3).saved, std::vector<int>{3});  // tanh's backward reads its output
  ASSERT_TRUE(m.op(4).saved.empty());
  EXPECT_TRUE(m.shares_grad(4, 1));
  EXPECT_TRUE(m.shares_grad(4, 2));
  EXPECT_TRUE(m.shares_grad(5, 3));
  EXPECT_FALSE(m.shares_grad(3, 1));  // tanh makes a new tensor
  Model twice;
  twice.add(make_op(OpKind::Input, {}, {4, 8}));
  twice.add(make_op(OpKind::Linear, {0}, {4, 8}));
  twice.add(make_op(OpKind::Add, {1, 1}));
  twice.add(make_op(OpKind::MSELoss, {2}));
  twice.finalize();
  EXPECT_FALSE(twice.shares_grad(2, 1));  // autograd sums x + x's two halves into a new tensor
  Model from_input;  // the input has no gradient tensor to share into
  from_input.add(make_op(OpKind::Input, {}, {4, 8}));
  from_input.add(make_op(OpKind::Linear, {0}, {4, 8}));
  from_input.add(make_op(OpKind::Add, {0, 1}));
  from_input.add(make_op(OpKind::MSELoss, {2}));
  from_input.finalize();
  EXPECT_FALSE(from_input.shares_grad(2, 0));
  EXPECT_TRUE(from_input.shares_grad(2, 1));
}

TEST(AddGradient, ResidualTimelineByHand) {
  const Model m = residual();
  const Schedule s{"hand", residual_program(), ""};
  const Simulation sim = simulate(m, s);
  // Forward: fwd a {x,a} 2u, fwd b 3u, fwd t 4u, fwd z 5u, free a 4u,
  // free b 3u {x,t,z}, fwd s 4u, free z 3u {x,t,s}, fwd loss 3u + 4 B, free it 3u.
  // Backward: bwd loss +G(s) 4u; free s 3u {x, t, G(s)};
  // bwd s: G(z), G(t) are G(s)'s storage, 3u; free G(s) 3u (z, t hold it);
  // bwd z: G(a), G(b) the same storage, 3u; free G(z) 3u;
  // bwd t: its part for a goes to G(a), whose storage G(b) and G(t) share: a
  // new storage, 4u; free G(t) 4u (G(b) holds the shared one); free t 3u;
  // bwd b 3u (the input has no gradient); free G(b): the shared storage goes, 2u;
  // bwd a 2u; free G(a) 1u; free x 0.
  const std::vector<uint64_t> expected = {2 * u, 3 * u, 4 * u, 5 * u, 4 * u, 3 * u, 4 * u, 3 * u, 3 * u + 4, 3 * u,
                                          4 * u, 3 * u, 3 * u, 3 * u, 3 * u, 3 * u, 4 * u, 4 * u, 3 * u, 3 * u,
                                          2 * u, 2 * u, u,     0};
  EXPECT_EQ(sim.timeline, expected);
  // A gradient per input would have held G(s), G(z), G(t) and then G(z),
  // G(t), G(a), G(b): 6u at bwd z, above the forward pass's 5u.
  EXPECT_EQ(sim.peak_bytes, 5 * u);
  EXPECT_EQ(sim.peak_index, 3u);
}

TEST(AddGradient, ResidentSetNamesTheSharedStorage) {
  const Model m = residual();
  const auto code = residual_program();
  ResidentSet r(m);
  for (std::size_t i = 0; i <= 14; ++i) r.apply(m, code[i]);  // through bwd z
  EXPECT_EQ(r.grad_storage[1], 5);
  EXPECT_EQ(r.grad_storage[2], 5);
  EXPECT_EQ(r.grad_storage[3], 5);
  EXPECT_EQ(r.grad_storage[4], 5);
  EXPECT_EQ(r.grad_holders[5], 4);  // G(a), G(b), G(t), G(z); G(s) was freed
  EXPECT_EQ(r.grad_bytes_resident(m), u);
  EXPECT_EQ(r.grad_bytes_made_by(m, 3), u);  // bwd t: a's gradient moves out
  r.apply(m, code[15]);                      // free G(z)
  r.apply(m, code[16]);                      // bwd t
  EXPECT_EQ(r.grad_storage[1], 1);
  EXPECT_EQ(r.grad_holders[1], 1);
  EXPECT_EQ(r.grad_holders[5], 2);  // G(b), G(t)
  EXPECT_EQ(r.grad_bytes_resident(m), 2 * u);
  EXPECT_EQ(r.grad_bytes_made_by(m, 2), 0u);  // b's input is the batch
}

TEST(AddGradient, ResidentIndexRestoresTheAliases) {
  const Model m = residual();
  remat::testing::expect_index_counts_resident_grads(m, Schedule{"hand", residual_program(), ""});
}

TEST(AddGradient, OptimalsStageBytesFollowTheRule) {
  const Model m = residual();
  const MilpFacts x(m);
  // Stage b: the gradient bytes before bwd b, and what bwd b allocates.
  EXPECT_EQ(x.grads[6], 0u);
  EXPECT_EQ(x.new_grads[6], u);  // G(s)
  EXPECT_EQ(x.grads[5], u);
  EXPECT_EQ(x.new_grads[5], 0u);  // shared
  EXPECT_EQ(x.grads[4], u);
  EXPECT_EQ(x.new_grads[4], 0u);
  EXPECT_EQ(x.grads[3], u);
  EXPECT_EQ(x.new_grads[3], u);  // G(a) out of place
  EXPECT_EQ(x.grads[2], 2 * u);
  EXPECT_EQ(x.new_grads[2], 0u);
  EXPECT_EQ(x.grads[1], u);
  EXPECT_EQ(x.new_grads[1], 0u);
}
