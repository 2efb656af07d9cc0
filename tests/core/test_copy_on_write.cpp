// How an Op holds what most ops do not have (attributes, a view's strides,
// imported parameter values): one pointer each, nothing for the defaults,
// shared between copies until one of them writes (core/base/copy_on_write.h).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/base/copy_on_write.h"
#include "core/model/model.h"
#include "core/model/presets.h"

using namespace remat;

// The bound the large-model goal rests on (10^6 ops in < 200 MB): a byte
// header (kind, dtype, act, two flags, dropout p, storage) 16, the name 32
// (std::string), inputs and saved 16 each and the shape 32 (SmallVec), five
// 8-byte numbers (bytes, param, aux, two flop counts) 40, and the three
// out-of-line fields 8 each: 176. It was 408 with OpAttrs inline.
static_assert(sizeof(CopyOnWrite<OpAttrs>) == sizeof(void*));
static_assert(sizeof(CopyOnWrite<std::vector<int64_t>>) == sizeof(void*));
static_assert(sizeof(Op) <= 16 + 32 + 16 + 16 + 32 + 5 * 8 + 3 * sizeof(void*));

TEST(CopyOnWrite, TheDefaultHoldsNothingAndReadsAsTheDefault) {
  const CopyOnWrite<OpAttrs> a;
  EXPECT_FALSE(a.holds());
  EXPECT_EQ(*a, OpAttrs{});
  EXPECT_EQ(a->axis, -1);  // OpAttrs's own defaults, not zeros
  EXPECT_EQ(a->step, 1);
  EXPECT_TRUE(a->bias);
  const Op op;
  EXPECT_FALSE(op.attrs.holds());
  EXPECT_FALSE(op.strides.holds());
  EXPECT_FALSE(op.param_init.holds());
  EXPECT_TRUE(op.strides->empty());
}

TEST(CopyOnWrite, CopiesShareUntilOneWrites) {
  CopyOnWrite<OpAttrs> a;
  a.edit().kernel = {3, 3};
  ASSERT_TRUE(a.holds());
  CopyOnWrite<OpAttrs> b = a;
  EXPECT_TRUE(b.shares_with(a));
  EXPECT_EQ(&*b, &*a);  // the same stored value, not a copy of it
  b.edit().kernel[0] = 5;
  EXPECT_FALSE(b.shares_with(a));
  EXPECT_EQ(a->kernel, (std::vector<int64_t>{3, 3}));  // the original is untouched
  EXPECT_EQ(b->kernel, (std::vector<int64_t>{5, 3}));
  // A holder that is the only one writes in place.
  const OpAttrs* before = &*b;
  b.edit().groups = 2;
  EXPECT_EQ(&*b, before);
  // Assigning a value to a shared holder leaves the other sharer as it was.
  CopyOnWrite<OpAttrs> c = a;
  c = OpAttrs{.channels = 8};
  EXPECT_EQ(c->channels, 8);
  EXPECT_EQ(a->channels, 0);
  EXPECT_EQ(a->kernel, (std::vector<int64_t>{3, 3}));
}

TEST(CopyOnWrite, MovesTakeTheValueAndResetReturnsToTheDefault) {
  CopyOnWrite<std::vector<int64_t>> a(std::vector<int64_t>{1, 2});
  const std::vector<int64_t>* stored = &*a;
  CopyOnWrite<std::vector<int64_t>> b = std::move(a);
  EXPECT_EQ(&*b, stored);
  EXPECT_FALSE(a.holds());  // NOLINT: moved-from holds nothing, reads as empty
  EXPECT_TRUE(a->empty());
  b.reset();
  EXPECT_FALSE(b.holds());
  EXPECT_TRUE(b->empty());
}

TEST(CopyOnWrite, EqualityIsOfTheValues) {
  CopyOnWrite<OpAttrs> none, defaults;
  defaults.edit();  // holds a value equal to the default
  EXPECT_TRUE(defaults.holds());
  EXPECT_EQ(none, defaults);
  CopyOnWrite<OpAttrs> x, y;
  x.edit().perm = {0, 2, 1};
  y.edit().perm = {0, 2, 1};
  EXPECT_FALSE(x.shares_with(y));
  EXPECT_EQ(x, y);
  y.edit().perm = {1, 0, 2};
  EXPECT_NE(x, y);
  EXPECT_NE(x, none);
  EXPECT_EQ(x, (OpAttrs{.perm = {0, 2, 1}}));
}

TEST(CopyOnWrite, CopiesReleasedOnOtherThreadsFreeTheValueOnce) {
  // Copies of one model go to workers (the window's simulations); the count
  // is atomic. Under ASan/TSan a wrong count is a double free or a leak.
  CopyOnWrite<std::vector<int64_t>> a(std::vector<int64_t>(64, 7));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([copy = a]() mutable {
      for (int i = 0; i < 1000; ++i) {
        CopyOnWrite<std::vector<int64_t>> more = copy;
        if (i % 100 == 0) more.edit()[0] = i;  // a private copy, freed at once
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(*a, std::vector<int64_t>(64, 7));
}

TEST(CopyOnWrite, PresetOpsWithDefaultAttributesHoldNothing) {
  const Model chain = make_preset("chain:32");
  for (int v = 0; v < chain.size(); ++v) {
    EXPECT_FALSE(chain.op(v).attrs.holds()) << v;
    EXPECT_FALSE(chain.op(v).strides.holds()) << v;
    EXPECT_FALSE(chain.op(v).param_init.holds()) << v;
  }
  // GPT: the views hold their strides; the kinds with attributes and the
  // head (a Linear without bias) hold theirs; the other Linear layers (bias is
  // the default) and the rest nothing.
  const Model gpt = make_preset("gpt:1:16:2:8:1");
  int views = 0;
  for (int v = 0; v < gpt.size(); ++v) {
    const Op& op = gpt.op(v);
    if (op.view) ++views;
    EXPECT_EQ(op.strides.holds(), op.view) << v;
    const bool has_attrs = op.kind == OpKind::Slice || op.kind == OpKind::Transpose || op.kind == OpKind::Embedding ||
                           op.kind == OpKind::AddConst || op.kind == OpKind::MulConst || op.kind == OpKind::MaskedFill ||
                           op.kind == OpKind::Softmax || op.name == "lm_head";  // MulConst: its scale value
    EXPECT_EQ(op.attrs.holds(), has_attrs) << v << " " << kind_name(op.kind);
  }
  EXPECT_GT(views, 0);
}

TEST(CopyOnWrite, ACopiedModelSharesAttributesUntilAnOpIsEdited) {
  const Model a = make_preset("resnet:10:4:32:1:2");
  int conv = -1;
  for (int v = 0; v < a.size() && conv < 0; ++v)
    if (a.op(v).kind == OpKind::Conv) conv = v;
  ASSERT_GE(conv, 0);
  Model b = a;
  EXPECT_TRUE(b.op(conv).attrs.shares_with(a.op(conv).attrs));
  b.mutable_op(conv).attrs.edit().groups = 2;
  EXPECT_EQ(a.op(conv).attrs->groups, 1);
  EXPECT_EQ(b.op(conv).attrs->groups, 2);
  EXPECT_NE(b.op(conv).attrs, a.op(conv).attrs);
}
