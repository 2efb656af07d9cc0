// gpt: against the published per-layer activation memory of Korthikanti et
// al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
// section 4.1), derived here from the paper's accounting with 16-bit
// activations and 1-byte dropout masks (s sequence, b batch, h hidden, a heads):
//   attention: the QKV input 2sbh, Q and K 4sbh, the softmax output 2as²b,
//              its dropout mask as²b, the dropout output 2as²b, V 2sbh, the
//              projection's input 2sbh, its dropout mask sbh  -> 11sbh + 5as²b
//   MLP:       the first Linear's input 2sbh, the GELU's input 8sbh, the
//              second Linear's input 8sbh, the dropout mask sbh -> 19sbh
//   two LayerNorms' inputs: 4sbh
//   per layer: sbh(34 + 5as/h) bytes.
// The paper leaves out the LayerNorms' statistics (mean and rstd per row in
// f32: 2 x 2 x 4 x sb), which remat counts.
#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/model/presets.h"

using namespace remat;

namespace {

struct Dims {
  int64_t h, a, s, b;
};

double korthikanti_per_layer(const Dims& d) {
  const double s = static_cast<double>(d.s), b = static_cast<double>(d.b), h = static_cast<double>(d.h),
               a = static_cast<double>(d.a);
  return s * b * h * (34 + 5 * a * s / h);
}

std::string spec(int layers, const Dims& d) {
  return "gpt:" + std::to_string(layers) + ":" + std::to_string(d.h) + ":" + std::to_string(d.a) + ":" +
         std::to_string(d.s) + ":" + std::to_string(d.b) + ":bf16";
}

}  // namespace

TEST(GptMemory, PerLayerActivationsMatchKorthikanti2022) {
  for (const Dims d : {Dims{768, 12, 1024, 1}, Dims{1024, 16, 2048, 2}, Dims{256, 4, 128, 8}}) {
    SCOPED_TRACE(spec(1, d));
    const uint64_t one = make_preset(spec(1, d)).saved_bytes();
    const uint64_t two = make_preset(spec(2, d)).saved_bytes();
    const uint64_t five = make_preset(spec(5, d)).saved_bytes();
    const double paper = korthikanti_per_layer(d);
    const double per_layer = static_cast<double>(two - one);
    EXPECT_NEAR(per_layer / paper, 1.0, 0.02);
    // Exactly: the paper's count plus the two LayerNorms' statistics.
    EXPECT_EQ(two - one, static_cast<uint64_t>(paper) + 2 * 2 * 4 * static_cast<uint64_t>(d.s * d.b));
    EXPECT_EQ(five - one, 4 * (two - one));  // every layer the same
  }
}

TEST(GptMemory, Gpt2SmallHasGpt2SmallsParameters) {
  const Model m = make_preset("gpt:12:768:12:1024:1:bf16");
  // GPT-2 small: 124,439,808 parameters with the vocabulary projection tied to
  // the token embedding; the preset counts that projection (768 x 50257, no
  // bias) separately. bf16: 2 bytes each.
  const uint64_t tied = 124'439'808;
  EXPECT_EQ(m.param_bytes(), 2 * (tied + 768ull * 50257));
  EXPECT_EQ(m.op(0).dtype, DType::I64);  // token ids
  EXPECT_EQ(m.op(0).shape, (std::vector<int64_t>{1, 1024}));
}

TEST(GptMemory, AttentionSavesWhatTorchSaves) {
  const Model m = make_preset("gpt:1:64:4:16:2:bf16:100");
  int qk = -1, av = -1, proj_in = -1;
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).name == "h0.attn.q@kT") qk = v;
    if (m.op(v).name == "h0.attn.@v") av = v;
    if (m.op(v).name == "h0.attn.y.view") proj_in = v;
  }
  ASSERT_GE(qk, 0);
  ASSERT_GE(av, 0);
  ASSERT_GE(proj_in, 0);
  const uint64_t sbh2 = 2 * 16 * 2 * 64;  // one (b, s, h) tensor in bf16
  // q and k^T are transposed views of the qkv output that bmm cannot fold
  // into (batch*heads, s, hs) without a copy: the copies are what is saved.
  EXPECT_TRUE(m.op(qk).saved.empty());
  EXPECT_EQ(m.op(qk).aux_bytes, 2 * sbh2);
  // The attention probabilities are contiguous (saved as they are); v is copied.
  EXPECT_EQ(m.op(av).saved.size(), 1u);
  EXPECT_EQ(m.op(av).aux_bytes, sbh2);
  // transpose(1,2).contiguous().view(B, T, C): a copy that owns its bytes.
  EXPECT_FALSE(m.op(proj_in).view);
  EXPECT_EQ(m.op(proj_in).bytes, sbh2);
}
