// The validator (simulate) rejects schedules that break the memory model and
// names the instruction.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/core/schedule_test_util.h"

using namespace remat;
using namespace remat::testing;

TEST(Validator, AcceptsEverySeedStrategy) {
  const Model m = make_preset("chain:8");
  for (const char* s : {"store-all", "recompute-all", "sqrt", "every-k:3", "manual:2,5"})
    EXPECT_EQ(reject(m, make_strategy(s)->schedule(m).code), "") << s;
}

TEST(Validator, ReadOfNonResidentTensor) {
  const Model m = make_preset("chain:3");
  // a1 freed, then fwd 2 reads it.
  const std::string e = reject(m, {{F, 1}, {FA, 1}, {F, 2}});
  EXPECT_EQ(e.substr(0, 3), "2: ");
  EXPECT_NE(e.find("reads A(a1) which is not resident"), std::string::npos) << e;
}

TEST(Validator, BackwardReadsFreedSavedTensor) {
  const Model m = make_preset("chain:3");
  const std::string e = reject(m, {{F, 1}, {F, 2}, {F, 3}, {FA, 1}, {B, 3}, {B, 2}});
  EXPECT_EQ(e.substr(0, 3), "5: ") << e;  // bwd a2 reads a1 (its input)
  EXPECT_NE(e.find("reads A(a1)"), std::string::npos) << e;
}

TEST(Validator, SecondBackward) {
  const Model m = make_preset("chain:3");
  const std::string e = reject(m, {{F, 1}, {F, 2}, {F, 3}, {B, 3}, {B, 3}});
  EXPECT_EQ(e, "4: instruction 4: second backward of op 3");
}

TEST(Validator, BackwardBeforeConsumers) {
  const Model m = make_preset("chain:3");
  const std::string e = reject(m, {{F, 1}, {F, 2}, {F, 3}, {B, 2}});
  EXPECT_EQ(e.substr(0, 3), "3: ");
  EXPECT_NE(e.find("before all its consumers' backward"), std::string::npos) << e;
}

TEST(Validator, MissingGradientAtTheEnd) {
  const Model m = make_preset("chain:3");
  const std::string e = reject(m, {{F, 1}, {F, 2}, {F, 3}, {B, 3}, {B, 2}});
  EXPECT_EQ(e.substr(0, 3), "5: ");
  EXPECT_NE(e.find("without the backward of op 1"), std::string::npos) << e;
}

TEST(Validator, RecomputeOfResidentTensorAndBadFrees) {
  const Model m = make_preset("chain:3");
  EXPECT_NE(reject(m, {{F, 1}, {F, 1}}).find("already resident"), std::string::npos);
  EXPECT_NE(reject(m, {{FA, 2}}).find("free of A(a2) which is not resident"), std::string::npos);
  EXPECT_NE(reject(m, {{FG, 1}}).find("free of G(a1) which is not resident"), std::string::npos);
  EXPECT_NE(reject(m, {{F, 0}}).find("input is given"), std::string::npos);
  EXPECT_NE(reject(m, {{F, 9}}).find("op 9 does not exist"), std::string::npos);
}
