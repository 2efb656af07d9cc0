// Real-model kinds in the executor: views alias their input's storage (no
// bytes, no copy), aux(v) lives from fwd v to its free, and the tracked bytes
// equal the simulator's count after every instruction.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/forwarding_backend.h"
#include "core/io/json_model.h"
#include "core/io/model_source.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

const std::string kViewsModel = std::string(REMAT_EXEC_TEST_MODELS) + "/views_small.json";
// Its cross-entropy keeps log-probabilities in aux (a capture of PyTorch's).
const std::string kCeLogpModel = std::string(REMAT_EXEC_TEST_MODELS) + "/ce_keeps_logp.json";
const std::string kBroadcastMatmulModel = std::string(REMAT_EXEC_TEST_MODELS) + "/broadcast_matmul.json";
// Fused attentions over strided q, k, v, one reading a single tensor three times.
const std::string kAttentionModel = std::string(REMAT_EXEC_TEST_MODELS) + "/attention_small.json";
// The pointwise family and the reductions over strided and broadcast operands.
const std::string kPointwiseModel = std::string(REMAT_EXEC_TEST_MODELS) + "/pointwise_small.json";
// A learned class token concatenated before the tokens (a Concat's learned piece).
const std::string kClassTokenModel = std::string(REMAT_EXEC_TEST_MODELS) + "/class_token.json";
// Kernels that read rows fed strided views, copied dense first (dense_copy).
const std::string kStridedKernelsModel = std::string(REMAT_EXEC_TEST_MODELS) + "/strided_kernels.json";
// A masked attention, norms without affine parameters, top-k routing by Gather.
const std::string kTailModel = std::string(REMAT_EXEC_TEST_MODELS) + "/tail_small.json";
// Add reading non-contiguous views through strides (MaxViT's departitioned
// residual), a loss reading one through a dense copy.
const std::string kStridedReadersModel = std::string(REMAT_EXEC_TEST_MODELS) + "/strided_readers.json";
const std::string kStridedCeModel = std::string(REMAT_EXEC_TEST_MODELS) + "/strided_ce.json";
const std::string kCeSmoothedModel = std::string(REMAT_EXEC_TEST_MODELS) + "/ce_smoothed.json";
const std::string kCeSmoothedLogpModel = std::string(REMAT_EXEC_TEST_MODELS) + "/ce_smoothed_logp.json";
// A binary mask head's BCEWithLogitsLoss over a transposed view.
const std::string kBceModel = std::string(REMAT_EXEC_TEST_MODELS) + "/bce_small.json";
// Every Pad mode (one fed a transposed view) and a roll as Slice views and a Concat.
const std::string kPadModel = std::string(REMAT_EXEC_TEST_MODELS) + "/pad_small.json";
// nn.RMSNorm of the model's input and a gate of it: ops that carry no gradient and run no backward kernel.
const std::string kRmsNormOfInputModel = std::string(REMAT_EXEC_TEST_MODELS) + "/rmsnorm_of_input.json";

// Records the tracked bytes at every mark and checks where views point.
class Recorder : public WrappedBackend, public ForwardingCompute, public ForwardingTiming {
 public:
  explicit Recorder(Backend& inner)
      : WrappedBackend(inner), ForwardingCompute(inner.compute()), ForwardingTiming(inner.timing()) {}
  Compute& compute() override { return *this; }
  Timing& timing() override { return *this; }
  std::vector<uint64_t> live;  // live_bytes() at mark i of the latest run
  int views_checked = 0;
  std::vector<int64_t> offsets;  // storage_offset per op, in floats

  void begin_marks(std::size_t count) override {
    live.clear();
    ForwardingTiming::begin_marks(count);
  }
  void mark(std::size_t index) override {
    EXPECT_EQ(index, live.size());
    live.push_back(inner().memory().live_bytes());
    ForwardingTiming::mark(index);
  }
  void forward(const Model& m, int v, const TensorTable& t) override {
    const Op& op = m.op(v);
    const auto s = static_cast<std::size_t>(op.storage);
    // A view is a pointer into its owner's storage, wherever the owner's own
    // pointer is still resident to compare with.
    if (op.view && t.act[s] != nullptr) {
      EXPECT_EQ(t.act[static_cast<std::size_t>(v)], static_cast<char*>(t.act[s]) + 4 * offsets.at(static_cast<std::size_t>(v)))
          << op_label(m, v);
      ++views_checked;
    }
    ForwardingCompute::forward(m, v, t);
  }
};

class ViewsAndAux : public ::testing::TestWithParam<std::string> {};

TEST_P(ViewsAndAux, TrackedBytesEqualTheSimulationAfterEveryInstructionAndResultsMatchStoreAll) {
  const Model m = load_model(GetParam());
  CpuBackend cpu;
  Recorder rec(cpu);
  for (int v = 0; v < m.size(); ++v) rec.offsets.push_back(storage_offset(m, v));
  const ExecResult base = execute(m, schedule_of(m, "store-all"), rec, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  // Where the model has views, they were checked.
  const bool has_views = std::any_of(m.ops().begin(), m.ops().end(), [](const Op& op) { return op.view; });
  EXPECT_EQ(rec.views_checked > 0, has_views);
  for (const std::string spec : {"store-all", "sqrt", "recompute-all", "every-k:2", "every-k:3", "auto", "selective"}) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const Simulation sim = simulate(m, s);
    const ExecResult r = execute(m, s, rec, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_EQ(rec.live.size(), s.code.size() + 1);
    EXPECT_EQ(rec.live[0], m.op(0).bytes);  // the input batch only
    for (std::size_t i = 0; i < s.code.size(); ++i)
      ASSERT_EQ(rec.live[i + 1], sim.timeline[i]) << "after instruction " << i << " (" << to_string(s.code[i], m) << ")";
    EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0);
    ASSERT_EQ(r.param_grads.size(), base.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k)
      EXPECT_EQ(std::memcmp(r.param_grads[k].data(), base.param_grads[k].data(), 4 * r.param_grads[k].size()), 0) << k;
  }
}

// The GPT: its MatMuls keep contiguous copies of the strided q, kᵀ and v in aux.
// broadcast_matmul: torch.matmul's broadcast batches, copied into aux or read
// in place with batch stride 0, the broadcast operands' gradients summed.
std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  static const char* const names[] = {"resnet10", "views", "gpt2", "ce_keeps_logp", "broadcast_matmul", "attention",
                                      "pointwise", "class_token", "strided_kernels", "tail", "strided_readers",
                                      "strided_ce", "bce", "pad", "ce_smoothed", "ce_smoothed_logp",
                                      "rmsnorm_of_input"};
  return names[info.index];
}
INSTANTIATE_TEST_SUITE_P(Models, ViewsAndAux,
                         ::testing::Values("resnet:10:4:32:2:5", kViewsModel, "gpt:2:16:2:6:2:f32:20", kCeLogpModel,
                                           kBroadcastMatmulModel, kAttentionModel, kPointwiseModel, kClassTokenModel,
                                           kStridedKernelsModel, kTailModel, kStridedReadersModel, kStridedCeModel,
                                           kBceModel, kPadModel, kCeSmoothedModel, kCeSmoothedLogpModel,
                                           kRmsNormOfInputModel),
                         param_name);

// The same classifier with a cross-entropy keeping its logits (remat's own
// loss) or its log-probabilities in aux (a PyTorch capture): one loss to the
// bit, gradients within float rounding of each other; aux too small for the
// log-probabilities is refused naming the op.
std::string ce_model(const std::string& loss_saved) {
  return R"({"format":"remat-model","version":1,"name":"ce","ops":[
    {"id":0,"name":"x","kind":"Input","shape":[8,16]},
    {"id":1,"name":"fc1","kind":"Linear","inputs":[0],"shape":[8,32],"saved":[0]},
    {"id":2,"name":"relu","kind":"ReLU","inputs":[1],"saved":[2]},
    {"id":3,"name":"fc2","kind":"Linear","inputs":[2],"shape":[8,10],"saved":[2]},
    {"id":4,"name":"loss","kind":"SoftmaxCELoss","inputs":[3],)" + loss_saved + "}]}";
}

TEST(Executor, CrossEntropyKeepingLogProbsMatchesTheOneKeepingLogits) {
  const Model logits = parse_json_model(ce_model(R"("saved":[3])"), "logits");
  const Model logp = parse_json_model(ce_model(R"("saved":[],"aux_bytes":324)"), "logp");
  EXPECT_TRUE(ce_keeps_log_probs(logp.op(4)));
  EXPECT_FALSE(ce_keeps_log_probs(logits.op(4)));
  CpuBackend cpu;
  const ExecResult a = execute(logits, schedule_of(logits, "store-all"), cpu, quick());
  const ExecResult b = execute(logp, schedule_of(logp, "store-all"), cpu, quick());
  ASSERT_TRUE(a.ok()) << a.message;
  ASSERT_TRUE(b.ok()) << b.message;
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0);
  ASSERT_EQ(a.param_grads.size(), b.param_grads.size());
  for (std::size_t k = 0; k < a.param_grads.size(); ++k)
    for (std::size_t i = 0; i < a.param_grads[k].size(); ++i)
      ASSERT_NEAR(a.param_grads[k][i], b.param_grads[k][i], 1e-6 * (1.0 + std::fabs(a.param_grads[k][i]))) << k << "," << i;
  // Saved for backward: x (8·16·4), the ReLU's output (8·32·4) and either the
  // logits (8·10·4) or the log-probabilities and nll_loss's total weight
  // (8·10·4 + 4), PyTorch's own count of this classifier.
  EXPECT_EQ(logits.saved_bytes(), 512u + 1024u + 320u);
  EXPECT_EQ(logp.saved_bytes(), 512u + 1024u + 324u);

  const Model small = parse_json_model(ce_model(R"("saved":[],"aux_bytes":316)"), "small");
  try {
    execute(small, schedule_of(small, "store-all"), cpu, quick());
    ADD_FAILURE() << "aux smaller than the log-probabilities was run";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("op 4 ('loss') (SoftmaxCELoss) keeps 316 bytes of aux and not its logits; "
                                         "its log-probabilities need 320 (f32)"),
              std::string::npos)
        << e.what();
  }
}

// What each broadcast MatMul of broadcast_matmul.json copies, derived from
// PyTorch's matmul: expand, then reshape to (batch, rows, cols) for bmm,
// which copies unless the expanded strides fold; the copy is saved (aux).
TEST(BroadcastMatMul, CopiesAndProductsFollowTorchMatmul) {
  const Model m = load_model(kBroadcastMatmulModel);
  const auto floats = [](int64_t n) { return 4 * static_cast<uint64_t>(n); };
  // q (2,2,3,4) @ k (1,2,4,3): k expanded to (2,2,4,3) has strides (0,12,3,1),
  // which cannot fold batch 2·2 into one stride: a copy of 2·2·4·3 floats.
  EXPECT_EQ(m.op(6).aux_bytes, floats(2 * 2 * 4 * 3));
  MatmulDims d = matmul_dims(m, 6);
  EXPECT_EQ(d.batch, 4);
  EXPECT_FALSE(d.aux_a);
  EXPECT_TRUE(d.aux_b);
  EXPECT_EQ(d.a_of, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(d.b_of, (std::vector<int64_t>{0, 1, 0, 1}));  // k's head h for product (b, h)
  // att (2,2,3,3) @ v (2,3,4), v's missing batch dimension: a copy of 2·2·3·4.
  EXPECT_EQ(m.op(11).aux_bytes, floats(2 * 2 * 3 * 4));
  EXPECT_EQ(matmul_dims(m, 11).b_of, (std::vector<int64_t>{0, 1, 0, 1}));
  // o (2,2,3,4) @ w.T (4,3): one mm of (12, 4) @ (4, 3), w.T saved as it is
  // (mm reads any strides) and gathered into scratch for the kernels.
  EXPECT_EQ(m.op(16).aux_bytes, 0u);
  d = matmul_dims(m, 16);
  EXPECT_FALSE(d.aux_a || d.aux_b);
  EXPECT_TRUE(d.scratch_b);
  EXPECT_EQ(d.b_of, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(op_scratch(m, 16)[kMatmulB], 12);  // w.T's own 4·3 floats, not expanded
  // u.T (2,3) @ p (2,2,3,3): u.T expanded has strides (0,0,1,2): folds to
  // (4,2,3) with batch stride 0, so no copy; it is not contiguous: scratch.
  EXPECT_EQ(m.op(21).aux_bytes, 0u);
  d = matmul_dims(m, 21);
  EXPECT_FALSE(d.aux_a);
  EXPECT_TRUE(d.scratch_a);
  EXPECT_EQ(d.a_of, (std::vector<int64_t>{0, 0, 0, 0}));
  // r (2,1,2,2) @ s (2,2,2,3): r expanded has strides (4,0,2,1): batch 2·2
  // does not fold, a copy of 2·2·2·2; product (b, h) reads r's matrix b.
  EXPECT_EQ(m.op(24).aux_bytes, floats(2 * 2 * 2 * 2));
  d = matmul_dims(m, 24);
  EXPECT_TRUE(d.aux_a);
  EXPECT_EQ(d.a_of, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(d.a_read(), (std::vector<int64_t>{0, 1, 2, 3}));  // the expanded copy
  // Each saved tensor is the input itself where it was not copied.
  EXPECT_EQ(std::vector<int>(m.op(6).saved.begin(), m.op(6).saved.end()), (std::vector<int>{2}));
  EXPECT_EQ(std::vector<int>(m.op(21).saved.begin(), m.op(21).saved.end()), (std::vector<int>{20, 16}));
}

// The runs of GEMMs a MatMul's products group into, by hand.
TEST(BroadcastMatMul, GemmRunsSumABroadcastGradientInProductOrder) {
  const std::vector<int64_t> each = {0, 1, 2, 3}, heads = {0, 1, 0, 1}, one = {0, 0, 0, 0};
  const auto same = [](const GemmRun& r, std::array<int64_t, 7> f, bool acc) {
    return r.count == f[0] && r.x == f[1] && r.sx == f[2] && r.y == f[3] && r.sy == f[4] && r.z == f[5] &&
           r.sz == f[6] && r.accumulate == acc;
  };
  // Forward of (B=2,H=2) @ (1,H): two strided runs, b's step breaks at b = 1.
  auto r = gemm_runs(each, heads, each, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(same(r[0], {2, 0, 1, 0, 1, 0, 1}, false));
  EXPECT_TRUE(same(r[1], {2, 2, 1, 0, 1, 2, 1}, false));
  // Its gradient onto the broadcast operand: batch 1 adds to batch 0's.
  r = gemm_runs(each, each, heads, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(same(r[0], {2, 0, 1, 0, 1, 0, 1}, false));
  EXPECT_TRUE(same(r[1], {2, 2, 1, 2, 1, 0, 1}, true));
  // One matrix for every product: one write, then three adds in order, each
  // its own run (a strided batch may not write one matrix twice).
  r = gemm_runs(each, each, one, false);
  ASSERT_EQ(r.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(same(r[i], {1, static_cast<int64_t>(i), 0, static_cast<int64_t>(i), 0, 0, 0}, i > 0)) << i;
  // (B=2,1) @ (B,H=2): product (b, h) reads a's matrix b. Its gradient goes
  // in rounds, each a's matrices once: (0,0),(1,0) then (0,1),(1,1), which
  // adds, so each matrix still sums its products in increasing order.
  const std::vector<int64_t> rows = {0, 0, 1, 1};
  r = gemm_runs(each, each, rows, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(same(r[0], {2, 0, 2, 0, 2, 0, 1}, false));
  EXPECT_TRUE(same(r[1], {2, 1, 2, 1, 2, 0, 1}, true));
  // Asked to accumulate: every write adds.
  r = gemm_runs(each, one, each, true);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(same(r[0], {4, 0, 1, 0, 0, 0, 1}, true));
}

// The maps a view's backward scatters through, derived by hand: element i of
// the view is element base + Σ index·stride of its input.
TEST(ViewMap, SliceTransposeAndExpandPointWhereTheirDefinitionsSay) {
  const Model m = load_model(kViewsModel);
  // hi = silu[:, :, 1:9:2] of a (2, 4, 9) input: strides (36, 9, 2), base 1.
  const ViewMap hi = view_map(m, 5);
  EXPECT_EQ(hi.shape, (std::vector<int64_t>{2, 4, 4}));
  EXPECT_EQ(hi.stride, (std::vector<int64_t>{36, 9, 2}));
  EXPECT_EQ(hi.base, 1);
  // lo.T = lo.permute(0, 2, 1) of a (2, 2, 9) input: strides (18, 1, 9).
  const ViewMap t = view_map(m, 6);
  EXPECT_EQ(t.stride, (std::vector<int64_t>{18, 1, 9}));
  // rows = row.expand(2, 3, 34) of (2, 1, 34): the broadcast axis has stride 0.
  EXPECT_EQ(view_map(m, 12).stride, (std::vector<int64_t>{34, 0, 1}));
  // Storage offsets: hi starts one element into silu's storage; lo at its start.
  EXPECT_EQ(storage_offset(m, 5), 1);
  EXPECT_EQ(storage_offset(m, 4), 0);
  std::vector<int64_t> at;
  for_each_mapped(ViewMap{{2, 2}, {1, 3}, 5}, [&](int64_t i, int64_t a) {
    EXPECT_EQ(i, static_cast<int64_t>(at.size()));
    at.push_back(a);
  });
  EXPECT_EQ(at, (std::vector<int64_t>{5, 8, 6, 9}));
}

// Coalescing merges only what one stride walks, so every map reads the same
// elements in the same order in fewer dimensions (what the CUDA kernels get).
TEST(ViewMap, CoalescedReadsTheSameElementsInTheSameOrder) {
  const auto order = [](const ViewMap& m) {
    std::vector<int64_t> at;
    for_each_mapped(m, [&](int64_t, int64_t a) { at.push_back(a); });
    return at;
  };
  const std::vector<int64_t> ten = {2, 1, 2, 1, 2, 1, 2, 1, 2, 3};
  const struct {
    ViewMap in;
    std::vector<int64_t> shape, stride;
  } cases[] = {
      {{{2, 1, 3, 4}, {12, 7, 4, 1}, 5}, {24}, {1}},               // contiguous (a size-1 dim's stride is moot)
      {{{4, 3, 5, 2}, {0, 2, 0, 1}, 0}, {4, 3, 5, 2}, {0, 2, 0, 1}},  // repeats between kept dims: nothing merges
      {{{2, 3, 4}, {0, 0, 1}, 0}, {6, 4}, {0, 1}},                  // two repeats in a row are one
      {{{2, 4, 3}, {12, 1, 4}, 0}, {2, 4, 3}, {12, 1, 4}},           // a transpose stays as it is
      {{{2, 4, 4}, {36, 9, 2}, 1}, {8, 4}, {9, 2}},  // views_small's stepped Slice: all channels, so 36 = 9·4
      {{ten, contiguous_strides(ten), 0}, {96}, {1}},                // rank 10, over the kernels' 8
  };
  for (const auto& c : cases) {
    const ViewMap m = coalesced(c.in);
    EXPECT_EQ(m.shape, c.shape);
    EXPECT_EQ(m.stride, c.stride);
    EXPECT_EQ(m.base, c.in.base);
    EXPECT_EQ(order(m), order(c.in));
  }
}

// An elementwise kind over a transposed view runs on a dense copy of it and
// computes what the family, which reads the strides itself, computes: the
// same loss and input gradient to the bit. An Add over it reads its strides,
// as the family's add does, to the same bits; a Dense (which reads rows and
// gets no copy) over a strided view is still refused, naming both ops.
std::string over_transpose(const std::string& op) {
  return R"({"format":"remat-model","version":1,"name":"t","ops":[
    {"id":0,"name":"x","kind":"Input","shape":[2,3,4]},
    {"id":1,"name":"w","kind":"Linear","inputs":[0],"shape":[2,3,4]},
    {"id":2,"name":"swap","kind":"Transpose","inputs":[1],"perm":[0,2,1]},
    )" + op + R"(,
    {"id":4,"kind":"MSELoss","inputs":[3]}]})";
}

TEST(Executor, AKernelFedANonContiguousViewReadsADenseCopyOfIt) {
  const Model kind = parse_json_model(over_transpose(R"({"id":3,"name":"act","kind":"Tanh","inputs":[2]})"), "kind");
  const Model family =
      parse_json_model(over_transpose(R"({"id":3,"name":"act","kind":"Pointwise","fn":"tanh","inputs":[2]})"), "family");
  EXPECT_EQ(dense_copy(kind, 3), DenseCopy::Scratch);
  EXPECT_EQ(dense_copy(family, 3), DenseCopy::None);
  EXPECT_EQ(op_scratch(kind, 3)[kDenseInput], 24);
  CpuBackend cpu;
  const ExecResult a = execute(kind, schedule_of(kind, "recompute-all"), cpu, quick());
  const ExecResult b = execute(family, schedule_of(family, "recompute-all"), cpu, quick());
  ASSERT_TRUE(a.ok()) << a.message;
  ASSERT_TRUE(b.ok()) << b.message;
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0);
  ASSERT_EQ(a.param_grads.size(), b.param_grads.size());
  for (std::size_t k = 0; k < a.param_grads.size(); ++k)
    EXPECT_EQ(std::memcmp(a.param_grads[k].data(), b.param_grads[k].data(), 4 * a.param_grads[k].size()), 0) << k;

  // An Add over the strided view reads it through its strides, as the
  // family's add does: the same bits as Pointwise add.
  const Model add = parse_json_model(over_transpose(R"({"id":3,"name":"sum","kind":"Add","inputs":[2,2]})"), "add");
  const Model family_add =
      parse_json_model(over_transpose(R"({"id":3,"name":"sum","kind":"Pointwise","fn":"add","inputs":[2,2]})"), "fadd");
  EXPECT_TRUE(add.executable());
  EXPECT_EQ(dense_copy(add, 3), DenseCopy::None);
  const ExecResult c = execute(add, schedule_of(add, "recompute-all"), cpu, quick());
  const ExecResult d = execute(family_add, schedule_of(family_add, "recompute-all"), cpu, quick());
  ASSERT_TRUE(c.ok()) << c.message;
  ASSERT_TRUE(d.ok()) << d.message;
  EXPECT_EQ(std::memcmp(&c.loss, &d.loss, sizeof(float)), 0);
  EXPECT_EQ(c.grad_hash, d.grad_hash);

  const Model dense = parse_json_model(R"({"format":"remat-model","version":1,"name":"t","ops":[
    {"id":0,"name":"x","kind":"Input","shape":[3,4]},
    {"id":1,"name":"swap","kind":"Transpose","inputs":[0],"perm":[1,0]},
    {"id":2,"name":"fc","kind":"Dense","inputs":[1],"shape":[4,5],"activation":"tanh"},
    {"id":3,"kind":"MSELoss","inputs":[2]}]})", "dense");
  EXPECT_FALSE(dense.executable());
  try {
    (void)execute(dense, schedule_of(dense, "store-all"), cpu, quick());
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("op 2 ('fc')"), std::string::npos) << what;
    EXPECT_NE(what.find("non-contiguous view op 1 ('swap')"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace remat
