// A Reshape's gradient in the memory model (docs/memory-model.md, "Gradients
// PyTorch shares"): a Reshape, view or copy, hands G(v)'s storage to its
// input, as PyTorch's ViewBackward0, UnsafeViewBackward0 (reshape of G) and
// CloneBackward0 (G itself) do; it chains with an Add's sharing, a part added
// to a gradient whose storage another resident gradient shares still goes out
// of place, and every reader of the resident set counts a storage once.
// Timelines derived by hand in the comments.
#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_facts.h"
#include "core/strategies/registry.h"
#include "tests/core/resident_grads_check.h"
#include "tests/support/model_builders.h"

using namespace remat;
using remat::testing::make_op;

namespace {

constexpr uint64_t u = 128;  // every activation and gradient: 32 f32

// x [4,8] -> a = Linear(x) -> t = Tanh(a); r = Reshape(a) [2,16], a view of
// a's storage -> c = Reshape(r) [4,8], a copy (PyTorch's .contiguous() or
// clone) -> z = c + t -> MSE loss(z). Backward (ids 6..1): bwd z gives G(c)
// and G(t) G(z)'s storage; bwd c gives it to G(r), bwd r to G(a); bwd t adds
// its part for a to G(a) while G(t) still shares that storage: out of place,
// G(a) gets a storage of its own.
// Ids: 1 a, 2 t, 3 r, 4 c, 5 z, 6 loss.
Model reshaped() { return remat::testing::reshaped_into_add(false); }

// Every instruction, frees included, as with_frees would place them.
std::vector<Instr> reshaped_program() {
  using K = InstrKind;
  return {{K::Fwd, 1},      {K::Fwd, 2},      {K::Fwd, 3},      {K::FreeAct, 1},  {K::Fwd, 4},      {K::FreeAct, 3},
          {K::Fwd, 5},      {K::FreeAct, 4},  {K::Fwd, 6},      {K::FreeAct, 6},  {K::Bwd, 6},      {K::FreeAct, 5},
          {K::Bwd, 5},      {K::FreeGrad, 5}, {K::Bwd, 4},      {K::FreeGrad, 4}, {K::Bwd, 3},      {K::FreeGrad, 3},
          {K::Bwd, 2},      {K::FreeGrad, 2}, {K::FreeAct, 2},  {K::Bwd, 1},      {K::FreeGrad, 1}, {K::FreeAct, 0}};
}

}  // namespace

TEST(ViewGradient, AReshapeViewOrCopySharesOtherViewsDoNot) {
  const Model m = reshaped();
  ASSERT_TRUE(m.op(3).view);
  ASSERT_FALSE(m.op(4).view);
  EXPECT_TRUE(m.shares_grad(3, 1));   // view: G(a) is G(r) reshaped
  EXPECT_TRUE(m.shares_grad(4, 3));   // copy: CloneBackward0 passes G(c) on
  EXPECT_FALSE(m.shares_grad(2, 1));  // tanh makes a new tensor
  // A transposed, sliced or expanded view's input gets a tensor of its own:
  // PyTorch's slice and expand backward make one; its transpose backward
  // hands a strided view of G, which remat's dense gradients do not model.
  Model others;
  others.add(make_op(OpKind::Input, {}, {4, 8}));
  others.add(make_op(OpKind::Linear, {0}, {4, 8}));  // 1
  Op t = make_op(OpKind::Transpose, {1}, {8, 4});
  t.attrs.edit().perm = {1, 0};
  others.add(std::move(t));                          // 2
  Op s = make_op(OpKind::Slice, {1}, {2, 8});
  s.attrs.edit().axis = 0;
  s.attrs.edit().start = 0;
  s.attrs.edit().end = 2;
  others.add(std::move(s));                          // 3
  others.add(make_op(OpKind::Expand, {1}, {2, 4, 8}));  // 4
  others.add(make_op(OpKind::Reshape, {0}, {8, 4}));    // 5: of the input, which has no gradient
  others.add(make_op(OpKind::Reshape, {2}, {32}));      // 6: of the transposed view: a copy
  Op sum = make_op(OpKind::Generic, {6, 3, 4, 5}, {1});
  others.add(std::move(sum));                           // 7 loss
  others.finalize();
  EXPECT_FALSE(others.shares_grad(2, 1));
  EXPECT_FALSE(others.shares_grad(3, 1));
  EXPECT_FALSE(others.shares_grad(4, 1));
  EXPECT_FALSE(others.shares_grad(5, 0));
  ASSERT_FALSE(others.op(6).view);  // not viewable after the transpose: PyTorch copies
  EXPECT_TRUE(others.shares_grad(6, 2));  // and its gradient is G(6) reshaped (remat's are dense)
}

TEST(ViewGradient, TimelineByHand) {
  const Model m = reshaped();
  const Schedule s{"hand", reshaped_program(), ""};
  const Simulation sim = simulate(m, s);
  // Forward: fwd a {x,a} 2u, fwd t 3u, fwd r 3u (a view of a), free a 3u (r
  // holds the storage), fwd c 4u, free r 3u {x,t,c}, fwd z 4u, free c 3u
  // {x,t,z}, fwd loss 3u + 4 B, free it 3u.
  // Backward: bwd loss +G(z) 4u; free z 3u {x, t, G(z)};
  // bwd z: G(c), G(t) are G(z)'s storage, 3u; free G(z) 3u;
  // bwd c: G(r) the same storage, 3u; free G(c) 3u;
  // bwd r: G(a) the same storage, 3u; free G(r) 3u;
  // bwd t: its part for a goes to G(a), whose storage G(t) shares: a new
  // storage, 4u; free G(t): the shared storage goes, 3u; free t 2u {x, G(a)};
  // bwd a 2u; free G(a) 1u; free x 0.
  const std::vector<uint64_t> expected = {2 * u, 3 * u, 3 * u, 3 * u, 4 * u, 3 * u, 4 * u, 3 * u,
                                          3 * u + 4, 3 * u, 4 * u, 3 * u, 3 * u, 3 * u, 3 * u, 3 * u,
                                          3 * u, 3 * u, 4 * u, 3 * u, 2 * u, 2 * u, u, 0};
  EXPECT_EQ(sim.timeline, expected);
  // A gradient of its own per Reshape would have held G(t), G(c), G(r) at
  // bwd c and G(t), G(r), G(a) at bwd r: 5u with x and t, above the forward
  // pass's 4u.
  EXPECT_EQ(sim.peak_bytes, 4 * u);
  EXPECT_EQ(sim.peak_index, 4u);
  // store-all's own schedule frees in the same places.
  EXPECT_EQ(simulate(m, make_strategy("store-all")->schedule(m)).timeline, expected);
}

TEST(ViewGradient, ResidentSetNamesTheSharedStorage) {
  const Model m = reshaped();
  const auto code = reshaped_program();
  ResidentSet r(m);
  for (std::size_t i = 0; i <= 16; ++i) r.apply(m, code[i]);  // through bwd r
  EXPECT_EQ(r.grad_storage[1], 5);
  EXPECT_EQ(r.grad_storage[2], 5);
  EXPECT_EQ(r.grad_storage[3], 5);
  EXPECT_EQ(r.grad_holders[5], 3);  // G(a), G(t), G(r); G(z) and G(c) were freed
  EXPECT_EQ(r.grad_bytes_resident(m), u);
  EXPECT_EQ(r.grad_bytes_made_by(m, 2), u);  // bwd t: a's gradient moves out
  r.apply(m, code[17]);                      // free G(r)
  r.apply(m, code[18]);                      // bwd t
  EXPECT_EQ(r.grad_storage[1], 1);
  EXPECT_EQ(r.grad_holders[1], 1);
  EXPECT_EQ(r.grad_holders[5], 1);  // G(t)
  EXPECT_EQ(r.grad_bytes_resident(m), 2 * u);
}

TEST(ViewGradient, ResidentIndexRestoresTheAliases) {
  const Model m = reshaped();
  remat::testing::expect_index_counts_resident_grads(m, Schedule{"hand", reshaped_program(), ""});
}

TEST(ViewGradient, OptimalsStageBytesFollowTheRule) {
  const Model m = reshaped();
  const MilpFacts x(m);
  // Stage b: the gradient bytes before bwd b, and what bwd b allocates.
  EXPECT_EQ(x.grads[6], 0u);
  EXPECT_EQ(x.new_grads[6], u);  // G(z)
  EXPECT_EQ(x.grads[5], u);
  EXPECT_EQ(x.new_grads[5], 0u);  // G(c), G(t): shared (Add)
  EXPECT_EQ(x.grads[4], u);
  EXPECT_EQ(x.new_grads[4], 0u);  // G(r): shared (the copy)
  EXPECT_EQ(x.grads[3], u);
  EXPECT_EQ(x.new_grads[3], 0u);  // G(a): shared (the view)
  EXPECT_EQ(x.grads[2], u);
  EXPECT_EQ(x.new_grads[2], u);  // G(a) out of place
  EXPECT_EQ(x.grads[1], u);
  EXPECT_EQ(x.new_grads[1], 0u);
}
