// What `remat run` says of mixed precision's 16-bit paths (app/cli/mixed_paths.h):
// the lines and JSON fields a CUDA run prints, checked here without a GPU
// (the CLI tests reach them only where a device answers).
#include <gtest/gtest.h>

#include <string>

#include "app/cli/mixed_paths.h"
#include "core/exec/gemm_path.h"
#include "core/model/presets.h"
#include "tests/support/scoped_env.h"

namespace remat {
namespace {

// The three switches for one scope (nullptr: unset), put back after it.
struct Switches {
  testing::ScopedEnv gemm{"REMAT_CUDA_GEMM"}, conv{"REMAT_CUDA_CONV"}, pointwise{"REMAT_CUDA_POINTWISE"};
  Switches(const char* g, const char* c, const char* p) {
    gemm.set(g);
    conv.set(c);
    pointwise.set(p);
  }
};

TEST(MixedPaths, ACudaRunOfAGptSaysItsProductsAndItsOtherOps) {
  const Model m = make_preset("gpt:1:32:4:16:2:bf16@cuda:64");
  const GemmPathCount g = count_gemm_paths(m, GemmMode::TensorCore);
  ASSERT_GT(g.tensor_core, 0);
  {
    const Switches defaults(nullptr, nullptr, nullptr);
    const auto r = mixed_path_reports(m, "cuda (NVIDIA H100)");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].line, "bf16/f16 products: tensor cores (16-bit operands, f32 sums) for " + std::to_string(g.tensor_core) +
                             " of the " + std::to_string(g.lowered) +
                             " lowered ops (Linear, Dense, MatMul), f32 GEMMs for the rest; REMAT_CUDA_GEMM=f32 runs "
                             "all as f32 GEMMs");
    EXPECT_EQ(r[0].json["path"], "tensor");
    EXPECT_EQ(r[1].line, "");  // no convolution
    EXPECT_TRUE(r[1].json.is_null());
    EXPECT_EQ(r[2].line,
              "bf16/f16 tensors of the other ops: loaded and stored as stored for all 10 ops that read or write "
              "them; REMAT_CUDA_POINTWISE=f32 widens all");
    EXPECT_EQ(r[2].json["direct_ops"], 10);
  }
  {
    // Every op bf16 (CPU autocast's lists): the LayerNorms have no 16-bit kernel.
    const Switches defaults(nullptr, nullptr, nullptr);
    const auto all = mixed_path_reports(make_preset("gpt:1:32:4:16:2:bf16:64"), "cuda");
    EXPECT_EQ(all[2].line,
              "bf16/f16 tensors of the other ops: loaded and stored as stored for 12 of the 17 ops that read or "
              "write them, widened to f32 copies for the rest; REMAT_CUDA_POINTWISE=f32 widens all");
  }
  const Switches f32("f32", "f32", "f32");
  const auto r = mixed_path_reports(m, "cuda");
  EXPECT_EQ(r[0].line, "bf16/f16 products: f32 GEMMs of the rounded values for all " + std::to_string(g.lowered) +
                           " lowered ops (REMAT_CUDA_GEMM=f32)");
  EXPECT_EQ(r[2].line,
            "bf16/f16 tensors of the other ops: widened to f32 copies for all 10 ops that read or write them "
            "(REMAT_CUDA_POINTWISE=f32)");
  EXPECT_EQ(r[2].json["path"], "f32");
}

TEST(MixedPaths, ACudaRunOfAResNetSaysItsConvolutions) {
  const Model m = make_preset("resnet:10:4:32:2:5:bf16@cuda");
  {
    const Switches defaults(nullptr, nullptr, nullptr);
    const auto r = mixed_path_reports(m, "cuda");
    EXPECT_EQ(r[1].key, std::string("cuda_conv"));
    EXPECT_EQ(r[1].line,
              "bf16/f16 convolutions: cuDNN on 16-bit tensors (f32 compute, tensor-op math, deterministic algorithms) "
              "for 12 of the 12 (Conv; a ConvTranspose runs in f32); REMAT_CUDA_CONV=f32 runs all in f32");
    EXPECT_EQ(r[1].json["tensor_core_ops"], 12);
  }
  const Switches conv_f32(nullptr, "f32", nullptr);
  const auto r = mixed_path_reports(m, "cuda");
  EXPECT_EQ(r[1].line,
            "bf16/f16 convolutions: f32 cuDNN convolutions of the rounded values for all 12 (REMAT_CUDA_CONV=f32)");
  EXPECT_EQ(r[1].json["tensor_core_ops"], 0);
}

// On the CPU nothing is said, whatever the switches.
TEST(MixedPaths, TheCpuSaysNothing) {
  const Switches bad("fast", "fast", "fast");  // not even read
  for (const MixedPathReport& p : mixed_path_reports(make_preset("resnet:10:4:32:2:5:bf16@cuda"), "cpu")) {
    EXPECT_EQ(p.line, "") << p.key;
    EXPECT_TRUE(p.json.is_null()) << p.key;
  }
}

}  // namespace
}  // namespace remat
