// The convolution, batch norm, pooling, attention and plumbing kernels of
// gpu/kernels against their CPU references (core/kernels), forward and backward,
// overwrite (from NaN: never read) and accumulate; both convolution paths (cuDNN
// and im2col + cuBLAS) against the CPU and each bit-identical from run to run.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/kernels/channel_walk.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using namespace remat::gpu_testing;  // NOLINT: the fixture and helpers of every GPU kernel test
using remat::cpu::ConvGeom;
using remat::cpu::PoolGeom;

std::string str(const ConvGeom& g) {
  return "conv n" + std::to_string(g.n) + " c" + std::to_string(g.c) + " " + std::to_string(g.h) + "x" +
         std::to_string(g.w) + " k" + std::to_string(g.k) + " " + std::to_string(g.r) + "x" + std::to_string(g.s) +
         " stride " + std::to_string(g.stride_h) + "," + std::to_string(g.stride_w) + " pad " +
         std::to_string(g.pad_h) + "," + std::to_string(g.pad_w) + " dil " + std::to_string(g.dil_h) + "," +
         std::to_string(g.dil_w) + " groups " + std::to_string(g.groups);
}

ConvGeom conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t stride = 1,
              int64_t pad = 0, int64_t dil = 1, int64_t groups = 1) {
  ConvGeom g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.dil_h = g.dil_w = dil;
  g.groups = groups;
  return g;
}

// A device buffer of raw bytes for workspaces.
struct Workspace {
  explicit Workspace(size_t bytes) : bytes(bytes) {
    if (bytes) CUDA_CHECK_THROW(cudaMalloc(&p, bytes));
  }
  ~Workspace() {
    if (p) cudaFree(p);
  }
  void* p = nullptr;
  size_t bytes;
};

class GpuCnnKernels : public GpuKernels {
 protected:
  void SetUp() override {
    GpuKernels::SetUp();
    if (IsSkipped() || HasFailure()) return;
    if (gpu::cudnn_available()) cudnn_ = gpu::cudnn_create(stream_);
  }
  void TearDown() override {
    gpu::cudnn_destroy(cudnn_);
    GpuKernels::TearDown();
  }
  // Both paths where the build has cuDNN; im2col alone otherwise.
  std::vector<void*> conv_paths() const {
    std::vector<void*> paths = {nullptr};
    if (cudnn_) paths.push_back(cudnn_);
    return paths;
  }
  void* cudnn_ = nullptr;
};

// y, dx (overwrite from NaN, then accumulate), dW and db (+=) on both sides.
void check_conv(const ConvGeom& g, void* cudnn, cublasHandle_t cublas, cudaStream_t stream, float tol) {
  const std::string name = str(g) + (cudnn ? " cuDNN" : " im2col");
  SCOPED_TRACE(name);
  const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.k * g.oh() * g.ow();
  const Vec x = random_vec(xn, 11), W = random_vec(g.weight_numel(), 12, -0.3f, 0.3f), b = random_vec(g.k, 13);
  const Vec dy = random_vec(yn, 14);
  Vec scratch(static_cast<size_t>(remat::cpu::conv2d_scratch_floats(g)));
  const Dev x_d(x), W_d(W), b_d(b), dy_d(dy);
  gpu::ConvContext ctx{cublas, cudnn, stream, nullptr, 0};
  Workspace ws(gpu::conv2d_workspace_bytes(g, ctx));
  ctx.workspace = ws.p;
  ctx.workspace_bytes = ws.bytes;

  Vec y_cpu(yn);
  cpu::conv2d_fwd(g, x.data(), W.data(), b.data(), y_cpu.data(), scratch.data());
  const Dev y_gpu(nan_vec(yn));
  gpu::conv2d_fwd(g, x_d.get(), W_d.get(), b_d.get(), y_gpu.get(), ctx);
  const Vec y_first = y_gpu.fetch();
  expect_close(y_first, y_cpu, tol, name + " y");
  gpu::conv2d_fwd(g, x_d.get(), W_d.get(), b_d.get(), y_gpu.get(), ctx);
  expect_bitwise(y_gpu.fetch(), y_first, name + " y again");

  for (const bool accumulate : {false, true}) {
    const std::string tag = name + (accumulate ? " accumulate" : " overwrite");
    const Vec dx0 = accumulate ? random_vec(xn, 15) : nan_vec(xn);
    Vec dx_cpu = accumulate ? dx0 : Vec(xn, 0.0f), dW_cpu = random_vec(W.size(), 16), db_cpu = random_vec(g.k, 17);
    const Vec dW0 = dW_cpu, db0 = db_cpu;
    cpu::conv2d_bwd(g, x.data(), W.data(), dy.data(), dx_cpu.data(), dW_cpu.data(), db_cpu.data(), accumulate,
                    scratch.data());
    Vec first_dx;
    for (int run = 0; run < 2; ++run) {
      const Dev dx_gpu(dx0), dW_gpu(dW0), db_gpu(db0);
      gpu::conv2d_bwd(g, x_d.get(), W_d.get(), dy_d.get(), dx_gpu.get(), dW_gpu.get(), db_gpu.get(), accumulate,
                      ctx);
      const Vec dx = dx_gpu.fetch();
      if (run == 0) {
        expect_close(dx, dx_cpu, tol, tag + " dx");
        expect_close(dW_gpu.fetch(), dW_cpu, tol, tag + " dW");
        expect_close(db_gpu.fetch(), db_cpu, tol, tag + " db");
        first_dx = dx;
      } else {
        expect_bitwise(dx, first_dx, tag + " dx again");
      }
    }
  }
}

TEST_F(GpuCnnKernels, ConvolutionMatchesCpuOnBothPaths) {
  const std::vector<std::pair<ConvGeom, float>> cases = {
      {conv(2, 3, 7, 9, 4, 3, 3, 1, 1), kTol},
      {conv(2, 4, 8, 8, 6, 3, 3, 2, 1, 1, 2), kTol},           // stride 2, two groups
      {conv(2, 4, 9, 9, 4, 3, 3, 1, 1, 1, 4), kTol},           // depthwise
      {conv(1, 3, 11, 10, 5, 3, 3, 1, 2, 2), kTol},            // dilation 2
      {conv(3, 5, 1, 17, 4, 1, 3, 2, 1), kTol},                // 1-D (h = r = 1)
      {conv(2, 8, 6, 6, 16, 1, 1), kTol},                      // 1x1
      {conv(4, 32, 16, 16, 64, 3, 3, 1, 1), kGemmTol},         // long dot products
      {conv(2, 16, 15, 15, 32, 7, 7, 2, 3), kGemmTol},         // a ResNet stem
  };
  for (void* path : conv_paths())
    for (const auto& [g, tol] : cases) check_conv(g, path, cublas_, stream_, tol);
}

// Where the build has cuDNN, a ResNet's usual convolutions must run on it: a
// query that finds no algorithm we accept would otherwise leave them on
// im2col silently, and the test above would compare im2col with the CPU twice.
TEST_F(GpuCnnKernels, CudnnRunsTheUsualConvolutions) {
  if (!cudnn_) GTEST_SKIP() << "this build has no cuDNN (REMAT_CUDNN)";
  gpu::ConvContext with{cublas_, cudnn_, stream_, nullptr, 0}, without{cublas_, nullptr, stream_, nullptr, 0};
  for (const ConvGeom& g : {conv(2, 16, 15, 15, 32, 7, 7, 2, 3), conv(4, 32, 16, 16, 64, 3, 3, 1, 1),
                            conv(2, 8, 6, 6, 16, 1, 1), conv(4, 32, 16, 16, 64, 3, 3, 2, 1)}) {
    EXPECT_TRUE(gpu::conv2d_uses_cudnn(g, with)) << str(g) << ": cuDNN offered no deterministic FMA algorithm";
    EXPECT_FALSE(gpu::conv2d_uses_cudnn(g, without)) << str(g);
  }
}

// ConvContext::nondeterministic_backward (remat run --nondeterministic-backward):
// the forward and a transposed convolution's forward (a backward-data call)
// give the deterministic context's bits. A backward pass that
// conv2d_backward_algos calls deterministic under the option runs the
// deterministic plan's algorithm, so its result has that one's bits; one it
// calls non-deterministic runs an atomic algorithm (backward-data ALGO_0,
// backward-filter ALGO_0 or ALGO_3), a direct sum, as the CPU's im2col GEMMs
// are: each element is then within 2·γ_K·Σ|terms| of the CPU's (K the terms
// of its sum, a starting value included, γ_K = K·u/(1 − K·u), u = 2⁻²⁴;
// Σ|terms| the CPU's convolution backward of |x|, |W|, |dy|, itself low by at
// most a factor 1 + γ_K). (Not against the deterministic algorithm: in f32
// that may be FFT or Winograd, whose error is of another kind.) Without the
// option nothing is reported; with it, what conv2d_backward_algos says is
// printed.
TEST_F(GpuCnnKernels, NondeterministicBackwardChangesOnlyTheBackwardWithinTheSumsBound) {
  if (!cudnn_) GTEST_SKIP() << "this build has no cuDNN (REMAT_CUDNN)";
  for (const ConvGeom& g : {conv(8, 16, 16, 16, 32, 3, 3, 1, 1), conv(4, 64, 8, 8, 64, 3, 3, 2, 1),
                            conv(8, 32, 14, 14, 64, 1, 1), conv(2, 16, 15, 15, 32, 7, 7, 2, 3)}) {
    SCOPED_TRACE(str(g));
    gpu::ConvContext det{cublas_, cudnn_, stream_, nullptr, 0}, any = det;
    any.nondeterministic_backward = true;
    EXPECT_FALSE(gpu::conv2d_backward_algos(g, det).data_nondeterministic);
    EXPECT_FALSE(gpu::conv2d_backward_algos(g, det).filter_nondeterministic);
    const gpu::ConvBackwardAlgos a = gpu::conv2d_backward_algos(g, any);
    std::cout << str(g) << ": backward-data " << (a.data_nondeterministic ? "non-deterministic" : "deterministic")
              << ", backward-filter " << (a.filter_nondeterministic ? "non-deterministic" : "deterministic") << "\n";
    Workspace ws(std::max(gpu::conv2d_workspace_bytes(g, det), gpu::conv2d_workspace_bytes(g, any)));
    for (gpu::ConvContext* c : {&det, &any}) {
      c->workspace = ws.p;
      c->workspace_bytes = ws.bytes;
    }
    const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.k * g.oh() * g.ow();
    const Vec x = random_vec(xn, 81), W = random_vec(g.weight_numel(), 82, -0.3f, 0.3f), dy = random_vec(yn, 83);
    const Vec dW0 = random_vec(g.weight_numel(), 84);
    const Dev x_d(x), W_d(W), dy_d(dy);
    Vec first_y, first_t;
    for (const gpu::ConvContext* c : {&det, &any}) {
      const Dev y_d(nan_vec(yn)), t_d(nan_vec(xn));
      gpu::conv2d_fwd(g, x_d.get(), W_d.get(), nullptr, y_d.get(), *c);
      gpu::conv_transpose2d_fwd(g, dy_d.get(), W_d.get(), nullptr, t_d.get(), *c);
      if (c == &det) {
        first_y = y_d.fetch();
        first_t = t_d.fetch();
      } else {
        expect_bitwise(y_d.fetch(), first_y, "forward with the option");
        expect_bitwise(t_d.fetch(), first_t, "transposed forward with the option");
      }
    }
    std::vector<Vec> dx(2), dW(2);
    for (int k = 0; k < 2; ++k) {
      const Dev dx_d(nan_vec(xn)), dW_d(dW0);
      gpu::conv2d_bwd(g, x_d.get(), W_d.get(), dy_d.get(), dx_d.get(), dW_d.get(), nullptr, false, k ? any : det);
      dx[static_cast<size_t>(k)] = dx_d.fetch();
      dW[static_cast<size_t>(k)] = dW_d.fetch();
    }
    // The CPU's results, and Σ|terms| of each sum.
    Vec scratch(static_cast<size_t>(remat::cpu::conv2d_scratch_floats(g)));
    Vec dx_cpu(xn, 0.0f), dW_cpu = dW0;
    cpu::conv2d_bwd(g, x.data(), W.data(), dy.data(), dx_cpu.data(), dW_cpu.data(), nullptr, false, scratch.data());
    auto absv = [](Vec v) {
      for (float& f : v) f = std::fabs(f);
      return v;
    };
    const Vec ax = absv(x), aW = absv(W), ady = absv(dy);
    Vec sx(xn, 0.0f), sW = absv(dW0);
    cpu::conv2d_bwd(g, ax.data(), aW.data(), ady.data(), sx.data(), sW.data(), nullptr, false, scratch.data());
    auto within = [](const Vec& got, const Vec& cpu_sum, const Vec& abs_sum, double terms, const char* what) {
      const double gamma = terms * 0x1p-24 / (1 - terms * 0x1p-24);
      int bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(got[i]) - cpu_sum[i]);
        if (!(diff <= 2 * gamma * (1 + gamma) * abs_sum[i]) && ++bad <= 3)
          ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs the CPU's " << cpu_sum[i] << ", bound "
                        << 2 * gamma * abs_sum[i];
      }
      EXPECT_EQ(bad, 0) << what;
    };
    if (a.data_nondeterministic)
      within(dx[1], dx_cpu, sx, static_cast<double>(g.k * g.r * g.s), "dx");
    else
      expect_bitwise(dx[1], dx[0], "dx: the deterministic algorithm under the option");
    if (a.filter_nondeterministic)
      within(dW[1], dW_cpu, sW, static_cast<double>(g.n * g.oh() * g.ow() + 1), "dW");
    else
      expect_bitwise(dW[1], dW[0], "dW: the deterministic algorithm under the option");
  }
}

TEST_F(GpuCnnKernels, ConvolutionWithoutInputGradientOrBias) {
  const ConvGeom g = conv(2, 3, 6, 6, 4, 3, 3, 1, 1);
  const Vec x = random_vec(2 * 3 * 36, 1), W = random_vec(g.weight_numel(), 2), dy = random_vec(2 * 4 * 36, 3);
  Vec scratch(static_cast<size_t>(remat::cpu::conv2d_scratch_floats(g)));
  for (void* path : conv_paths()) {
    gpu::ConvContext ctx{cublas_, path, stream_, nullptr, 0};
    Workspace ws(gpu::conv2d_workspace_bytes(g, ctx));
    ctx.workspace = ws.p;
    ctx.workspace_bytes = ws.bytes;
    const Dev x_d(x), W_d(W), dy_d(dy), y_d(nan_vec(dy.size())), dW_d(Vec(W.size(), 0.0f));
    gpu::conv2d_fwd(g, x_d.get(), W_d.get(), nullptr, y_d.get(), ctx);
    Vec y(dy.size()), dW(W.size(), 0.0f);
    cpu::conv2d_fwd(g, x.data(), W.data(), nullptr, y.data(), scratch.data());
    expect_close(y_d.fetch(), y, kTol, "no bias y");
    gpu::conv2d_bwd(g, x_d.get(), W_d.get(), dy_d.get(), nullptr, dW_d.get(), nullptr, false, ctx);
    cpu::conv2d_bwd(g, x.data(), W.data(), dy.data(), nullptr, dW.data(), nullptr, false, scratch.data());
    expect_close(dW_d.fetch(), dW, kTol, "no dx dW");
  }
}

TEST_F(GpuCnnKernels, ConvolutionRefusesATooSmallWorkspace) {
  const ConvGeom g = conv(2, 3, 6, 6, 4, 3, 3, 1, 1);
  const gpu::ConvContext none{cublas_, nullptr, stream_, nullptr, 0};
  ASSERT_GT(gpu::conv2d_workspace_bytes(g, none), 0u);  // im2col needs its columns
  const Dev x(random_vec(2 * 3 * 36, 1)), W(random_vec(g.weight_numel(), 2)), y(nan_vec(2 * 4 * 36));
  EXPECT_THROW(gpu::conv2d_fwd(g, x.get(), W.get(), nullptr, y.get(), none), std::invalid_argument);
  ConvGeom bad = g;
  bad.groups = 2;  // 3 channels do not split in two
  EXPECT_THROW((void)gpu::conv2d_workspace_bytes(bad, none), std::invalid_argument);
}

// Both paths: one block a channel, and each channel split over blocks with the
// partial sums in a lent buffer (a ResNet's first stage, 4 channels of 8·3136
// values, splits them in 7 ranges; 3·25 values stay one range; 3·4099 in 4,
// the last shorter; 20000 values a plane take more than 64 blocks of threads).
TEST_F(GpuCnnKernels, BatchNormMatchesCpu) {
  struct Case {
    bool grid;
    int64_t n, c, hw;
  };
  std::vector<Case> cases;
  for (const bool grid : {false, true})
    for (const auto& [n, c, hw] : {std::tuple<int64_t, int64_t, int64_t>{4, 3, 25}, {8, 16, 49}, {2, 5, 1}, {8, 4, 3136},
                                  {3, 7, 4099}, {1, 2, 20000}})
      cases.push_back({grid, n, c, hw});
  for (const auto& [grid, n, c, hw] : cases) {
    const std::string name = std::string(grid ? "grid-wide " : "") + "batchnorm n" + std::to_string(n) + " c" +
                             std::to_string(c) + " hw" + std::to_string(hw);
    SCOPED_TRACE(name);
    const int64_t count = grid ? gpu::batchnorm_partial_count(n, c, hw) : 0;
    const DeviceArray<double> part(std::vector<double>(static_cast<std::size_t>(std::max<int64_t>(count, 1)), std::nan("")));
    double* const partials = grid ? part.get() : nullptr;
    const int64_t m = n * c * hw;
    const Vec x = random_vec(m, 21, -2.0f, 3.0f), gamma = random_vec(c, 22, 0.5f, 1.5f), beta = random_vec(c, 23);
    Vec rm = random_vec(c, 24), rv = random_vec(c, 25, 0.5f, 1.5f);
    const Dev x_d(x), g_d(gamma), b_d(beta), rm_d(rm), rv_d(rv), y_d(nan_vec(m)), mean_d(nan_vec(c)),
        inv_d(nan_vec(c));
    Vec y(m), mean(c), inv(c);
    cpu::batchnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv.data(), rm.data(), rv.data(),
                       n, c, hw, 1e-5f, 0.1f);
    gpu::batchnorm_fwd(x_d.get(), g_d.get(), b_d.get(), y_d.get(), mean_d.get(), inv_d.get(), rm_d.get(),
                       rv_d.get(), n, c, hw, 1e-5f, 0.1f, stream_, partials, count);
    expect_close(y_d.fetch(), y, kTol, name + " y");
    expect_close(mean_d.fetch(), mean, kTol, name + " save_mean");
    expect_close(inv_d.fetch(), inv, kTol, name + " save_invstd");
    expect_close(rm_d.fetch(), rm, kTol, name + " running_mean");
    expect_close(rv_d.fetch(), rv, kTol, name + " running_var");
    const Vec dy = random_vec(m, 26);
    const Dev dy_d(dy);
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(m, 27) : nan_vec(m);
      Vec dx = accumulate ? dx0 : Vec(m, 0.0f), dg = random_vec(c, 28), db = random_vec(c, 29);
      const Dev dx_d(dx0), dg_d(dg), db_d(db);
      cpu::batchnorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), inv.data(), dx.data(), dg.data(), db.data(),
                         n, c, hw, accumulate);
      gpu::batchnorm_bwd(x_d.get(), dy_d.get(), g_d.get(), mean_d.get(), inv_d.get(), dx_d.get(), dg_d.get(),
                         db_d.get(), n, c, hw, accumulate, stream_, partials, count);
      expect_close(dx_d.fetch(), dx, kTol, name + " dx");
      expect_close(dg_d.fetch(), dg, kTol, name + " dgamma");
      expect_close(db_d.fetch(), db, kTol, name + " dbeta");
    }
  }
}

// The grid-wide batch norm gives the same bits run to run (its sums' order is
// the shape's), agrees with one block a channel to rounding, and a buffer one
// double too small falls back to one block a channel, bit for bit.
TEST_F(GpuCnnKernels, GridWideBatchNormIsReproducibleAndFallsBack) {
  const int64_t n = 8, c = 4, hw = 3136, m = n * c * hw;
  const int64_t count = gpu::batchnorm_partial_count(n, c, hw);
  ASSERT_EQ(count, 2 * c * (7 + 1));  // min(1024 / 4, ceil(25088 / 4096)) = 7 ranges a channel
  const Vec x = random_vec(m, 31, -2.0f, 3.0f), gamma = random_vec(c, 32, 0.5f, 1.5f), beta = random_vec(c, 33),
            dy = random_vec(m, 34);
  const Dev x_d(x), g_d(gamma), b_d(beta), dy_d(dy);
  const DeviceArray<double> part(std::vector<double>(static_cast<std::size_t>(count), 0.0));
  struct Out {
    Vec y, mean, inv, dx, dg, db;
  };
  auto run = [&](double* partials, int64_t capacity) {
    const Dev y(nan_vec(m)), mean(nan_vec(c)), inv(nan_vec(c)), dx(nan_vec(m)), dg(Vec(c, 0.0f)), db(Vec(c, 0.0f));
    gpu::batchnorm_fwd(x_d.get(), g_d.get(), b_d.get(), y.get(), mean.get(), inv.get(), nullptr, nullptr, n, c, hw,
                       1e-5f, 0.1f, stream_, partials, capacity);
    gpu::batchnorm_bwd(x_d.get(), dy_d.get(), g_d.get(), mean.get(), inv.get(), dx.get(), dg.get(), db.get(), n, c, hw,
                       false, stream_, partials, capacity);
    return Out{y.fetch(), mean.fetch(), inv.fetch(), dx.fetch(), dg.fetch(), db.fetch()};
  };
  const Out a = run(part.get(), count), b = run(part.get(), count), one = run(nullptr, 0),
            small = run(part.get(), count - 1);
  for (const auto& [got, want, what] : std::vector<std::tuple<Vec, Vec, std::string>>{
           {a.y, b.y, "y"}, {a.mean, b.mean, "mean"}, {a.inv, b.inv, "invstd"}, {a.dx, b.dx, "dx"},
           {a.dg, b.dg, "dgamma"}, {a.db, b.db, "dbeta"}})
    expect_bitwise(got, want, "grid-wide rerun: " + what);
  for (const auto& [got, want, what] : std::vector<std::tuple<Vec, Vec, std::string>>{
           {a.y, one.y, "y"}, {a.mean, one.mean, "mean"}, {a.inv, one.inv, "invstd"}, {a.dx, one.dx, "dx"},
           {a.dg, one.dg, "dgamma"}, {a.db, one.db, "dbeta"}})
    expect_close(got, want, kTol, "grid-wide against one block a channel: " + what);
  expect_bitwise(small.y, one.y, "buffer too small: one block a channel, y");
  expect_bitwise(small.dx, one.dx, "buffer too small: one block a channel, dx");
}

PoolGeom pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad) {
  PoolGeom g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.kh = g.kw = k, g.stride_h = g.stride_w = stride, g.pad_h = g.pad_w = pad;
  return g;
}

// Max pooling on the device against the CPU: values, indices and both
// backwards, bit for bit.
void expect_max_pool_matches_cpu(const PoolGeom& g, cudaStream_t stream) {
  const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.c * g.oh() * g.ow();
  const Vec x = random_vec(xn, 31), dy = random_vec(yn, 32);
  const Dev x_d(x), dy_d(dy), y_d(nan_vec(yn));
  Vec y(yn);
  std::vector<int64_t> idx(yn);
  remat::gpu_testing::DeviceArray<int64_t> idx_d(std::vector<int64_t>(yn, -7));
  cpu::maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  gpu::maxpool2d_fwd(g, x_d.get(), y_d.get(), idx_d.get(), stream);
  expect_bitwise(y_d.fetch(), y, "max y");  // a maximum is one of the inputs: exact
  EXPECT_EQ(idx_d.fetch(), idx);
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(xn, 33) : nan_vec(xn);
    Vec dx = accumulate ? dx0 : Vec(xn, 0.0f);
    const Dev dx_d(dx0);
    cpu::maxpool2d_bwd(g, dy.data(), idx.data(), dx.data(), accumulate);
    gpu::maxpool2d_bwd(g, dy_d.get(), idx_d.get(), dx_d.get(), accumulate, stream);
    expect_bitwise(dx_d.fetch(), dx, "max dx");  // the same sums in the same order
  }
}

// Average pooling likewise (adaptive or not).
void expect_avg_pool_matches_cpu(const PoolGeom& g, cudaStream_t stream) {
  const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.c * g.oh() * g.ow();
  const Vec x = random_vec(xn, 31), dy = random_vec(yn, 32);
  const Dev x_d(x), dy_d(dy);
  Vec ya(yn);
  const Dev ya_d(nan_vec(yn));
  cpu::avgpool2d_fwd(g, x.data(), ya.data());
  gpu::avgpool2d_fwd(g, x_d.get(), ya_d.get(), stream);
  expect_bitwise(ya_d.fetch(), ya, "avg y");  // window order, then the division(s)
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(xn, 34) : nan_vec(xn);
    Vec dx = accumulate ? dx0 : Vec(xn, 0.0f);
    const Dev dx_d(dx0);
    cpu::avgpool2d_bwd(g, dy.data(), dx.data(), accumulate);
    gpu::avgpool2d_bwd(g, dy_d.get(), dx_d.get(), accumulate, stream);
    expect_bitwise(dx_d.fetch(), dx, "avg dx");  // output order, each share divided
  }
}

std::string describe(const PoolGeom& g) {
  return "pool " + std::to_string(g.h) + "x" + std::to_string(g.w) + " k" + std::to_string(g.kh) + " s" +
         std::to_string(g.stride_h) + " p" + std::to_string(g.pad_h) + " d" + std::to_string(g.dil_h) +
         (g.ceil_mode ? " ceil" : "") + (g.count_include_pad ? "" : " pad-not-counted") +
         (g.adaptive() ? " adaptive to " + std::to_string(g.out_h) + "x" + std::to_string(g.out_w) : "");
}

TEST_F(GpuCnnKernels, PoolingMatchesCpu) {
  for (const PoolGeom& g : {pool(2, 3, 9, 11, 3, 2, 1), pool(1, 2, 8, 8, 2, 2, 0), pool(2, 2, 7, 7, 3, 1, 1)}) {
    SCOPED_TRACE(describe(g));
    expect_max_pool_matches_cpu(g, stream_);
    expect_avg_pool_matches_cpu(g, stream_);
  }
  const int64_t nc = 6, hw = 49;
  const Vec x = random_vec(nc * hw, 35), dy = random_vec(nc, 36);
  Vec y(nc), dx(nc * hw, 0.0f);
  const Dev x_d(x), dy_d(dy), y_d(nan_vec(nc)), dx_d(nan_vec(nc * hw));
  cpu::global_avgpool_fwd(x.data(), y.data(), nc, hw);
  gpu::global_avgpool_fwd(x_d.get(), y_d.get(), nc, hw, stream_);
  expect_close(y_d.fetch(), y, kTol, "global avg y");
  cpu::global_avgpool_bwd(dy.data(), dx.data(), nc, hw, false);
  gpu::global_avgpool_bwd(dy_d.get(), dx_d.get(), nc, hw, false, stream_);
  expect_close(dx_d.fetch(), dx, kTol, "global avg dx");
}

// ceil_mode (SqueezeNet's and GoogLeNet's pools), dilation, the padding left
// out of the divisor and adaptive windows (AlexNet's and VGG's).
TEST_F(GpuCnnKernels, PoolingTailMatchesCpu) {
  const auto with = [](PoolGeom g, bool ceil, int64_t dil, bool count_pad) {
    g.ceil_mode = ceil, g.dil_h = g.dil_w = dil, g.count_include_pad = count_pad;
    return g;
  };
  for (const PoolGeom& g : {with(pool(2, 3, 8, 9, 3, 2, 0), true, 1, true), with(pool(1, 2, 7, 5, 2, 2, 0), true, 1, true),
                            with(pool(2, 2, 9, 8, 3, 1, 1), false, 2, true), with(pool(1, 2, 11, 10, 3, 2, 1), true, 2, true)}) {
    SCOPED_TRACE(describe(g));
    expect_max_pool_matches_cpu(g, stream_);
  }
  std::vector<PoolGeom> avg = {with(pool(2, 2, 8, 9, 3, 2, 1), true, 1, true), with(pool(2, 1, 7, 6, 3, 1, 1), false, 1, false),
                               with(pool(1, 3, 8, 9, 3, 2, 1), true, 1, false)};
  for (const auto& [h, w, oh, ow] : {std::array<int64_t, 4>{2, 2, 7, 7}, {4, 5, 6, 3}, {13, 13, 6, 6}, {3, 4, 3, 4}}) {
    PoolGeom g = pool(2, 3, h, w, 1, 1, 0);
    g.out_h = oh, g.out_w = ow;
    avg.push_back(g);
  }
  for (const PoolGeom& g : avg) {
    SCOPED_TRACE(describe(g));
    expect_avg_pool_matches_cpu(g, stream_);
  }
}

TEST_F(GpuCnnKernels, BatchedMatmulMatchesCpuInEveryLayout) {
  const int64_t batch = 3, m = 17, n = 13, k = 21;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const std::string name = std::string("bmm") + (ta ? " aT" : "") + (tb ? " bT" : "");
      const Vec a = random_vec(batch * m * k, 41), b = random_vec(batch * k * n, 42), dc = random_vec(batch * m * n, 43);
      const Dev a_d(a), b_d(b), dc_d(dc), c_d(nan_vec(batch * m * n));
      Vec c(batch * m * n);
      cpu::bmm(a.data(), b.data(), c.data(), batch, m, n, k, ta, tb, false);
      gpu::bmm(a_d.get(), b_d.get(), c_d.get(), batch, m, n, k, ta, tb, false, cublas_, stream_);
      expect_close(c_d.fetch(), c, kTol, name + " c");
      for (const bool accumulate : {false, true}) {
        const Vec da0 = accumulate ? random_vec(a.size(), 44) : nan_vec(a.size());
        const Vec db0 = accumulate ? random_vec(b.size(), 45) : nan_vec(b.size());
        Vec da = accumulate ? da0 : Vec(a.size(), 0.0f), db = accumulate ? db0 : Vec(b.size(), 0.0f);
        const Dev da_d(da0), db_d(db0);
        cpu::bmm_bwd(a.data(), b.data(), dc.data(), da.data(), db.data(), batch, m, n, k, ta, tb, accumulate,
                     accumulate);
        gpu::bmm_bwd(a_d.get(), b_d.get(), dc_d.get(), da_d.get(), db_d.get(), batch, m, n, k, ta, tb, accumulate,
                     accumulate, cublas_, stream_);
        expect_close(da_d.fetch(), da, kTol, name + " da");
        expect_close(db_d.fetch(), db, kTol, name + " db");
      }
    }
}

// Batch strides as a broadcast MatMul's runs use them: b one matrix for every
// product (stride 0), c written at a stride larger than a matrix, and a
// second run adding into the same c matrices (beta 1).
TEST_F(GpuCnnKernels, StridedGemmWithStrideZeroMatchesCpu) {
  const int64_t batch = 3, m = 5, n = 7, k = 4, sc = m * n + 3;
  const Vec a = random_vec(batch * m * k, 46), b = random_vec(k * n, 47);
  const Vec c0 = random_vec(batch * sc, 48);
  Vec c = c0;
  const Dev a_d(a), b_d(b), c_d(c0);
  for (const bool accumulate : {false, true}) {
    cpu::gemm_strided(a.data(), b.data(), c.data(), batch, m, n, k, false, false, accumulate, m * k, 0, sc);
    gpu::gemm_strided(a_d.get(), b_d.get(), c_d.get(), batch, m, n, k, false, false, accumulate, m * k, 0, sc,
                      cublas_, stream_);
  }
  // The gaps between the c matrices are untouched on both.
  expect_close(c_d.fetch(), c, kTol, "strided gemm c");
  EXPECT_THROW(gpu::gemm_strided(a_d.get(), b_d.get(), c_d.get(), batch, m, n, k, false, false, true, m * k, 0, 0,
                                 cublas_, stream_),
               std::invalid_argument);
}

TEST_F(GpuCnnKernels, SoftmaxScaleAndCausalMaskMatchCpu) {
  const int64_t heads = 4, t = 9, n = heads * t * t;
  std::vector<uint8_t> mask(t * t);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) mask[i * t + j] = j > i;  // causal: the future is masked
  const Vec x = random_vec(n, 51, -3.0f, 3.0f), dy = random_vec(n, 52);
  remat::gpu_testing::DeviceArray<uint8_t> mask_d(mask);
  const Dev x_d(x), dy_d(dy), s_d(nan_vec(n)), m_d(nan_vec(n)), p_d(nan_vec(n));
  Vec s(n), masked(n), p(n);
  cpu::scale_fwd(x.data(), s.data(), n, 0.125f);
  gpu::scale_fwd(x_d.get(), s_d.get(), n, 0.125f, stream_);
  expect_bitwise(s_d.fetch(), s, "scale");  // one multiplication: exact
  cpu::masked_fill_fwd(s.data(), mask.data(), masked.data(), n, t * t, -INFINITY);
  gpu::masked_fill_fwd(s_d.get(), mask_d.get(), m_d.get(), n, t * t, -INFINITY, stream_);
  expect_bitwise(m_d.fetch(), masked, "masked fill");
  cpu::softmax_fwd(masked.data(), p.data(), heads * t, t);
  gpu::softmax_fwd(m_d.get(), p_d.get(), heads * t, t, stream_);
  const Vec p_gpu = p_d.fetch();
  expect_close(p_gpu, p, kTol, "softmax");
  EXPECT_EQ(p_gpu[1], 0.0f);  // row 0 attends to itself only
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(n, 53) : nan_vec(n);
    Vec dsm = accumulate ? dx0 : Vec(n, 0.0f), dmf = dsm, dsc = dsm;
    const Dev dsm_d(dx0), dmf_d(dx0), dsc_d(dx0);
    const Dev p_dev(p);
    cpu::softmax_bwd(p.data(), dy.data(), dsm.data(), heads * t, t, accumulate);
    gpu::softmax_bwd(p_dev.get(), dy_d.get(), dsm_d.get(), heads * t, t, accumulate, stream_);
    expect_close(dsm_d.fetch(), dsm, kTol, "softmax dx");
    cpu::masked_fill_bwd(dy.data(), mask.data(), dmf.data(), n, t * t, accumulate);
    gpu::masked_fill_bwd(dy_d.get(), mask_d.get(), dmf_d.get(), n, t * t, accumulate, stream_);
    expect_bitwise(dmf_d.fetch(), dmf, "masked fill dx");
    cpu::scale_bwd(dy.data(), dsc.data(), n, 0.125f, accumulate);
    gpu::scale_bwd(dy_d.get(), dsc_d.get(), n, 0.125f, accumulate, stream_);
    expect_bitwise(dsc_d.fetch(), dsc, "scale dx");
  }
}

// By a constant repeating over the leading dimensions (x / c divides on both),
// a learned constant's gradient, int64 token ids, and the strided copy and add
// that make operands contiguous and carry a transposed view's gradient back.
TEST_F(GpuCnnKernels, ConstantsInt64IdsAndStridedCopiesMatchCpu) {
  const int64_t reps = 6, cn = 20, n = reps * cn;
  const Vec x = random_vec(n, 61), c = random_vec(cn, 62, 0.5f, 2.0f), dy = random_vec(n, 63);
  const Dev x_d(x), c_d(c), dy_d(dy);
  for (const cpu::ConstOp op : {cpu::ConstOp::Mul, cpu::ConstOp::Div, cpu::ConstOp::Add}) {
    Vec y(n);
    const Dev y_d(nan_vec(n));
    cpu::const_fwd(op, x.data(), c.data(), y.data(), n, cn);
    gpu::const_fwd(op, x_d.get(), c_d.get(), y_d.get(), n, cn, stream_);
    expect_bitwise(y_d.fetch(), y, "const fwd");  // one operation per element: exact
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(n, 64) : nan_vec(n);
      Vec dx = accumulate ? dx0 : Vec(n, 0.0f);
      const Dev dx_d(dx0);
      cpu::const_bwd(op, dy.data(), c.data(), dx.data(), n, cn, accumulate);
      gpu::const_bwd(op, dy_d.get(), c_d.get(), dx_d.get(), n, cn, accumulate, stream_);
      expect_bitwise(dx_d.fetch(), dx, "const bwd");
    }
  }
  Vec dc = random_vec(cn, 65);
  const Dev dc_d(dc);
  cpu::const_add_param_grad(dy.data(), dc.data(), n, cn);
  gpu::const_add_param_grad(dy_d.get(), dc_d.get(), n, cn, stream_);
  expect_bitwise(dc_d.fetch(), dc, "learned constant's gradient");  // the same order of sums

  const int64_t vocab = 11, dim = 5, ids_n = 7;
  const std::vector<int64_t> ids = {3, 0, 10, 3, 7, 3, 1};
  const Vec table = random_vec(vocab * dim, 66), gy = random_vec(ids_n * dim, 67);
  remat::gpu_testing::DeviceArray<int64_t> ids_d(ids);
  const Dev table_d(table), gy_d(gy), ye_d(nan_vec(ids_n * dim));
  Vec ye(ids_n * dim), dtable(vocab * dim, 0.0f);
  const Dev dtable_d(dtable);
  cpu::embedding_fwd(table.data(), ids.data(), ye.data(), ids_n, dim, vocab);
  gpu::embedding_fwd(table_d.get(), ids_d.get(), ye_d.get(), ids_n, dim, vocab, stream_);
  expect_bitwise(ye_d.fetch(), ye, "embedding, int64 ids");
  cpu::embedding_bwd(gy.data(), ids.data(), dtable.data(), ids_n, dim, vocab);
  gpu::embedding_bwd(gy_d.get(), ids_d.get(), dtable_d.get(), ids_n, dim, vocab, stream_);
  expect_bitwise(dtable_d.fetch(), dtable, "embedding dtable, int64 ids");

  // A (2, 3, 4) tensor read as its (0, 2, 1) transpose: shape (2, 4, 3), strides (12, 1, 4).
  const Vec t = random_vec(24, 68);
  const int64_t shape[] = {2, 4, 3}, stride[] = {12, 1, 4};
  Vec want(24), back(24, 0.0f);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t k = 0; k < 3; ++k) want[(a * 4 + b) * 3 + k] = t[a * 12 + k * 4 + b];
  const Dev t_d(t), got_d(nan_vec(24)), back_d(back);
  gpu::strided_copy(t_d.get(), got_d.get(), shape, stride, 3, stream_);
  expect_bitwise(got_d.fetch(), want, "strided copy");
  gpu::strided_add(got_d.get(), back_d.get(), shape, stride, 3, stream_);
  expect_bitwise(back_d.fetch(), t, "strided add: the transpose's gradient lands where it came from");
}

// x (3, 1, 2) expanded to (4, 3, 5, 2): the view repeats x over a new leading
// dimension and its size-1 middle one, strides (0, 2, 0, 1) into x. Each x
// element's gradient is the sum of its 20 copies', added in view order as the
// CPU's loop adds them: the same bits, with or without a gradient already there.
TEST_F(GpuCnnKernels, ExpandBackwardSumsInViewOrderBitwiseAsTheCpu) {
  const int64_t shape[] = {4, 3, 5, 2}, stride[] = {0, 2, 0, 1};
  const int64_t n_in = 6, n = 4 * 3 * 5 * 2;
  const Vec dy = random_vec(n, 69);
  for (const bool accumulate : {false, true}) {
    const Vec dx0 = accumulate ? random_vec(n_in, 70) : nan_vec(n_in);
    Vec want(n_in);
    for (int64_t j = 0; j < n_in; ++j) want[j] = accumulate ? dx0[j] : 0.0f;
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t r = 0; r < 5; ++r)
          for (int64_t e = 0; e < 2; ++e) want[c * 2 + e] += dy[((a * 3 + c) * 5 + r) * 2 + e];
    const Dev dy_d(dy), dx_d(dx0);
    gpu::expand_bwd(dy_d.get(), dx_d.get(), shape, stride, 4, n_in, accumulate, stream_);
    expect_bitwise(dx_d.fetch(), want, accumulate ? "expand dx (accumulated)" : "expand dx");
  }
}

TEST_F(GpuCnnKernels, ConcatAndEmbeddingMatchCpu) {
  const int64_t outer = 3, inner = 5;
  const std::vector<int64_t> widths = {2, 1, 4};
  std::vector<Vec> xs;
  std::vector<std::unique_ptr<Dev>> xs_d;
  std::vector<const float*> xp, xp_d;
  for (std::size_t i = 0; i < widths.size(); ++i) {
    xs.push_back(random_vec(outer * widths[i] * inner, 61 + static_cast<uint32_t>(i)));
    xs_d.push_back(std::make_unique<Dev>(xs.back()));
    xp.push_back(xs.back().data());
    xp_d.push_back(xs_d.back()->get());
  }
  const int64_t total = outer * 7 * inner;
  Vec y(total);
  const Dev y_d(nan_vec(total));
  cpu::concat_fwd(xp.data(), widths.data(), 3, y.data(), outer, inner);
  gpu::concat_fwd(xp_d.data(), widths.data(), 3, y_d.get(), outer, inner, stream_);
  expect_bitwise(y_d.fetch(), y, "concat");
  const Vec dy = random_vec(total, 64);
  const Dev dy_d(dy);
  const uint8_t acc[] = {0, 1, 0};
  std::vector<Vec> dxs = {Vec(outer * 2 * inner, 0.0f), random_vec(outer * inner, 65), Vec()};
  std::vector<std::unique_ptr<Dev>> dxs_d;
  dxs_d.push_back(std::make_unique<Dev>(nan_vec(dxs[0].size())));
  dxs_d.push_back(std::make_unique<Dev>(dxs[1]));
  float* dxp[] = {dxs[0].data(), dxs[1].data(), nullptr};  // the third input has no gradient
  float* dxp_d[] = {dxs_d[0]->get(), dxs_d[1]->get(), nullptr};
  cpu::concat_bwd(dy.data(), dxp, widths.data(), 3, outer, inner, acc);
  gpu::concat_bwd(dy_d.get(), dxp_d, widths.data(), 3, outer, inner, acc, stream_);
  expect_bitwise(dxs_d[0]->fetch(), dxs[0], "concat dx0");
  expect_bitwise(dxs_d[1]->fetch(), dxs[1], "concat dx1 (accumulated)");

  const int64_t vocab = 11, dim = 7;
  const std::vector<int32_t> idx = {3, 0, 3, 10, 5, 3, 0};  // repeats: their gradients add up
  const int64_t n = static_cast<int64_t>(idx.size());
  const Vec table = random_vec(vocab * dim, 66), dye = random_vec(n * dim, 67);
  remat::gpu_testing::DeviceArray<int32_t> idx_d(idx);
  const Dev table_d(table), dye_d(dye), ye_d(nan_vec(n * dim));
  Vec ye(n * dim), dtable = random_vec(vocab * dim, 68);
  const Dev dtable_d(dtable);
  cpu::embedding_fwd(table.data(), idx.data(), ye.data(), n, dim, vocab);
  gpu::embedding_fwd(table_d.get(), idx_d.get(), ye_d.get(), n, dim, vocab, stream_);
  expect_bitwise(ye_d.fetch(), ye, "embedding");
  cpu::embedding_bwd(dye.data(), idx.data(), dtable.data(), n, dim, vocab);
  gpu::embedding_bwd(dye_d.get(), idx_d.get(), dtable_d.get(), n, dim, vocab, stream_);
  expect_close(dtable_d.fetch(), dtable, kTol, "embedding dtable");
  // Out of range: the CPU throws, the device writes a NaN row.
  const std::vector<int32_t> bad = {1, 11};
  remat::gpu_testing::DeviceArray<int32_t> bad_d(bad);
  const Dev yb_d(Vec(2 * dim, 0.0f));
  gpu::embedding_fwd(table_d.get(), bad_d.get(), yb_d.get(), 2, dim, vocab, stream_);
  const Vec yb = yb_d.fetch();
  EXPECT_EQ(yb[0], table[dim]);
  EXPECT_TRUE(std::isnan(yb[dim]));
  Vec ycpu(2 * dim);
  EXPECT_THROW(cpu::embedding_fwd(table.data(), bad.data(), ycpu.data(), 2, dim, vocab), std::invalid_argument);
}

// The embedding gradient in any order (remat run --nondeterministic-backward:
// atomicAdd): where no token repeats each table element gets one addition,
// the ordered kernel's, so the same bits; where tokens repeat (4096
// positions over 7 rows, so that the atomics contend) each element is the
// same sum of its initial value and m dy terms in another order, within
// 2·γ_m·(|initial| + Σ|dy|) of the ordered kernel's (γ_m = m·u/(1 − m·u),
// u = 2⁻²⁴); positions out of range are left out by both.
TEST_F(GpuCnnKernels, EmbeddingGradientInAnyOrder) {
  for (const bool repeats : {false, true}) {
    SCOPED_TRACE(repeats ? "repeated tokens" : "distinct tokens");
    const int64_t vocab = repeats ? 7 : 64, dim = 48, n = repeats ? 4096 : 40;
    std::vector<int64_t> idx(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = repeats ? (i * 5 + i / 3) % vocab : (i * 13) % vocab;
    if (repeats) idx[100] = vocab;  // out of range: skipped
    remat::gpu_testing::DeviceArray<int64_t> idx_d(idx);
    const Vec dy = random_vec(n * dim, 71), start = random_vec(vocab * dim, 72);
    const Dev dy_d(dy), ordered_d(start), any_d(start);
    gpu::embedding_bwd(dy_d.get(), idx_d.get(), ordered_d.get(), n, dim, vocab, stream_);
    gpu::embedding_bwd(dy_d.get(), idx_d.get(), any_d.get(), n, dim, vocab, stream_, true);
    const Vec ordered = ordered_d.fetch(), any = any_d.fetch();
    if (!repeats) {
      expect_bitwise(any, ordered, "embedding dtable, any order, distinct tokens");
      continue;
    }
    std::vector<double> abs_sum(static_cast<std::size_t>(vocab * dim));
    std::vector<int64_t> m(static_cast<std::size_t>(vocab), 0);
    for (int64_t e = 0; e < vocab * dim; ++e) abs_sum[static_cast<std::size_t>(e)] = std::fabs(start[static_cast<std::size_t>(e)]);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = idx[static_cast<std::size_t>(i)];
      if (v >= vocab) continue;
      ++m[static_cast<std::size_t>(v)];
      for (int64_t d = 0; d < dim; ++d)
        abs_sum[static_cast<std::size_t>(v * dim + d)] += std::fabs(dy[static_cast<std::size_t>(i * dim + d)]);
    }
    int bad = 0;
    for (int64_t e = 0; e < vocab * dim; ++e) {
      const double terms = static_cast<double>(m[static_cast<std::size_t>(e / dim)]) + 1, gamma = terms * 0x1p-24 / (1 - terms * 0x1p-24);
      const double diff = std::fabs(static_cast<double>(any[static_cast<std::size_t>(e)]) - ordered[static_cast<std::size_t>(e)]);
      if (!(diff <= 2 * gamma * abs_sum[static_cast<std::size_t>(e)]) && ++bad <= 3)
        ADD_FAILURE() << "dtable[" << e << "]: any order " << any[static_cast<std::size_t>(e)] << ", ordered "
                      << ordered[static_cast<std::size_t>(e)];
    }
    EXPECT_EQ(bad, 0);
  }
}

// The batch-norm kernels' walk over a channel, checked on the host (no GPU
// needed): every element a thread visits, for blocks wider and narrower than
// an image's hw, hw = 1 (a BatchNorm1d), first elements past an image.
TEST(ChannelWalk, VisitsWhatTheDivisionsGive) {
  for (const int64_t hw : {1, 3, 49, 256, 3136, 5000})
    for (const int64_t step : {32, 256, 1024})
      for (const int64_t first : {0, 1, 31, 255})
        for (const int64_t ch : {0, 5}) {
          const int64_t n = 3, c = 7, m = n * hw;
          remat::cuda::detail::ChannelWalk w(first, step, hw);
          for (int64_t e = first; e < m; e += step, w.next())
            ASSERT_EQ(w.at(c, ch), ((e / hw) * c + ch) * hw + e % hw)
                << "hw " << hw << ", step " << step << ", first " << first << ", e " << e;
        }
}

// The embedding's gradient at a GPT's scale of repeats: a token's positions
// spread over several blocks' chunks of positions (the first at 0, others at
// the chunk edges 255 and 256, the last at n - 1), rows wider than a block of
// threads and rows narrower than a warp; the sums in position order, as the CPU
// adds them, so bit for bit, into a table that already holds gradients.
TEST_F(GpuCnnKernels, EmbeddingGradientOfManyRepeatsIsTheCpusBitForBit) {
  const int64_t n = 1000, vocab = 300;
  std::vector<int32_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 37 + 11) % vocab);
  for (const int64_t i : {0, 255, 256, 511, 999}) idx[static_cast<std::size_t>(i)] = 7;
  std::vector<int64_t> idx64(idx.begin(), idx.end());
  const DeviceArray<int32_t> idx_d(idx);
  const DeviceArray<int64_t> idx64_d(idx64);
  for (const int64_t dim : {5, 45, 300}) {
    const std::string name = "embedding bwd, dim " + std::to_string(dim);
    const Vec dy = random_vec(n * dim, 91), dtable0 = random_vec(vocab * dim, 92);
    const Dev dy_d(dy), dtable_d(dtable0), dtable64_d(dtable0);
    Vec dtable = dtable0;
    cpu::embedding_bwd(dy.data(), idx.data(), dtable.data(), n, dim, vocab);
    gpu::embedding_bwd(dy_d.get(), idx_d.get(), dtable_d.get(), n, dim, vocab, stream_);
    gpu::embedding_bwd(dy_d.get(), idx64_d.get(), dtable64_d.get(), n, dim, vocab, stream_);
    expect_bitwise(dtable_d.fetch(), dtable, name);
    expect_bitwise(dtable64_d.fetch(), dtable, name + ", int64 ids");
  }
}

TEST_F(GpuCnnKernels, SigmoidAndSiluMatchCpu) {
  const int64_t n = 1000;
  const Vec x = random_vec(n, 71, -6.0f, 6.0f), dy = random_vec(n, 72);
  for (const Act act : {Act::Sigmoid, Act::SiLU}) {
    const Dev x_d(x), dy_d(dy), y_d(nan_vec(n)), dx_d(nan_vec(n));
    Vec y(n), dx(n);
    cpu::act_fwd(act, x.data(), y.data(), n);
    gpu::act_fwd(act, x_d.get(), y_d.get(), n, stream_);
    expect_close(y_d.fetch(), y, kTol, "act y");
    const Vec& saved = act == Act::Sigmoid ? y : x;  // sigmoid from its output, SiLU from its input
    const Dev saved_d(saved);
    cpu::act_bwd(act, saved.data(), dy.data(), dx.data(), n, false);
    gpu::act_bwd(act, saved_d.get(), dy_d.get(), dx_d.get(), n, false, stream_);
    expect_close(dx_d.fetch(), dx, kTol, "act dx");
  }
}

}  // namespace

namespace {

// The tail of issue 28 against the CPU: a transposed convolution (the CPU's
// conv2d_bwd/conv2d_fwd with roles swapped, on the GPU cuDNN's backward-data
// where it runs), group normalisation, nearest and bilinear resizing;
// overwrite (from NaN) and accumulate, and the same bits on a second run.
TEST_F(GpuCnnKernels, TransposedConvolutionMatchesCpuOnBothPaths) {
  // g: the convolution whose gradient the ConvTranspose is (remat::conv_transpose_geom):
  // the op's output is g's input (n, c, h, w), the op's input g's output (n, k, oh, ow).
  for (const ConvGeom& g : {conv(2, 4, 8, 8, 6, 2, 2, 2), conv(2, 6, 9, 9, 4, 3, 3, 2, 1), conv(1, 4, 1, 17, 4, 1, 3, 2, 1, 1, 2)}) {
    for (void* cudnn : conv_paths()) {
      const std::string name = str(g) + (cudnn ? " cuDNN" : " im2col");
      SCOPED_TRACE(name);
      const int64_t in_n = g.n * g.k * g.oh() * g.ow(), out_n = g.n * g.c * g.h * g.w;
      const Vec x = random_vec(in_n, 31), W = random_vec(g.weight_numel(), 32, -0.3f, 0.3f), b = random_vec(g.c, 33);
      const Vec dy = random_vec(out_n, 34);
      Vec scratch(static_cast<size_t>(remat::cpu::conv2d_scratch_floats(g)));
      const Dev x_d(x), W_d(W), b_d(b), dy_d(dy);
      gpu::ConvContext ctx{cublas_, cudnn, stream_, nullptr, 0};
      Workspace ws(gpu::conv2d_workspace_bytes(g, ctx));
      ctx.workspace = ws.p;
      ctx.workspace_bytes = ws.bytes;
      Vec y(out_n);
      cpu::conv2d_bwd(g, nullptr, W.data(), x.data(), y.data(), nullptr, nullptr, false, scratch.data());
      for (int64_t i = 0; i < out_n; ++i) y[static_cast<size_t>(i)] += b[static_cast<size_t>((i / (g.h * g.w)) % g.c)];
      const Dev y_d(nan_vec(out_n));
      gpu::conv_transpose2d_fwd(g, x_d.get(), W_d.get(), b_d.get(), y_d.get(), ctx);
      const Vec y_first = y_d.fetch();
      expect_close(y_first, y, kTol, name + " y");
      gpu::conv_transpose2d_fwd(g, x_d.get(), W_d.get(), b_d.get(), y_d.get(), ctx);
      expect_bitwise(y_d.fetch(), y_first, name + " y again");
      for (const bool accumulate : {false, true}) {
        const Vec dx0 = accumulate ? random_vec(in_n, 35) : nan_vec(in_n);
        Vec dx = dx0, dW = random_vec(W.size(), 36), db = random_vec(g.c, 37);
        const Vec dW0 = dW, db0 = db;
        Vec fresh(in_n);
        cpu::conv2d_fwd(g, dy.data(), W.data(), nullptr, fresh.data(), scratch.data());
        for (int64_t i = 0; i < in_n; ++i) dx[static_cast<size_t>(i)] = accumulate ? dx[static_cast<size_t>(i)] + fresh[static_cast<size_t>(i)] : fresh[static_cast<size_t>(i)];
        cpu::conv2d_bwd(g, dy.data(), W.data(), x.data(), nullptr, dW.data(), nullptr, false, scratch.data());
        for (int64_t i = 0; i < out_n; ++i) db[static_cast<size_t>((i / (g.h * g.w)) % g.c)] += dy[static_cast<size_t>(i)];
        const Dev dx_d(dx0), dW_d(dW0), db_d(db0), tmp_d(nan_vec(in_n));
        gpu::conv_transpose2d_bwd(g, x_d.get(), W_d.get(), dy_d.get(), dx_d.get(), tmp_d.get(), dW_d.get(), db_d.get(),
                                  accumulate, ctx);
        expect_close(dx_d.fetch(), dx, kTol, name + " dx");
        expect_close(dW_d.fetch(), dW, kTol, name + " dW");
        expect_close(db_d.fetch(), db, kTol, name + " db");
      }
    }
  }
}

TEST_F(GpuCnnKernels, GroupNormMatchesCpu) {
  for (const auto& [n, c, hw, groups] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 16, 64, 4}, {3, 6, 1, 3}, {1, 8, 4099, 8}, {4, 32, 49, 1}}) {
    const std::string name = "groupnorm n" + std::to_string(n) + " c" + std::to_string(c) + " hw" + std::to_string(hw) +
                             " groups " + std::to_string(groups);
    SCOPED_TRACE(name);
    const int64_t m = n * c * hw, s = n * groups;
    const Vec x = random_vec(m, 41, -2.0f, 3.0f), gamma = random_vec(c, 42, 0.5f, 1.5f), beta = random_vec(c, 43);
    const Dev x_d(x), g_d(gamma), b_d(beta), y_d(nan_vec(m)), mean_d(nan_vec(s)), rstd_d(nan_vec(s));
    Vec y(m), mean(s), rstd(s);
    cpu::groupnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), n, c, hw, groups, 1e-5);
    gpu::groupnorm_fwd(x_d.get(), g_d.get(), b_d.get(), y_d.get(), mean_d.get(), rstd_d.get(), n, c, hw, groups, 1e-5,
                       stream_);
    expect_close(y_d.fetch(), y, kTol, name + " y");
    expect_close(mean_d.fetch(), mean, kTol, name + " mean");
    expect_close(rstd_d.fetch(), rstd, kTol, name + " rstd");
    const Vec dy = random_vec(m, 44);
    const Dev dy_d(dy);
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(m, 45) : nan_vec(m);
      Vec dx = accumulate ? dx0 : Vec(m, 0.0f), dg = random_vec(c, 46), db = random_vec(c, 47);
      const Dev dx_d(dx0), dg_d(dg), db_d(db);
      cpu::groupnorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dg.data(), db.data(),
                         n, c, hw, groups, accumulate);
      gpu::groupnorm_bwd(x_d.get(), dy_d.get(), g_d.get(), mean_d.get(), rstd_d.get(), dx_d.get(), dg_d.get(),
                         db_d.get(), n, c, hw, groups, accumulate, stream_);
      expect_close(dx_d.fetch(), dx, kTol, name + " dx");
      expect_close(dg_d.fetch(), dg, kTol, name + " dgamma");
      expect_close(db_d.fetch(), db, kTol, name + " dbeta");
    }
  }
}

// GroupNorm and LayerNorm without affine parameters (null gamma, beta and
// their gradients) against the CPU's, which equal gamma 1, beta 0.
TEST_F(GpuCnnKernels, NormsWithoutAffineMatchCpu) {
  const int64_t n = 3, c = 8, hw = 49, groups = 4, m = n * c * hw, s = n * groups;
  const Vec x = random_vec(m, 51, -2.0f, 3.0f), dy = random_vec(m, 52);
  const Dev x_d(x), dy_d(dy);
  Vec y(m), mean(s), rstd(s);
  cpu::groupnorm_fwd(x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data(), n, c, hw, groups, 1e-4);
  const Dev y_d(nan_vec(m)), mean_d(nan_vec(s)), rstd_d(nan_vec(s));
  gpu::groupnorm_fwd(x_d.get(), nullptr, nullptr, y_d.get(), mean_d.get(), rstd_d.get(), n, c, hw, groups, 1e-4, stream_);
  expect_close(y_d.fetch(), y, kTol, "groupnorm y");
  Vec dx(m);
  cpu::groupnorm_bwd(x.data(), dy.data(), nullptr, mean.data(), rstd.data(), dx.data(), nullptr, nullptr, n, c, hw,
                     groups, false);
  const Dev dx_d(nan_vec(m));
  gpu::groupnorm_bwd(x_d.get(), dy_d.get(), nullptr, mean_d.get(), rstd_d.get(), dx_d.get(), nullptr, nullptr, n, c, hw,
                     groups, false, stream_);
  expect_close(dx_d.fetch(), dx, kTol, "groupnorm dx");
  const int64_t rows = n * c, cols = hw;
  Vec ly(m), stats(2 * rows), ldx(m);
  cpu::layernorm_fwd(x.data(), nullptr, nullptr, ly.data(), stats.data(), rows, cols, 1e-6);
  const Dev ly_d(nan_vec(m)), stats_d(nan_vec(2 * rows)), ldx_d(nan_vec(m));
  gpu::layernorm_fwd(x_d.get(), nullptr, nullptr, ly_d.get(), stats_d.get(), rows, cols, stream_, 1e-6f);
  expect_close(ly_d.fetch(), ly, kTol, "layernorm y");
  cpu::layernorm_bwd(x.data(), stats.data(), nullptr, dy.data(), ldx.data(), nullptr, nullptr, rows, cols, false);
  gpu::layernorm_bwd(x_d.get(), stats_d.get(), nullptr, dy_d.get(), ldx_d.get(), nullptr, nullptr, rows, cols, false,
                     stream_);
  expect_close(ldx_d.fetch(), ldx, kTol, "layernorm dx");
}

// The GPU gathers each input's gradient in the CPU's output order with the
// CPU's products (no fused multiply-adds): the same bits.
TEST_F(GpuCnnKernels, UpsampleMatchesCpuBitForBit) {
  for (const bool bilinear : {false, true})
    for (const bool align : {false, true}) {
      if (align && !bilinear) continue;
      for (const auto& [planes, ih, iw, oh, ow] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{6, 4, 4, 8, 8},
                                                   {3, 5, 7, 12, 9}, {2, 1, 9, 1, 20}, {4, 8, 8, 5, 3}}) {
        const std::string name = std::string(bilinear ? "bilinear" : "nearest") + (align ? " align_corners " : " ") +
                                 std::to_string(ih) + "x" + std::to_string(iw) + " -> " + std::to_string(oh) + "x" +
                                 std::to_string(ow);
        SCOPED_TRACE(name);
        const int64_t xn = planes * ih * iw, yn = planes * oh * ow;
        const Vec x = random_vec(xn, 51), dy = random_vec(yn, 52);
        const Dev x_d(x), dy_d(dy), y_d(nan_vec(yn));
        Vec y(yn);
        cpu::upsample_fwd(x.data(), y.data(), planes, ih, iw, oh, ow, bilinear, align);
        gpu::upsample_fwd(x_d.get(), y_d.get(), planes, ih, iw, oh, ow, bilinear, align, stream_);
        expect_bitwise(y_d.fetch(), y, name + " y");
        for (const bool accumulate : {false, true}) {
          const Vec dx0 = accumulate ? random_vec(xn, 53) : nan_vec(xn);
          Vec dx = dx0;
          cpu::upsample_bwd(dy.data(), dx.data(), planes, ih, iw, oh, ow, bilinear, align, accumulate);
          const Dev dx_d(dx0);
          gpu::upsample_bwd(dy_d.get(), dx_d.get(), planes, ih, iw, oh, ow, bilinear, align, accumulate, stream_);
          expect_bitwise(dx_d.fetch(), dx, name + (accumulate ? " dx accumulate" : " dx"));
        }
      }
    }
}

// Padding: the GPU runs the CPU's index rules (core/kernels/pad_index.h), one
// thread per output forward and per input backward, gathering in the CPU's
// order: the same bits in every mode.
TEST_F(GpuCnnKernels, PadMatchesCpuBitForBit) {
  struct PadCase {
    const char* name;
    remat::PadMode mode;
    std::vector<int64_t> in, before, after;
    float value;
  };
  using M = remat::PadMode;
  for (const PadCase& c : {PadCase{"constant crop", M::Constant, {2, 3, 6, 7}, {0, 1, 1, -2}, {0, 0, -3, 1}, 0.5f},
                           PadCase{"reflect 2-D", M::Reflect, {2, 3, 5, 4}, {0, 0, 3, 3}, {0, 0, 3, 2}, 0.0f},
                           PadCase{"reflect 1-D", M::Reflect, {6, 7}, {0, 3}, {0, 6}, 0.0f},
                           PadCase{"replicate 3-D", M::Replicate, {2, 3, 2, 4}, {0, 1, 2, 0}, {0, 2, 0, 3}, 0.0f},
                           PadCase{"circular 2-D", M::Circular, {2, 3, 5, 6}, {0, 0, 5, 1}, {0, 0, 5, 6}, 0.0f}}) {
    SCOPED_TRACE(c.name);
    remat::PadGeom g;
    g.mode = c.mode;
    g.value = c.value;
    g.rank = static_cast<int>(c.in.size());
    int64_t xn = 1, yn = 1;
    for (int d = 0; d < g.rank; ++d) {
      g.in[d] = c.in[d];
      g.before[d] = c.before[d];
      g.out[d] = c.in[d] + c.before[d] + c.after[d];
      xn *= g.in[d];
      yn *= g.out[d];
    }
    const Vec x = random_vec(xn, 61), dy = random_vec(yn, 62);
    const Dev x_d(x), dy_d(dy), y_d(nan_vec(yn));
    Vec y(yn);
    cpu::pad_fwd(g, x.data(), y.data());
    gpu::pad_fwd(g, x_d.get(), y_d.get(), stream_);
    expect_bitwise(y_d.fetch(), y, std::string(c.name) + " y");
    for (const bool accumulate : {false, true}) {
      const Vec dx0 = accumulate ? random_vec(xn, 63) : nan_vec(xn);
      Vec dx = dx0;
      cpu::pad_bwd(g, dy.data(), dx.data(), accumulate);
      const Dev dx_d(dx0);
      gpu::pad_bwd(g, dy_d.get(), dx_d.get(), accumulate, stream_);
      expect_bitwise(dx_d.fetch(), dx, std::string(c.name) + (accumulate ? " dx accumulate" : " dx"));
    }
  }
}

}  // namespace
