// Every remat::cuda kernel against its remat::cpu reference on random inputs,
// forward and backward, with accumulate off and on; dropout masks bit for bit; and
// bit-identical results when a kernel runs twice. Without a usable device each test
// skips with the runtime's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/cpu_kernels.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using namespace remat::gpu_testing;  // NOLINT: the fixture and helpers of every GPU kernel test

// ---- linear and dense -------------------------------------------------------------

struct LinearShape {
  int64_t rows, in, out;
  float tol;
};

// Runs act (None = plain linear) forward and backward on both sides and compares
// y, dx (overwrite from NaN, then accumulate onto random values), dW and db (+=).
void check_linear(const LinearShape& s, Act act, bool dense, cublasHandle_t cublas,
                  cudaStream_t stream) {
  const std::string name = std::string(dense ? "dense" : "linear") + " act " +
                           std::to_string(static_cast<int>(act)) + " (" +
                           std::to_string(s.rows) + "," + std::to_string(s.in) + "," +
                           std::to_string(s.out) + ")";
  const Vec x = random_vec(s.rows * s.in, 1);
  const Vec W = random_vec(s.out * s.in, 2, -0.2f, 0.2f);
  const Vec b = random_vec(s.out, 3);
  const Vec dy = random_vec(s.rows * s.out, 4);
  const Dev x_d(x), W_d(W), b_d(b), dy_d(dy);

  Vec y_cpu(s.rows * s.out);
  Dev y_gpu(nan_vec(y_cpu.size()));
  if (dense) {
    cpu::dense_fwd(act, x.data(), W.data(), b.data(), y_cpu.data(), s.rows, s.in, s.out);
    gpu::dense_fwd(act, x_d.get(), W_d.get(), b_d.get(), y_gpu.get(), s.rows, s.in, s.out,
                   cublas, stream);
  } else {
    cpu::linear_fwd(x.data(), W.data(), b.data(), y_cpu.data(), s.rows, s.in, s.out);
    gpu::linear_fwd(x_d.get(), W_d.get(), b_d.get(), y_gpu.get(), s.rows, s.in, s.out, cublas,
                    stream);
  }
  expect_close(y_gpu.fetch(), y_cpu, s.tol, name + " y");

  for (const bool accumulate : {false, true}) {
    const std::string tag = name + (accumulate ? " accumulate" : " overwrite");
    const Vec dx0 = accumulate ? random_vec(s.rows * s.in, 5) : nan_vec(s.rows * s.in);
    Vec dx_cpu = accumulate ? dx0 : Vec(dx0.size(), 0.0f);
    Vec dW_cpu = random_vec(W.size(), 6);  // parameter grads always +=
    Vec db_cpu = random_vec(b.size(), 7);
    Vec scratch_cpu(dy.size());
    const Dev dx_gpu(dx0), dW_gpu(dW_cpu), db_gpu(db_cpu), scratch_gpu(nan_vec(dy.size()));
    const Dev y_dev(y_cpu);  // both sides read the same forward output
    if (dense) {
      cpu::dense_bwd(act, x.data(), y_cpu.data(), W.data(), dy.data(), dx_cpu.data(),
                     dW_cpu.data(), db_cpu.data(), scratch_cpu.data(), s.rows, s.in, s.out,
                     accumulate);
      gpu::dense_bwd(act, x_d.get(), y_dev.get(), W_d.get(), dy_d.get(), dx_gpu.get(),
                     dW_gpu.get(), db_gpu.get(), scratch_gpu.get(), s.rows, s.in, s.out,
                     accumulate, cublas, stream);
    } else {
      cpu::linear_bwd(x.data(), W.data(), dy.data(), dx_cpu.data(), dW_cpu.data(),
                      db_cpu.data(), s.rows, s.in, s.out, accumulate);
      gpu::linear_bwd(x_d.get(), W_d.get(), dy_d.get(), dx_gpu.get(), dW_gpu.get(),
                      db_gpu.get(), s.rows, s.in, s.out, accumulate, cublas, stream);
    }
    expect_close(dx_gpu.fetch(), dx_cpu, s.tol, tag + " dx");
    expect_close(dW_gpu.fetch(), dW_cpu, s.tol, tag + " dW");
    expect_close(db_gpu.fetch(), db_cpu, s.tol, tag + " db");
  }
}

TEST_F(GpuKernels, LinearMatchesCpu) {
  for (const LinearShape& s : {LinearShape{37, 53, 29, kTol}, LinearShape{1, 5, 3, kTol},
                               LinearShape{256, 512, 384, kGemmTol}})
    check_linear(s, Act::None, /*dense=*/false, cublas_, stream_);
}

TEST_F(GpuKernels, DenseMatchesCpu) {
  for (const Act act : {Act::None, Act::ReLU, Act::Tanh}) {
    check_linear({37, 53, 29, kTol}, act, /*dense=*/true, cublas_, stream_);
    check_linear({128, 256, 192, kGemmTol}, act, /*dense=*/true, cublas_, stream_);
  }
}

// in == 0: y is the bias, and db still receives Σ dy.
TEST_F(GpuKernels, LinearWithNoInputsIsBiasOnly) {
  const int64_t rows = 4, out = 3;
  const Vec b = random_vec(out, 3), dy = random_vec(rows * out, 4);
  Vec y_cpu(rows * out), db_cpu(out, 0.0f);
  const Dev db(b), dy_dev(dy), y_gpu(nan_vec(rows * out)), db_gpu(db_cpu);
  cpu::linear_fwd(nullptr, nullptr, b.data(), y_cpu.data(), rows, 0, out);
  gpu::linear_fwd(nullptr, nullptr, db.get(), y_gpu.get(), rows, 0, out, cublas_, stream_);
  expect_close(y_gpu.fetch(), y_cpu, kTol, "y");
  cpu::linear_bwd(nullptr, nullptr, dy.data(), nullptr, nullptr, db_cpu.data(), rows, 0, out,
                  false);
  gpu::linear_bwd(nullptr, nullptr, dy_dev.get(), nullptr, nullptr, db_gpu.get(), rows, 0, out,
                  false, cublas_, stream_);
  expect_close(db_gpu.fetch(), db_cpu, kTol, "db");
}

// ---- activations ----------------------------------------------------------------

TEST_F(GpuKernels, ActivationsMatchCpu) {
  const int64_t n = 10007;
  const Vec x = random_vec(n, 11, -4.0f, 4.0f);
  const Vec dy = random_vec(n, 12);
  const Dev x_dev(x), dy_dev(dy);
  for (const Act act : {Act::None, Act::ReLU, Act::Tanh, Act::GELU}) {
    const std::string name = "act " + std::to_string(static_cast<int>(act));
    Vec y_cpu(n);
    const Dev y_gpu(nan_vec(n));
    cpu::act_fwd(act, x.data(), y_cpu.data(), n);
    gpu::act_fwd(act, x_dev.get(), y_gpu.get(), n, stream_);
    expect_close(y_gpu.fetch(), y_cpu, kTol, name + " y");

    // ReLU and Tanh differentiate from y, GELU (and None, which ignores it) from x.
    const Vec& saved = (act == Act::ReLU || act == Act::Tanh) ? y_cpu : x;
    const Dev saved_dev(saved);
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(n, 13) : nan_vec(n);
      Vec dx_cpu = accumulate ? dx0 : Vec(n, 0.0f);
      const Dev dx_gpu(dx0);
      cpu::act_bwd(act, saved.data(), dy.data(), dx_cpu.data(), n, accumulate);
      gpu::act_bwd(act, saved_dev.get(), dy_dev.get(), dx_gpu.get(), n, accumulate, stream_);
      expect_close(dx_gpu.fetch(), dx_cpu, kTol,
                   name + (accumulate ? " dx accumulate" : " dx overwrite"));
    }
  }
}

// ---- layernorm --------------------------------------------------------------------

TEST_F(GpuKernels, LayerNormMatchesCpu) {
  struct Shape {
    int64_t rows, cols;
  };
  // cols below a warp, between, and past one block of 256 threads.
  for (const Shape s : {Shape{5, 7}, Shape{19, 300}, Shape{64, 1024}}) {
    const std::string name =
        "layernorm (" + std::to_string(s.rows) + "," + std::to_string(s.cols) + ")";
    const int64_t n = s.rows * s.cols;
    const Vec x = random_vec(n, 21, 2.0f, 5.0f);  // a mean far from 0 tests the centring
    const Vec gamma = random_vec(s.cols, 22, 0.5f, 1.5f);
    const Vec beta = random_vec(s.cols, 23);
    const Vec dy = random_vec(n, 24);
    const Dev x_dev(x), gamma_dev(gamma), beta_dev(beta), dy_dev(dy);

    Vec y_cpu(n), stats_cpu(2 * s.rows);
    const Dev y_gpu(nan_vec(n)), stats_gpu(nan_vec(2 * s.rows));
    cpu::layernorm_fwd(x.data(), gamma.data(), beta.data(), y_cpu.data(), stats_cpu.data(),
                       s.rows, s.cols);
    gpu::layernorm_fwd(x_dev.get(), gamma_dev.get(), beta_dev.get(), y_gpu.get(),
                       stats_gpu.get(), s.rows, s.cols, stream_);
    expect_close(y_gpu.fetch(), y_cpu, kTol, name + " y");
    expect_close(stats_gpu.fetch(), stats_cpu, kTol, name + " stats (means, then rstds)");

    const Dev stats_dev(stats_cpu);  // both backwards read the same stats
    for (const bool accumulate : {false, true}) {
      const std::string tag = name + (accumulate ? " accumulate" : " overwrite");
      const Vec dx0 = accumulate ? random_vec(n, 25) : nan_vec(n);
      Vec dx_cpu = accumulate ? dx0 : Vec(n, 0.0f);
      Vec dgamma_cpu = random_vec(s.cols, 26), dbeta_cpu = random_vec(s.cols, 27);
      const Dev dx_gpu(dx0), dgamma_gpu(dgamma_cpu), dbeta_gpu(dbeta_cpu);
      cpu::layernorm_bwd(x.data(), stats_cpu.data(), gamma.data(), dy.data(), dx_cpu.data(),
                         dgamma_cpu.data(), dbeta_cpu.data(), s.rows, s.cols, accumulate);
      gpu::layernorm_bwd(x_dev.get(), stats_dev.get(), gamma_dev.get(), dy_dev.get(),
                         dx_gpu.get(), dgamma_gpu.get(), dbeta_gpu.get(), s.rows, s.cols,
                         accumulate, stream_);
      expect_close(dx_gpu.fetch(), dx_cpu, 2 * kTol, tag + " dx");
      expect_close(dgamma_gpu.fetch(), dgamma_cpu, 2 * kTol, tag + " dgamma");
      expect_close(dbeta_gpu.fetch(), dbeta_cpu, 2 * kTol, tag + " dbeta");
    }
  }
}

// ---- add and dropout --------------------------------------------------------------

TEST_F(GpuKernels, AddAndAddIntoAreExact) {
  const int64_t n = 4099;
  const Vec a = random_vec(n, 31), b = random_vec(n, 32);
  const Dev a_dev(a), b_dev(b);
  Vec y_cpu(n);
  const Dev y_gpu(nan_vec(n));
  cpu::add_fwd(a.data(), b.data(), y_cpu.data(), n);
  gpu::add_fwd(a_dev.get(), b_dev.get(), y_gpu.get(), n, stream_);
  expect_bitwise(y_gpu.fetch(), y_cpu, "add_fwd");  // one IEEE add: exact on both sides

  Vec dst_cpu = nan_vec(n);
  const Dev dst_gpu(dst_cpu);
  cpu::add_into(a.data(), dst_cpu.data(), n, false);
  gpu::add_into(a_dev.get(), dst_gpu.get(), n, false, stream_);
  expect_bitwise(dst_gpu.fetch(), dst_cpu, "add_into overwrite");
  cpu::add_into(b.data(), dst_cpu.data(), n, true);
  gpu::add_into(b_dev.get(), dst_gpu.get(), n, true, stream_);
  expect_bitwise(dst_gpu.fetch(), dst_cpu, "add_into accumulate");
}

TEST_F(GpuKernels, DropoutMaskIsBitIdenticalToCpu) {
  const int64_t n = 100003;
  const uint64_t seed = 0x5EEDull;
  const uint32_t op_id = 7;
  const Vec x = random_vec(n, 41, 1.0f, 2.0f);  // never 0, so y == 0 means dropped
  const Vec dy = random_vec(n, 42, 1.0f, 2.0f);
  const Dev x_dev(x), dy_dev(dy);
  for (const float p : {0.0f, 0.1f, 0.5f, 0.9f, 1.0f}) {
    const std::string name = "dropout p=" + std::to_string(p);
    Vec y_cpu(n);
    const Dev y_gpu(nan_vec(n));
    cpu::dropout_fwd(x.data(), y_cpu.data(), n, p, seed, op_id);
    gpu::dropout_fwd(x_dev.get(), y_gpu.get(), n, p, seed, op_id, stream_);
    const Vec y = y_gpu.fetch();
    size_t mask_mismatches = 0;
    for (int64_t i = 0; i < n; ++i)
      mask_mismatches += (y[i] != 0.0f) != cpu::dropout_keep(seed, op_id, i, p);
    EXPECT_EQ(mask_mismatches, 0u) << name;
    // One multiply by the same float scale: the values agree bit for bit too.
    expect_bitwise(y, y_cpu, name + " y");

    Vec dx_cpu(n);
    const Dev dx_gpu(nan_vec(n));
    cpu::dropout_bwd(dy.data(), dx_cpu.data(), n, p, seed, op_id, false);
    gpu::dropout_bwd(dy_dev.get(), dx_gpu.get(), n, p, seed, op_id, false, stream_);
    expect_bitwise(dx_gpu.fetch(), dx_cpu, name + " dx overwrite");
    // dx + dy·scale may be one fused multiply-add on the device: compare within rounding.
    cpu::dropout_bwd(dy.data(), dx_cpu.data(), n, p, seed, op_id, true);
    gpu::dropout_bwd(dy_dev.get(), dx_gpu.get(), n, p, seed, op_id, true, stream_);
    expect_close(dx_gpu.fetch(), dx_cpu, 1e-6f, name + " dx accumulate");
  }
}

TEST_F(GpuKernels, DropoutMaskDependsOnSeedAndOp) {
  const int64_t n = 4096;
  const Dev x(Vec(n, 1.0f)), a(nan_vec(n)), b(nan_vec(n)), c(nan_vec(n));
  gpu::dropout_fwd(x.get(), a.get(), n, 0.5f, 1, 3, stream_);
  gpu::dropout_fwd(x.get(), b.get(), n, 0.5f, 2, 3, stream_);
  gpu::dropout_fwd(x.get(), c.get(), n, 0.5f, 1, 4, stream_);
  const Vec va = a.fetch(), vb = b.fetch(), vc = c.fetch();
  EXPECT_NE(std::memcmp(va.data(), vb.data(), n * sizeof(float)), 0) << "seed ignored";
  EXPECT_NE(std::memcmp(va.data(), vc.data(), n * sizeof(float)), 0) << "op id ignored";
}

// ---- losses -----------------------------------------------------------------------

TEST_F(GpuKernels, MseMatchesCpu) {
  const int64_t n = 100003;
  const Vec x = random_vec(n, 51), t = random_vec(n, 52);
  const Dev x_dev(x), t_dev(t), loss(nan_vec(1));
  gpu::mse_fwd(x_dev.get(), t_dev.get(), loss.get(), n, stream_);
  expect_close(loss.fetch(), {cpu::mse_fwd(x.data(), t.data(), n)}, 1e-5f, "mse loss");
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(n, 53) : nan_vec(n);
    Vec dx_cpu = accumulate ? dx0 : Vec(n, 0.0f);
    const Dev dx_gpu(dx0);
    cpu::mse_bwd(x.data(), t.data(), dx_cpu.data(), n, accumulate);
    gpu::mse_bwd(x_dev.get(), t_dev.get(), dx_gpu.get(), n, accumulate, stream_);
    expect_close(dx_gpu.fetch(), dx_cpu, kTol, accumulate ? "mse dx accumulate" : "mse dx");
  }
}

TEST_F(GpuKernels, BceWithLogitsMatchesCpu) {
  const int64_t n = 100003;
  Vec x = random_vec(n, 54), t(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= 8;  // past the sigmoid's linear part, both signs
    t[i] = static_cast<float>(i % 2);
  }
  const Dev x_dev(x), t_dev(t), loss(nan_vec(1));
  gpu::bce_logits_fwd(x_dev.get(), t_dev.get(), loss.get(), n, stream_);
  expect_close(loss.fetch(), {cpu::bce_logits_fwd(x.data(), t.data(), n)}, 1e-5f, "bce loss");
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(n, 55) : nan_vec(n);
    Vec dx_cpu = accumulate ? dx0 : Vec(n, 0.0f);
    const Dev dx_gpu(dx0);
    cpu::bce_logits_bwd(x.data(), t.data(), dx_cpu.data(), n, accumulate);
    gpu::bce_logits_bwd(x_dev.get(), t_dev.get(), dx_gpu.get(), n, accumulate, stream_);
    expect_close(dx_gpu.fetch(), dx_cpu, kTol, accumulate ? "bce dx accumulate" : "bce dx");
  }
}

TEST_F(GpuKernels, SoftmaxCrossEntropyMatchesCpu) {
  struct Shape {
    int64_t rows, classes;
    float scale;
  };
  // Fewer classes than a warp, many, and logits large enough that exp() would
  // overflow without subtracting the row max.
  for (const Shape s : {Shape{33, 10, 1.0f}, Shape{7, 1000, 3.0f}, Shape{50, 37, 60.0f}}) {
    const std::string name =
        "softmax_ce (" + std::to_string(s.rows) + "," + std::to_string(s.classes) + ")";
    const Vec logits = random_vec(s.rows * s.classes, 61, -s.scale, s.scale);
    std::vector<int32_t> labels(s.rows);
    for (int64_t r = 0; r < s.rows; ++r) labels[r] = static_cast<int32_t>((r * 7) % s.classes);
    const Dev logits_dev(logits), loss(nan_vec(1));
    const DeviceArray<int32_t> labels_dev(labels);
    gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), loss.get(), s.rows, s.classes,
                        stream_);
    expect_close(loss.fetch(),
                 {cpu::softmax_ce_fwd(logits.data(), labels.data(), s.rows, s.classes)}, 1e-5f,
                 name + " loss");
    for (const bool accumulate : {false, true}) {
      const size_t n = logits.size();
      const Vec dx0 = accumulate ? random_vec(n, 62) : nan_vec(n);
      Vec dx_cpu = accumulate ? dx0 : Vec(n, 0.0f);
      const Dev dx_gpu(dx0);
      cpu::softmax_ce_bwd(logits.data(), labels.data(), dx_cpu.data(), s.rows, s.classes,
                          accumulate);
      gpu::softmax_ce_bwd(logits_dev.get(), labels_dev.get(), dx_gpu.get(), s.rows, s.classes,
                          accumulate, stream_);
      expect_close(dx_gpu.fetch(), dx_cpu, 1e-5f,
                   name + (accumulate ? " dx accumulate" : " dx overwrite"));
    }
  }
}

// The loss keeping log-probabilities (a PyTorch capture's cross-entropy):
// logp, the loss and the gradient from logp alone as on the CPU.
TEST_F(GpuKernels, SoftmaxCrossEntropyKeepingLogProbsMatchesCpu) {
  for (const int64_t classes : {10, 1000}) {
    const int64_t rows = 33;
    const std::string name = "softmax_ce keep logp (" + std::to_string(classes) + ")";
    const Vec logits = random_vec(rows * classes, 64, -3.0f, 3.0f);
    std::vector<int32_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<int32_t>((r * 7) % classes);
    Vec logp_cpu(logits.size());
    const float loss_cpu = cpu::softmax_ce_fwd_keep_logp(logits.data(), labels.data(), logp_cpu.data(), rows, classes);
    const Dev logits_dev(logits), loss(nan_vec(1)), logp(nan_vec(logits.size()));
    const DeviceArray<int32_t> labels_dev(labels);
    gpu::softmax_ce_fwd_keep_logp(logits_dev.get(), labels_dev.get(), loss.get(), logp.get(), rows, classes, stream_);
    expect_close(loss.fetch(), {loss_cpu}, 1e-5f, name + " loss");
    expect_close(logp.fetch(), logp_cpu, 1e-5f, name + " logp");
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(logits.size(), 65) : nan_vec(logits.size());
      Vec dx_cpu = accumulate ? dx0 : Vec(logits.size(), 0.0f);
      const Dev dx_gpu(dx0);
      cpu::softmax_ce_bwd_from_logp(logp_cpu.data(), labels.data(), dx_cpu.data(), rows, classes, accumulate);
      gpu::softmax_ce_bwd_from_logp(logp.get(), labels_dev.get(), dx_gpu.get(), rows, classes, accumulate, stream_);
      expect_close(dx_gpu.fetch(), dx_cpu, 1e-5f, name + (accumulate ? " dx accumulate" : " dx overwrite"));
    }
  }
}

// Label smoothing (PyTorch's label_smoothing): every launcher, logits kept or
// logp kept, one block and over the grid, against the CPU's kernels at the
// same ε (themselves checked against float64, tests/kernels/test_losses.cpp).
TEST_F(GpuKernels, SoftmaxCrossEntropyLabelSmoothingMatchesCpu) {
  for (const int64_t classes : {10, 1000}) {
    for (const double eps : {0.1, 1.0}) {
      const int64_t rows = 37;
      const std::string name = "softmax_ce eps " + std::to_string(eps) + " (" + std::to_string(classes) + ")";
      const Vec logits = random_vec(rows * classes, 66, -3.0f, 3.0f);
      std::vector<int32_t> labels(rows);
      for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<int32_t>((r * 7) % classes);
      Vec logp_cpu(logits.size());
      const float loss_cpu =
          cpu::softmax_ce_fwd_keep_logp(logits.data(), labels.data(), logp_cpu.data(), rows, classes, eps);
      const Dev logits_dev(logits), one_block(nan_vec(1)), grid(nan_vec(1)), kept(nan_vec(1)),
          logp(nan_vec(logits.size()));
      const DeviceArray<int32_t> labels_dev(labels);
      const int64_t count = gpu::softmax_ce_partial_count(rows);
      const DeviceArray<double> partials(std::vector<double>(static_cast<std::size_t>(count), 0.0));
      gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), one_block.get(), rows, classes, stream_, nullptr, 0, eps);
      gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), grid.get(), rows, classes, stream_, partials.get(), count,
                          eps);
      gpu::softmax_ce_fwd_keep_logp(logits_dev.get(), labels_dev.get(), kept.get(), logp.get(), rows, classes, stream_,
                                    nullptr, 0, eps);
      expect_close(one_block.fetch(), {loss_cpu}, 1e-5f, name + " loss, one block");
      expect_close(grid.fetch(), {loss_cpu}, 1e-5f, name + " loss, over the grid");
      expect_close(kept.fetch(), {loss_cpu}, 1e-5f, name + " loss keeping logp");
      expect_close(logp.fetch(), logp_cpu, 1e-5f, name + " logp");
      for (const bool accumulate : {false, true}) {
        const Vec dx0 = accumulate ? random_vec(logits.size(), 67) : nan_vec(logits.size());
        Vec dx_cpu = accumulate ? dx0 : Vec(logits.size(), 0.0f), dx_cpu_logp = dx_cpu;
        const Dev dx_gpu(dx0), dx_gpu_logp(dx0);
        cpu::softmax_ce_bwd(logits.data(), labels.data(), dx_cpu.data(), rows, classes, accumulate, eps);
        cpu::softmax_ce_bwd_from_logp(logp_cpu.data(), labels.data(), dx_cpu_logp.data(), rows, classes, accumulate,
                                      eps);
        gpu::softmax_ce_bwd(logits_dev.get(), labels_dev.get(), dx_gpu.get(), rows, classes, accumulate, stream_, eps);
        gpu::softmax_ce_bwd_from_logp(logp.get(), labels_dev.get(), dx_gpu_logp.get(), rows, classes, accumulate,
                                      stream_, eps);
        const std::string how = accumulate ? " accumulate" : " overwrite";
        expect_close(dx_gpu.fetch(), dx_cpu, 1e-5f, name + " dx" + how);
        expect_close(dx_gpu_logp.fetch(), dx_cpu_logp, 1e-5f, name + " dx from logp" + how);
      }
    }
  }
}

// With a buffer for per-block partial sums (the backend lends cuBLAS's
// workspace) the loss's rows spread over the whole grid: the same loss as the
// CPU and as one block, the same bits run to run, and a buffer too small for
// the grid falls back to one block.
TEST_F(GpuKernels, SoftmaxCrossEntropyOverTheGridMatchesCpuAndOneBlock) {
  struct Shape {
    int64_t rows, classes;
  };
  // More rows than 1024 blocks of 8 warps take in one pass; GPT-like wide rows; one row.
  for (const Shape s : {Shape{9000, 37}, Shape{200, 5000}, Shape{1, 10}}) {
    const std::string name = "softmax_ce over the grid (" + std::to_string(s.rows) + "," + std::to_string(s.classes) + ")";
    const Vec logits = random_vec(s.rows * s.classes, 66, -4.0f, 4.0f);
    std::vector<int32_t> labels(static_cast<std::size_t>(s.rows));
    for (int64_t r = 0; r < s.rows; ++r) labels[static_cast<std::size_t>(r)] = static_cast<int32_t>((r * 13) % s.classes);
    const Dev logits_dev(logits), one_block(nan_vec(1)), grid(nan_vec(1)), again(nan_vec(1)), small(nan_vec(1));
    const DeviceArray<int32_t> labels_dev(labels);
    const int64_t count = gpu::softmax_ce_partial_count(s.rows);
    ASSERT_EQ(count, std::min<int64_t>((s.rows + 7) / 8, 1024)) << name;
    const DeviceArray<double> partials(std::vector<double>(static_cast<std::size_t>(count), std::nan("")));
    gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), one_block.get(), s.rows, s.classes, stream_);
    gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), grid.get(), s.rows, s.classes, stream_, partials.get(), count);
    gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), again.get(), s.rows, s.classes, stream_, partials.get(), count);
    gpu::softmax_ce_fwd(logits_dev.get(), labels_dev.get(), small.get(), s.rows, s.classes, stream_, partials.get(),
                        count - 1);
    const float cpu_loss = cpu::softmax_ce_fwd(logits.data(), labels.data(), s.rows, s.classes);
    expect_close(grid.fetch(), {cpu_loss}, 1e-5f, name + " loss");
    expect_close(grid.fetch(), one_block.fetch(), 1e-6f, name + " against one block");
    expect_bitwise(again.fetch(), grid.fetch(), name + " rerun");
    expect_bitwise(small.fetch(), one_block.fetch(), name + " buffer too small: one block");
  }
  // A label out of range poisons the grid's loss too.
  const Dev logits(random_vec(3 * 4, 63)), loss(Vec{0.0f});
  const DeviceArray<int32_t> labels(std::vector<int32_t>{0, 4, 1});
  const DeviceArray<double> partials(std::vector<double>(1, 0.0));
  gpu::softmax_ce_fwd(logits.get(), labels.get(), loss.get(), 3, 4, stream_, partials.get(), 1);
  EXPECT_TRUE(std::isnan(loss.fetch()[0]));
}

// The CPU throws on a label out of range; a kernel cannot, so it poisons the loss.
TEST_F(GpuKernels, SoftmaxCrossEntropyBadLabelGivesNaN) {
  const Dev logits(random_vec(3 * 4, 63)), loss(Vec{0.0f});
  const DeviceArray<int32_t> labels(std::vector<int32_t>{0, 4, 1});
  gpu::softmax_ce_fwd(logits.get(), labels.get(), loss.get(), 3, 4, stream_);
  EXPECT_TRUE(std::isnan(loss.fetch()[0]));
}

// ---- determinism and the accumulate rule -------------------------------------------

// Each op run twice on the same inputs must give the same bits: recomputation is
// compared with store-all bit for bit. Big enough shapes that cuBLAS picks tiled
// (possibly split-K) kernels and every reduction spans many blocks.
TEST_F(GpuKernels, RunningTwiceIsBitIdentical) {
  const int64_t rows = 512, in = 1024, out = 768;
  const Vec x = random_vec(rows * in, 71), W = random_vec(out * in, 72, -0.05f, 0.05f);
  const Vec b = random_vec(out, 73), dy = random_vec(rows * out, 74);
  const Vec gamma = random_vec(out, 75), beta = random_vec(out, 76);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<int32_t>((r * 13) % out);
  const Dev x_d(x), W_d(W), b_d(b), dy_d(dy), gamma_d(gamma), beta_d(beta);
  const DeviceArray<int32_t> labels_d(labels);

  auto run_all = [&] {
    std::vector<Vec> results;
    const Dev y(nan_vec(rows * out)), dx(nan_vec(rows * in)), dW(Vec(out * in, 0.0f)),
        db(Vec(out, 0.0f)), scratch(nan_vec(rows * out)), ln_y(nan_vec(rows * out)),
        stats(nan_vec(2 * rows)), ln_dx(nan_vec(rows * out)), dgamma(Vec(out, 0.0f)),
        dbeta(Vec(out, 0.0f)), ce_loss(nan_vec(1)), ce_dx(nan_vec(rows * out)),
        mse_loss(nan_vec(1)), drop(nan_vec(rows * out));
    gpu::dense_fwd(Act::Tanh, x_d.get(), W_d.get(), b_d.get(), y.get(), rows, in, out, cublas_,
                   stream_);
    gpu::dense_bwd(Act::Tanh, x_d.get(), y.get(), W_d.get(), dy_d.get(), dx.get(), dW.get(),
                   db.get(), scratch.get(), rows, in, out, false, cublas_, stream_);
    gpu::layernorm_fwd(y.get(), gamma_d.get(), beta_d.get(), ln_y.get(), stats.get(), rows, out,
                       stream_);
    gpu::layernorm_bwd(y.get(), stats.get(), gamma_d.get(), dy_d.get(), ln_dx.get(),
                       dgamma.get(), dbeta.get(), rows, out, false, stream_);
    gpu::softmax_ce_fwd(ln_y.get(), labels_d.get(), ce_loss.get(), rows, out, stream_);
    gpu::softmax_ce_bwd(ln_y.get(), labels_d.get(), ce_dx.get(), rows, out, false, stream_);
    gpu::mse_fwd(ln_y.get(), y.get(), mse_loss.get(), rows * out, stream_);
    gpu::dropout_fwd(ln_y.get(), drop.get(), rows * out, 0.25f, 99, 5, stream_);
    for (const Dev* d : {&y, &dx, &dW, &db, &ln_y, &stats, &ln_dx, &dgamma, &dbeta, &ce_loss,
                         &ce_dx, &mse_loss, &drop})
      results.push_back(d->fetch());
    return results;
  };
  const std::vector<Vec> first = run_all();
  const std::vector<Vec> second = run_all();
  const char* names[] = {"dense y", "dense dx", "dense dW", "dense db", "layernorm y",
                         "layernorm stats", "layernorm dx", "dgamma", "dbeta", "ce loss",
                         "ce dx", "mse loss", "dropout y"};
  for (size_t i = 0; i < first.size(); ++i) expect_bitwise(first[i], second[i], names[i]);
}

// accumulate == true must give (what false gives) + (what dx held), for every op.
TEST_F(GpuKernels, AccumulateAddsToWhatWasThere) {
  const int64_t rows = 24, cols = 40, n = rows * cols;
  const Vec x = random_vec(n, 81), x2 = random_vec(n, 82), dy = random_vec(n, 83);
  const Vec W = random_vec(cols * cols, 84), gamma = random_vec(cols, 85);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<int32_t>(r % cols);
  const Dev x_d(x), x2_d(x2), dy_d(dy), W_d(W), gamma_d(gamma), stats(nan_vec(2 * rows)),
      ln_y(nan_vec(n)), beta(Vec(cols, 0.0f));
  const DeviceArray<int32_t> labels_d(labels);
  gpu::layernorm_fwd(x_d.get(), gamma_d.get(), beta.get(), ln_y.get(), stats.get(), rows, cols,
                     stream_);
  const Vec prior = random_vec(n, 86);

  // Each entry writes the gradient of one op into dx with the given rule.
  struct Case {
    const char* name;
    std::function<void(float* dx, bool accumulate)> run;
  };
  const Dev dW(Vec(cols * cols, 0.0f)), db(Vec(cols, 0.0f)), dgamma(Vec(cols, 0.0f)),
      dbeta(Vec(cols, 0.0f)), scratch(nan_vec(n));
  const std::vector<Case> cases = {
      {"linear_bwd", [&](float* dx, bool acc) {
         gpu::linear_bwd(x_d.get(), W_d.get(), dy_d.get(), dx, dW.get(), db.get(), rows, cols,
                         cols, acc, cublas_, stream_);
       }},
      {"dense_bwd", [&](float* dx, bool acc) {
         gpu::dense_bwd(Act::ReLU, x_d.get(), x2_d.get(), W_d.get(), dy_d.get(), dx, dW.get(),
                        db.get(), scratch.get(), rows, cols, cols, acc, cublas_, stream_);
       }},
      {"act_bwd", [&](float* dx, bool acc) {
         gpu::act_bwd(Act::GELU, x_d.get(), dy_d.get(), dx, n, acc, stream_);
       }},
      {"layernorm_bwd", [&](float* dx, bool acc) {
         gpu::layernorm_bwd(x_d.get(), stats.get(), gamma_d.get(), dy_d.get(), dx, dgamma.get(),
                            dbeta.get(), rows, cols, acc, stream_);
       }},
      {"add_into", [&](float* dx, bool acc) { gpu::add_into(dy_d.get(), dx, n, acc, stream_); }},
      {"dropout_bwd", [&](float* dx, bool acc) {
         gpu::dropout_bwd(dy_d.get(), dx, n, 0.3f, 4, 2, acc, stream_);
       }},
      {"mse_bwd", [&](float* dx, bool acc) {
         gpu::mse_bwd(x_d.get(), x2_d.get(), dx, n, acc, stream_);
       }},
      {"softmax_ce_bwd", [&](float* dx, bool acc) {
         gpu::softmax_ce_bwd(ln_y.get(), labels_d.get(), dx, rows, cols, acc, stream_);
       }},
  };
  for (const Case& c : cases) {
    const Dev fresh(nan_vec(n)), summed(prior);
    c.run(fresh.get(), false);
    c.run(summed.get(), true);
    const Vec alone = fresh.fetch();
    Vec want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = prior[i] + alone[i];
    expect_close(summed.fetch(), want, 1e-5f, c.name);
  }
  // Parameter gradients: two identical linear backwards from zero give twice one.
  const Dev dW1(Vec(cols * cols, 0.0f)), db1(Vec(cols, 0.0f)), dx(nan_vec(n));
  gpu::linear_bwd(x_d.get(), W_d.get(), dy_d.get(), dx.get(), dW1.get(), db1.get(), rows, cols,
                  cols, false, cublas_, stream_);
  Vec twice_dW = dW1.fetch(), twice_db = db1.fetch();
  for (float& v : twice_dW) v *= 2.0f;
  for (float& v : twice_db) v *= 2.0f;
  gpu::linear_bwd(x_d.get(), W_d.get(), dy_d.get(), dx.get(), dW1.get(), db1.get(), rows, cols,
                  cols, false, cublas_, stream_);
  // Within rounding, not bitwise: cuBLAS may add beta·C at a different point of its sum.
  expect_close(dW1.fetch(), twice_dW, 1e-5f, "dW +=");
  expect_close(db1.fetch(), twice_db, 1e-5f, "db +=");
}

}  // namespace
