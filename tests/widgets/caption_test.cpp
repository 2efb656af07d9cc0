#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/strategies/registry.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/document/node_states.h"

using namespace remat;

namespace {
std::size_t find(const Schedule& s, InstrKind k, int op, int occurrence = 1) {
  for (std::size_t i = 0; i < s.code.size(); ++i)
    if (s.code[i].kind == k && s.code[i].op == op && --occurrence == 0) return i;
  return s.code.size();
}
}  // namespace

TEST(InstructionCaption, ExplainsSqrtChain16) {
  const Model m = load_model("chain:16");
  const Schedule s = make_strategy("sqrt")->schedule(m);
  const ScheduleFacts f(m, s);
  const InstructionCaption c(m, s, f);
  EXPECT_EQ(c.text(find(s, InstrKind::Fwd, 1)), "forward: computing a1 from x");
  // a9..a11 are recomputed from the checkpoint a8 for the backward of a9..a12.
  const std::size_t re9 = find(s, InstrKind::Fwd, 9, 2);
  ASSERT_LT(re9, s.code.size());
  EXPECT_EQ(c.text(re9), "recomputing a9 from checkpoint a8 on the way to what the backward of a12 needs");
  const std::size_t re11 = find(s, InstrKind::Fwd, 11, 2);
  EXPECT_EQ(c.text(re11), "recomputing a11 from a10 because the backward of a12 needs it");
  // In the forward pass a5 is freed because the sqrt strategy recomputes it later.
  EXPECT_EQ(c.text(find(s, InstrKind::FreeAct, 5)), "freeing a5: it will be recomputed when it is needed again");
  EXPECT_EQ(c.text(find(s, InstrKind::Bwd, 4)), "backward of a4: reads G(a4) and a3, a4; writes G(a3)");
  EXPECT_EQ(c.text(find(s, InstrKind::FreeGrad, 4)), "freeing G(a4): the backward of a4 has consumed it");
}

TEST(InstructionCaption, FreeWithNoLaterReader) {
  const Model m = load_model("chain:16");
  const Schedule s = make_strategy("store-all")->schedule(m);
  const ScheduleFacts f(m, s);
  const InstructionCaption c(m, s, f);
  const std::size_t free5 = find(s, InstrKind::FreeAct, 5);
  ASSERT_LT(free5, s.code.size());
  EXPECT_EQ(c.text(free5), "freeing a5: nothing later reads it");
  EXPECT_EQ(c.text(find(s, InstrKind::Bwd, 16)), "backward of loss: reads the loss seed and a15; writes G(a15)");
}
