// The Pointwise and Reduce kinds around the kernels: the saved sets their
// rules derive from pointwise_fns.h (what PyTorch's formulas keep), operands
// and broadcast shapes, the JSON form, and the one answer to "does `remat
// run` accept this model" (run_blockers): Model::executable(), `remat model`
// and check_executable agree, with the op and the reason.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/executor.h"
#include "core/exec/run_check.h"
#include "core/io/json_model.h"
#include "core/kernels/pointwise_fns.h"
#include "core/io/model_source.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

const std::string kPointwiseModel = std::string(REMAT_EXEC_TEST_MODELS) + "/pointwise_small.json";

std::string model_text(const std::string& ops) {
  return R"({"format":"remat-model","version":1,"name":"pw","ops":[)" + ops + "]}";
}
Model parse(const std::string& ops) { return parse_json_model(model_text(ops), "test"); }

// x (no gradient, as PyTorch's example input), a and b (activations).
const std::string kHead = R"({"id":0,"name":"x","kind":"Input","shape":[2,3]},
  {"id":1,"name":"a","kind":"Linear","inputs":[0],"shape":[2,3]},
  {"id":2,"name":"b","kind":"Linear","inputs":[0],"shape":[2,3]},)";

// op3 between the head and a tail that reads b too (every op leads to the loss).
const std::string kTail = R"(,{"id":4,"kind":"Pointwise","fn":"add","inputs":[3,2]},{"id":5,"kind":"MSELoss","inputs":[4]})";

std::vector<int> saved_of(const std::string& op3) {
  const Model m = parse(kHead + op3 + kTail);
  return {m.op(3).saved.begin(), m.op(3).saved.end()};
}

TEST(PointwiseRules, SavedIsWhatTheDerivativesOfOperandsWithAGradientRead) {
  using V = std::vector<int>;
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"mul","inputs":[1,2]})"), (V{2, 1}));  // each the other
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"exp","inputs":[1]})"), (V{3}));       // its result
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"rsqrt","inputs":[1]})"), (V{3}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"neg","inputs":[1]})"), (V{}));        // nothing
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"log","inputs":[1]})"), (V{1}));       // its input
  // x has no gradient: only a's derivative (which reads x) counts.
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"mul","inputs":[0,1]})"), (V{0}));
  // A learned scale: its gradient reads the activation; a fixed one keeps nothing.
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"mul","inputs":[1],"const_at":1,"const_shape":[3],"learned":true})"), (V{1}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"mul","inputs":[1],"const_at":1,"const_shape":[3],"values":[1,2,3]})"), (V{}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"div","inputs":[1,2]})"), (V{2, 1}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"pow","inputs":[1],"scalar":2})"), (V{1}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"pow","inputs":[1,2]})"), (V{1, 2, 3}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"where","inputs":[1,2],"const_at":0,"values":1})"), (V{}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Pointwise","fn":"add","inputs":[1,2]})"), (V{}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Reduce","fn":"amax","inputs":[1],"axes":[1],"keepdim":true})"), (V{1, 3}));
  EXPECT_EQ(saved_of(R"({"id":3,"kind":"Reduce","fn":"mean","inputs":[1],"axes":[1],"keepdim":true})"), (V{}));
}

// An RMSNorm of the model's input, its saved sets left to the rules: the
// statistics (pow, mean, eps, rsqrt, the product with x) come before any
// trained parameter and carry no gradient, so they keep nothing, as autograd
// keeps nothing for them (torch 2.6's F.rms_norm, captured); the weight's
// product keeps x·rsqrt for the weight's gradient. The same norm after a
// Linear keeps what each derivative reads.
TEST(PointwiseRules, WhatCarriesNoGradientToAParameterKeepsNothing) {
  const auto norm = [](int x, int at) {
    const auto id = [&](int k) { return std::to_string(at + k); };
    return R"({"id":)" + id(0) + R"(,"kind":"Pointwise","fn":"pow","inputs":[)" + std::to_string(x) + R"(],"scalar":2},
      {"id":)" + id(1) + R"(,"kind":"Reduce","fn":"mean","inputs":[)" + id(0) + R"(],"axes":[-1],"keepdim":true},
      {"id":)" + id(2) + R"(,"kind":"AddConst","inputs":[)" + id(1) + R"(],"values":1e-6},
      {"id":)" + id(3) + R"(,"kind":"Pointwise","fn":"rsqrt","inputs":[)" + id(2) + R"(]},
      {"id":)" + id(4) + R"(,"kind":"Pointwise","fn":"mul","inputs":[)" + std::to_string(x) + "," + id(3) + R"(]},
      {"id":)" + id(5) + R"(,"kind":"Pointwise","fn":"mul","inputs":[)" + id(4) + R"(],"const_at":1,"const_shape":[3],"learned":true},)";
  };
  const Model m = parse(R"({"id":0,"name":"x","kind":"Input","shape":[2,3]},)" + norm(0, 1) +
                        R"({"id":7,"kind":"Linear","inputs":[6],"shape":[2,3]},)" + norm(7, 8) +
                        R"({"id":14,"kind":"MSELoss","inputs":[13]})");
  using V = OpIds;
  for (int v : {1, 2, 3, 4, 5}) EXPECT_EQ(m.op(v).saved, V{}) << v;
  EXPECT_EQ(m.op(6).saved, V{5});
  EXPECT_EQ(m.op(8).saved, V{7});       // x.pow(2) keeps x
  EXPECT_EQ(m.op(11).saved, V{11});     // rsqrt its result
  EXPECT_EQ(m.op(12).saved, (V{11, 7}));  // x · r: each the other
  EXPECT_EQ(m.op(13).saved, V{12});
  EXPECT_TRUE(run_blockers(m).empty());
}

TEST(PointwiseRules, ShapesBroadcastAndALearnedConstantIsAParameter) {
  const Model m = parse(R"({"id":0,"name":"x","kind":"Input","shape":[2,1,4]},
    {"id":1,"kind":"Pointwise","fn":"sin","inputs":[0]},
    {"id":2,"kind":"Pointwise","fn":"mul","inputs":[1],"const_at":1,"const_shape":[3,1,1,1],"values":[1,2,3]},
    {"id":3,"kind":"Pointwise","fn":"mul","inputs":[2],"const_at":0,"const_shape":[4],"learned":true},
    {"id":4,"kind":"Reduce","fn":"sum","inputs":[3],"axes":[0,-1],"keepdim":true},
    {"id":5,"kind":"Reduce","fn":"mean","inputs":[4]},
    {"id":6,"kind":"MSELoss","inputs":[5]})");
  EXPECT_EQ(m.op(2).shape, (Shape{3, 2, 1, 4}));  // (2,1,4) · (3,1,1,1)
  EXPECT_EQ(m.op(3).param_bytes, 16u);
  EXPECT_EQ(m.op(4).shape, (Shape{1, 2, 1, 1}));
  EXPECT_EQ(m.op(4).attrs->axes, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(m.op(5).shape, (Shape{1}));  // everything, without keepdim
  EXPECT_EQ(m.op(3).fwd_flops, 24.0);
}

TEST(PointwiseRules, OperandsThatDoNotFitAreRefusedNamingTheOp) {
  const auto refused = [](const std::string& op1, const std::string& says) {
    try {
      (void)parse(R"({"id":0,"name":"x","kind":"Input","shape":[2,3]},)" + op1 + R"(,{"id":2,"kind":"MSELoss","inputs":[1]})");
      ADD_FAILURE() << "accepted " << op1;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/ops/1"), std::string::npos) << e.what();
    }
  };
  refused(R"({"id":1,"kind":"Pointwise","fn":"mul","inputs":[0],"const_at":1,"const_shape":[4],"values":[1,2,3,4]})",
          "does not broadcast");
  refused(R"({"id":1,"kind":"Pointwise","fn":"exp","inputs":[0],"const_at":1,"values":2})", "const_at 1 is not an operand");
  refused(R"({"id":1,"kind":"Pointwise","fn":"where","inputs":[0]})", "only its last operand may be the scalar");
  refused(R"({"id":1,"kind":"Pointwise","fn":"frobnicate","inputs":[0]})", "unknown function 'frobnicate'");
  refused(R"({"id":1,"kind":"Pointwise","inputs":[0]})", "needs its function");
  refused(R"({"id":1,"kind":"Reduce","fn":"sum","inputs":[0],"axes":[2]})", "axis 2 is out of range");
}

TEST(PointwiseJson, EveryAttributeReadsBackIntoTheSameOps) {
  const Model m = load_model(kPointwiseModel);
  const Model back = parse_json_model(model_to_json(m).dump(), "round trip");
  ASSERT_EQ(back.size(), m.size());
  for (int v = 0; v < m.size(); ++v) {
    EXPECT_EQ(*back.op(v).attrs, *m.op(v).attrs) << v;
    EXPECT_EQ(back.op(v).saved, m.op(v).saved) << v;
    EXPECT_EQ(back.op(v).shape, m.op(v).shape) << v;
  }
  // PyTorch's defaults where a file leaves the function's attributes out.
  const Model d = parse(R"({"id":0,"name":"x","kind":"Input","shape":[2]},
    {"id":1,"kind":"Pointwise","fn":"leaky_relu","inputs":[0]},
    {"id":2,"kind":"Pointwise","fn":"clamp","inputs":[1],"beta":6},
    {"id":3,"kind":"Pointwise","fn":"softplus","inputs":[2]},
    {"id":4,"kind":"MSELoss","inputs":[3]})");
  EXPECT_EQ(d.op(1).attrs->alpha, 0.01f);
  EXPECT_EQ(d.op(2).attrs->alpha, -INFINITY);
  EXPECT_EQ(d.op(2).attrs->beta, 6.0f);
  EXPECT_EQ(d.op(3).attrs->alpha, 1.0f);
  EXPECT_EQ(d.op(3).attrs->beta, 20.0f);
}

TEST(RunCheck, TheFamilyRunsAndAModelIsExecutableExactlyWhenCheckExecutableAcceptsIt) {
  const Model m = load_model(kPointwiseModel);
  EXPECT_TRUE(run_blockers(m).empty());
  EXPECT_TRUE(m.executable());
  EXPECT_NO_THROW(check_executable(m));
}

TEST(RunCheck, APointwiseWhoseSavedSetLeavesOutWhatItsBackwardReadsIsRefusedWithTheReason) {
  // exp's backward reads its result; a file that says it keeps nothing cannot run.
  const Model m = parse(kHead + R"({"id":3,"name":"e","kind":"Pointwise","fn":"exp","inputs":[1],"saved":[]})" + kTail);
  const auto blockers = run_blockers(m);
  ASSERT_EQ(blockers.size(), 1u);
  EXPECT_EQ(blockers[0].op, 3);
  EXPECT_NE(blockers[0].why.find("reads its result"), std::string::npos) << blockers[0].why;
  EXPECT_FALSE(m.executable());
  try {
    check_executable(m);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("e (op 3, Pointwise)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("why: Pointwise: the derivative of exp reads its result, which its saved set "
                                         "leaves out (e)"),
              std::string::npos)
        << e.what();
  }
}

TEST(RunCheck, AnActivationWhoseSavedSetLacksWhatItsKernelReadsIsRefused) {
  // A capture of an in-place silu_ once kept PyTorch's clone as aux and not
  // the input: executable() said yes and the run then failed mid-schedule.
  for (const auto& [op3, ok] : std::vector<std::pair<std::string, bool>>{
           {R"({"id":3,"name":"act","kind":"SiLU","inputs":[1],"saved":[1]})", true},
           {R"({"id":3,"name":"act","kind":"SiLU","inputs":[1],"saved":[],"aux_bytes":24})", false},
           {R"({"id":3,"name":"act","kind":"ReLU","inputs":[1],"saved":[3]})", true},
           {R"({"id":3,"name":"act","kind":"ReLU","inputs":[1],"saved":[1]})", false}}) {
    const Model m = parse(kHead + op3 + kTail);
    EXPECT_EQ(m.executable(), ok) << op3;
    if (!ok) {
      const auto blockers = run_blockers(m);
      ASSERT_FALSE(blockers.empty());
      EXPECT_EQ(blockers[0].op, 3);
      EXPECT_NE(blockers[0].why.find("its backward reads its"), std::string::npos) << blockers[0].why;
    }
  }
}

TEST(RunCheck, AKernelReadingANonContiguousViewMakesTheModelNotExecutable) {
  // A Dense (rows only, no dense copy) over a transposed view: every op has
  // a kernel, yet `remat run` refuses it, so executable() says no and says why.
  const Model m = parse(R"({"id":0,"name":"x","kind":"Input","shape":[3,4]},
    {"id":1,"name":"swap","kind":"Transpose","inputs":[0],"perm":[1,0]},
    {"id":2,"name":"fc","kind":"Dense","inputs":[1],"shape":[4,5],"activation":"tanh"},
    {"id":3,"kind":"MSELoss","inputs":[2]})");
  EXPECT_FALSE(m.executable());
  const auto blockers = run_blockers(m);
  ASSERT_EQ(blockers.size(), 1u);
  EXPECT_FALSE(blockers[0].simulate_only);
  EXPECT_NE(blockers[0].why.find("op 2 ('fc') (Dense) reads the non-contiguous view op 1 ('swap')"), std::string::npos)
      << blockers[0].why;
  EXPECT_THROW(check_executable(m), InputError);
  // A LayerNorm reads a dense copy of it (dense_copy), the family and an Add
  // (an Add over a transposed view, MaxViT's departition) the strides.
  for (const char* op : {R"("kind":"LayerNorm","inputs":[1])", R"("kind":"Pointwise","fn":"hardswish","inputs":[1])",
                         R"("kind":"Add","inputs":[1,1])"}) {
    const Model ok = parse(std::string(R"({"id":0,"name":"x","kind":"Input","shape":[2,3,4]},
      {"id":1,"name":"swap","kind":"Transpose","inputs":[0],"perm":[0,2,1]},
      {"id":2,"name":"act",)") + op + R"(},
      {"id":3,"kind":"MSELoss","inputs":[2]})");
    EXPECT_TRUE(ok.executable()) << op;
  }
}

}  // namespace
}  // namespace remat
