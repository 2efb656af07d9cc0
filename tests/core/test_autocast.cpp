// Autocast's dtype policy per device and the casts it leaves saved
// (core/model/autocast.h, docs/memory-model.md#mixed-precision-autocast).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/base/errors.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/autocast.h"
#include "core/model/model.h"
#include "core/model/op_rules.h"
#include "core/model/presets.h"

namespace remat {
namespace {

Op kind_op(OpKind k) {
  Op op;
  op.kind = k;
  return op;
}
Op pointwise(pw::Fn fn) {
  Op op = kind_op(OpKind::Pointwise);
  op.attrs.edit().fn = static_cast<uint8_t>(fn);
  return op;
}
Op reduce(pw::ReduceFn fn) {
  Op op = kind_op(OpKind::Reduce);
  op.attrs.edit().fn = static_cast<uint8_t>(fn);
  return op;
}

// The table, kind by kind: what torch's lists say for each of remat's kinds
// (aten/src/ATen/autocast_mode.{h,cpp}, torch 2.x).
TEST(Autocast, PolicyTablePerDevice) {
  const auto L = CastPolicy::Lower, F = CastPolicy::F32, P = CastPolicy::Promote;
  struct Row {
    Op op;
    CastPolicy cpu, cuda;
  };
  const std::vector<Row> rows = {
      {kind_op(OpKind::Linear), L, L},        {kind_op(OpKind::Dense), L, L},
      {kind_op(OpKind::MatMul), L, L},        {kind_op(OpKind::Conv), L, L},
      {kind_op(OpKind::ConvTranspose), L, L}, {kind_op(OpKind::Attention), L, L},
      {kind_op(OpKind::MSELoss), F, F},       {kind_op(OpKind::SoftmaxCELoss), F, F},
      {kind_op(OpKind::LayerNorm), P, F},     {kind_op(OpKind::GroupNorm), P, F},
      {kind_op(OpKind::Softmax), P, F},       {reduce(pw::ReduceFn::Sum), P, F},
      {reduce(pw::ReduceFn::Mean), P, P},     {reduce(pw::ReduceFn::Amax), P, P},
      {pointwise(pw::Fn::Exp), P, F},         {pointwise(pw::Fn::Log), P, F},
      {pointwise(pw::Fn::Pow), P, F},         {pointwise(pw::Fn::Rsqrt), P, F},
      {pointwise(pw::Fn::Reciprocal), P, F},  {pointwise(pw::Fn::Softplus), P, F},
      {pointwise(pw::Fn::Sqrt), P, P},        {pointwise(pw::Fn::Mul), P, P},
      {pointwise(pw::Fn::Tanh), P, P},        {kind_op(OpKind::BatchNorm), P, P},
      {kind_op(OpKind::ReLU), P, P},          {kind_op(OpKind::GELU), P, P},
      {kind_op(OpKind::Add), P, P},           {kind_op(OpKind::Dropout), P, P},
      {kind_op(OpKind::MaxPool), P, P},       {kind_op(OpKind::AvgPool), P, P},
      {kind_op(OpKind::GlobalAvgPool), P, P}, {kind_op(OpKind::Upsample), P, P},
      {kind_op(OpKind::Embedding), P, P},     {kind_op(OpKind::Reshape), P, P},
  };
  for (const Row& r : rows) {
    const std::string what = r.op.kind == OpKind::Pointwise ? pw::kFns[r.op.attrs->fn].name : std::string(kind_name(r.op.kind));
    EXPECT_EQ(autocast_policy(r.op, AutocastDevice::Cpu), r.cpu) << what << " on the CPU";
    EXPECT_EQ(autocast_policy(r.op, AutocastDevice::Cuda), r.cuda) << what << " on CUDA";
  }
}

std::map<std::string, DType> dtypes(const Model& m) {
  std::map<std::string, DType> out;
  for (const Op& op : m.ops()) out[op.name] = op.dtype;
  return out;
}

// A GPT under autocast: the residual stream stays f32 (the embedding gathers
// f32 rows, f32 + bf16 is f32), so the LayerNorms are f32 on both devices;
// the products are bf16; CUDA runs softmax (and what follows it up to the
// product with v) in f32, the CPU in bf16; the loss is f32.
TEST(Autocast, GptDtypesFollowTheDevicesLists) {
  const auto cpu = dtypes(make_preset("gpt:1:32:4:8:2:bf16@cpu:64"));
  const auto cuda = dtypes(make_preset("gpt:1:32:4:8:2:bf16@cuda:64"));
  for (const auto* d : {&cpu, &cuda}) {
    EXPECT_EQ(d->at("ids"), DType::I64);
    EXPECT_EQ(d->at("wte"), DType::F32);
    EXPECT_EQ(d->at("wpe"), DType::F32);
    EXPECT_EQ(d->at("h0.ln_1"), DType::F32);
    EXPECT_EQ(d->at("h0.attn.c_attn"), DType::BF16);
    EXPECT_EQ(d->at("h0.attn.q@kT"), DType::BF16);
    EXPECT_EQ(d->at("h0.attn.scale"), DType::BF16);  // times a Python scalar: no promotion
    EXPECT_EQ(d->at("h0.attn.@v"), DType::BF16);
    EXPECT_EQ(d->at("h0.res1"), DType::F32);
    EXPECT_EQ(d->at("h0.mlp.gelu"), DType::BF16);
    EXPECT_EQ(d->at("ln_f"), DType::F32);
    EXPECT_EQ(d->at("lm_head"), DType::BF16);
  }
  EXPECT_EQ(cpu.at("h0.attn.softmax"), DType::BF16);
  EXPECT_EQ(cpu.at("h0.attn.attn_dropout"), DType::BF16);
  EXPECT_EQ(cuda.at("h0.attn.softmax"), DType::F32);
  EXPECT_EQ(cuda.at("h0.attn.attn_dropout"), DType::F32);
}

int op_named(const Model& m, const std::string& name) {
  for (int v = 0; v < m.size(); ++v)
    if (m.op(v).name == name) return v;
  ADD_FAILURE() << "no op " << name;
  return 0;
}

// What autograd keeps where autocast casts: the Linear after an f32
// LayerNorm keeps the bf16 cast of its input (2 B an element, aux), not the
// f32 input; CUDA's product with v keeps the bf16 cast of the f32 attention
// weights. Derived from the shapes: B = 2, T = 8, D = 32, H = 4.
TEST(Autocast, CastsOfF32InputsAreSavedInTheCastsDtype) {
  const Model m = make_preset("gpt:1:32:4:8:2:bf16@cuda:64");
  const int64_t b = 2, t = 8, d = 32, h = 4;
  const Op& qkv = m.op(op_named(m, "h0.attn.c_attn"));
  EXPECT_TRUE(qkv.saved.empty());
  EXPECT_EQ(qkv.aux_bytes, static_cast<uint64_t>(2 * b * t * d));
  const auto copies = cast_copies(qkv, m.ops());
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].dtype, DType::BF16);
  EXPECT_EQ(copies[0].offset, 0u);
  const Op& av = m.op(op_named(m, "h0.attn.@v"));
  const int drop = op_named(m, "h0.attn.attn_dropout");
  EXPECT_EQ(std::count(av.saved.begin(), av.saved.end(), drop), 0);
  // v is a transposed view: the product copies it (bf16, its own aux), and
  // the cast of the f32 weights follows.
  const auto av_copies = cast_copies(av, m.ops());
  ASSERT_EQ(av_copies.size(), 1u);
  EXPECT_EQ(av_copies[0].input, 0);
  EXPECT_EQ(av_copies[0].bytes, static_cast<uint64_t>(2 * b * h * t * t));
  EXPECT_EQ(av.aux_bytes, static_cast<uint64_t>(2 * b * t * d + 2 * b * h * t * t));
  EXPECT_EQ(av_copies[0].offset, static_cast<uint64_t>(2 * b * t * d));
  // The softmax keeps its f32 result: 4 B an element.
  const Op& sm = m.op(op_named(m, "h0.attn.softmax"));
  EXPECT_EQ(sm.bytes, static_cast<uint64_t>(4 * b * h * t * t));
  // Per block, CUDA's policy keeps 2 B an attention weight more than the
  // CPU's: the f32 softmax result (4 B, not 2) and the bf16 cast (2 B) where
  // the CPU's product keeps the bf16 dropout output (2 B).
  const uint64_t one_cpu = make_preset("gpt:1:32:4:8:2:bf16@cpu:64").saved_bytes();
  const uint64_t two_cpu = make_preset("gpt:2:32:4:8:2:bf16@cpu:64").saved_bytes();
  const uint64_t one_cuda = m.saved_bytes();
  const uint64_t two_cuda = make_preset("gpt:2:32:4:8:2:bf16@cuda:64").saved_bytes();
  EXPECT_EQ((two_cuda - one_cuda) - (two_cpu - one_cpu), static_cast<uint64_t>(2 * b * h * t * t));
}

// A ResNet's only cast of an f32 activation is the image's, before conv1:
// autocast gives it the bytes store-all bf16 gives a bf16 image.
TEST(Autocast, ResnetSavesTheImagesCastBeforeConv1) {
  const Model uniform = make_preset("resnet:10:4:32:2:5:bf16");
  const Model cpu = make_preset("resnet:10:4:32:2:5:bf16@cpu");
  EXPECT_EQ(cpu.op(0).dtype, DType::F32);
  const Op& conv1 = cpu.op(1);
  EXPECT_TRUE(conv1.saved.empty());
  EXPECT_EQ(conv1.aux_bytes, static_cast<uint64_t>(2 * 2 * 3 * 32 * 32));
  EXPECT_EQ(cpu.saved_bytes(), uniform.saved_bytes());
  EXPECT_EQ(make_preset("resnet:10:4:32:2:5:bf16@cuda").saved_bytes(), cpu.saved_bytes());
  EXPECT_EQ(cpu.op(cpu.size() - 1).aux_bytes, static_cast<uint64_t>(4 * 2 * 5));  // the f32 log-probabilities
}

TEST(Autocast, BadPrecisionFieldsAreNamed) {
  const auto message = [](const char* spec) {
    try {
      (void)make_preset(spec);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("gpt:1:32:4:8:2:bf16@tpu:64"),
            "DTYPE in 'gpt:1:32:4:8:2:bf16@tpu:64': the autocast device after '@' must be cpu or cuda, got 'tpu'");
  EXPECT_EQ(message("resnet:10:4:32:2:5:f32@cuda"),
            "DTYPE in 'resnet:10:4:32:2:5:f32@cuda': autocast runs to bf16 or f16 on a device (bf16@cuda, bf16@cpu, "
            "f16@cuda, f16@cpu), got 'f32@cuda'");
}

}  // namespace
}  // namespace remat
