// Mixed precision's convolutions (gpu/kernels/conv.cu's conv2d_*_lowp: cuDNN
// on bf16/f16 tensors, f32 compute, tensor-op math) against a float64
// reference of the same 16-bit values: forward, backward-data and
// backward-filter, grouped, strided, padded, dilated and 1x1; each rerun
// gives the same bits.
//
// The bound. The 16-bit path picks only algorithms that sum the products
// directly (implicit GEMM forward, ALGO_1 backward), so a result is a sum of
// K products, each exact in f32 (8+8 or 11+11 significant bits), added on
// tensor cores in blocks: the argument of tests/gpu/test_gpu_gemm_lowp.cpp
// (every term aligned and truncated to 24 bits per block of at most 16, a
// split reduction in f32 inside the same count) bounds the sum's error by
//   γ_n · S,  n = 3·K + 18,  u = 2^-23,  γ_n = n·u / (1 - n·u),
// S = Σ|products|. cuDNN then converts the sum to the 16-bit type (its
// legacy API writes y, dx and dW in the tensors' type): at most one unit in
// the last place whatever the rounding direction (its reference does not say
// which), a relative error of at most u_t = 2^-8 (bf16) or 2^-10 (f16), of a
// value within γ_n·S of the exact one, and, in f16, an absolute 2^-24 where
// the result is subnormal. So, with e the exact sum,
//   |result - e| ≤ γ_n·S + u_t·(|e| + γ_n·S) + a_t,   a_t = 2^-24 (f16), 0 (bf16).
// The bias is added in f32 after the widening (one more rounding, 2^-24 of
// the result). K is c/groups·r·s for y, k/groups·r·s (the windows that read
// an input element, at most) for dx, n·oh·ow for dW. A swapped operand, a
// wrong descriptor or the other 16-bit format errs by O(S), far beyond it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/convert.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/lowp_test_util.h"

namespace remat::gpu_testing {
namespace {

using gpu::HalfType;
using remat::cpu::ConvGeom;
double unit(HalfType t) { return t == HalfType::BF16 ? 0x1p-8 : 0x1p-10; }
double tiny(HalfType t) { return t == HalfType::BF16 ? 0.0 : 0x1p-24; }
const char* name_of(HalfType t) { return t == HalfType::BF16 ? "bf16" : "f16"; }

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
std::string str(const ConvGeom& g) {
  return "n" + std::to_string(g.n) + " c" + std::to_string(g.c) + " " + std::to_string(g.h) + "x" +
         std::to_string(g.w) + " k" + std::to_string(g.k) + " " + std::to_string(g.r) + "x" + std::to_string(g.s) +
         " stride " + std::to_string(g.stride_h) + " pad " + std::to_string(g.pad_h) + " dil " +
         std::to_string(g.dil_h) + " groups " + std::to_string(g.groups);
}

// The exact sums in double, each with Σ|terms| beside it: y (n, k, oh, ow),
// dx (n, c, h, w) and dW (k, c/groups, r, s), of 16-bit x, W and dy.
struct Exact {
  std::vector<double> y, y_abs, dx, dx_abs, dw, dw_abs;
};
Exact reference(HalfType t, const ConvGeom& g, const Codes& x, const Codes& w, const Codes& dy) {
  const int64_t oh = g.oh(), ow = g.ow(), cg = g.c / g.groups, kg = g.k / g.groups;
  Exact e;
  e.y.assign(static_cast<size_t>(g.n * g.k * oh * ow), 0.0);
  e.y_abs = e.y;
  e.dx.assign(static_cast<size_t>(g.n * g.c * g.h * g.w), 0.0);
  e.dx_abs = e.dx;
  e.dw.assign(static_cast<size_t>(g.weight_numel()), 0.0);
  e.dw_abs = e.dw;
  for (int64_t i = 0; i < g.n; ++i)
    for (int64_t k = 0; k < g.k; ++k) {
      const int64_t grp = k / kg;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const auto yi = static_cast<size_t>(((i * g.k + k) * oh + oy) * ow + ox);
          const double d = value_of(t, dy[yi]);
          for (int64_t cc = 0; cc < cg; ++cc)
            for (int64_t ky = 0; ky < g.r; ++ky)
              for (int64_t kx = 0; kx < g.s; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dil_h, ix = ox * g.stride_w - g.pad_w + kx * g.dil_w;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const int64_t c = grp * cg + cc;
                const auto xi = static_cast<size_t>(((i * g.c + c) * g.h + iy) * g.w + ix);
                const auto wi = static_cast<size_t>(((k * cg + cc) * g.r + ky) * g.s + kx);
                const double xv = value_of(t, x[xi]), wv = value_of(t, w[wi]);
                e.y[yi] += xv * wv;
                e.y_abs[yi] += std::fabs(xv * wv);
                e.dx[xi] += wv * d;
                e.dx_abs[xi] += std::fabs(wv * d);
                e.dw[wi] += xv * d;
                e.dw_abs[wi] += std::fabs(xv * d);
              }
        }
    }
  return e;
}

void expect_within(HalfType t, const Vec& got, const std::vector<double>& exact, const std::vector<double>& abs,
                   int64_t terms, const Vec* bias_per, const std::string& what) {
  const double g = gamma_bound(terms), ut = unit(t);
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double b = bias_per ? (*bias_per)[i] : 0.0;
    const double e = exact[i] + b;
    double bound = g * abs[i] + ut * (std::fabs(exact[i]) + g * abs[i]) + tiny(t);
    if (bias_per) bound += 0x1p-24 * (std::fabs(e) + bound);
    if (!(std::fabs(got[i] - e) <= bound) && bad++ == 0)
      first = "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(e) +
              " (bound " + std::to_string(bound) + ")";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outside the bound; first " << first;
}

// A device buffer of raw bytes for the workspace.
struct Workspace {
  explicit Workspace(size_t bytes) : bytes(bytes) {
    if (bytes) CUDA_CHECK_THROW(cudaMalloc(&p, bytes));
  }
  ~Workspace() {
    if (p) cudaFree(p);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* p = nullptr;
  size_t bytes;
};

class ConvLowp : public GpuKernels {
 protected:
  void SetUp() override {
    GpuKernels::SetUp();
    if (IsSkipped() || HasFailure()) return;
    if (!gpu::cudnn_available()) GTEST_SKIP() << "this build has no cuDNN (REMAT_CUDNN): no 16-bit convolutions";
    cudnn_ = gpu::cudnn_create(stream_);
  }
  void TearDown() override {
    gpu::cudnn_destroy(cudnn_);
    GpuKernels::TearDown();
  }

  // All three passes of g in t from NaN-filled outputs, against the bound,
  // twice (the second bit for bit the first; without a bias, the second
  // forward with no f32 output, as the backend runs it: the 16-bit y is the
  // result); with `bias`, the forward adds one and the backward sums its gradient.
  void check(HalfType t, const ConvGeom& g, bool bias, uint32_t seed) {
    const std::string what = std::string(name_of(t)) + " " + str(g) + (bias ? " +bias" : "");
    SCOPED_TRACE(what);
    gpu::ConvContext ctx{cublas_, cudnn_, stream_, nullptr, 0};
    ASSERT_TRUE(gpu::conv2d_lowp_available(t, g, ctx)) << "cuDNN offered no deterministic direct-sum algorithm";
    Workspace ws(gpu::conv2d_lowp_workspace_bytes(t, g, ctx));
    ctx.workspace = ws.p;
    ctx.workspace_bytes = ws.bytes;
    const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.k * g.oh() * g.ow(), wn = g.weight_numel();
    const Codes x = random_codes(t, static_cast<size_t>(xn), seed), w = random_codes(t, static_cast<size_t>(wn), seed + 1),
                dy = random_codes(t, static_cast<size_t>(yn), seed + 2);
    const Vec b = random_vec(static_cast<size_t>(g.k), seed + 3);
    Vec dy32(static_cast<size_t>(yn));
    for (size_t i = 0; i < dy32.size(); ++i) dy32[i] = static_cast<float>(value_of(t, dy[i]));
    const Exact e = reference(t, g, x, w, dy);
    Vec bias_per(static_cast<size_t>(yn));
    for (int64_t i = 0; i < yn; ++i) bias_per[static_cast<size_t>(i)] = b[static_cast<size_t>((i / (g.oh() * g.ow())) % g.k)];
    const DeviceArray<uint16_t> x_d(x), w_d(w), dy_d(dy);
    const Dev b_d(b), dy32_d(dy32);
    Vec first_y, first_dx, first_dw, first_db;
    Codes first_y16;
    for (int run = 0; run < 2; ++run) {
      // 16-bit destinations start as NaN codes (0xFFFF), f32 ones as NaN: a pass that skips one shows.
      DeviceArray<uint16_t> y16(Codes(static_cast<size_t>(yn), 0xFFFF)), dx16(Codes(static_cast<size_t>(xn), 0xFFFF));
      const Dev y(nan_vec(static_cast<size_t>(yn))), dx(nan_vec(static_cast<size_t>(xn))),
          dw(nan_vec(static_cast<size_t>(wn))), db(Vec(static_cast<size_t>(g.k), 0.0f));
      const bool y16_only = run == 1 && !bias;
      gpu::conv2d_fwd_lowp(t, g, x_d.get(), w_d.get(), bias ? b_d.get() : nullptr, y16.get(),
                           y16_only ? nullptr : y.get(), ctx);
      gpu::conv2d_bwd_lowp(t, g, x_d.get(), w_d.get(), dy_d.get(), bias ? dy32_d.get() : nullptr, dx16.get(), dx.get(),
                           dw.get(), bias ? db.get() : nullptr, ctx);
      const Vec yv = y.fetch(), dxv = dx.fetch(), dwv = dw.fetch(), dbv = db.fetch();
      const Codes y16v = y16.fetch();
      if (run == 0) {
        expect_within(t, yv, e.y, e.y_abs, g.c / g.groups * g.r * g.s, bias ? &bias_per : nullptr, what + " y");
        expect_within(t, dxv, e.dx, e.dx_abs, g.k / g.groups * g.r * g.s, nullptr, what + " dx");
        expect_within(t, dwv, e.dw, e.dw_abs, g.n * g.oh() * g.ow(), nullptr, what + " dW");
        // The 16-bit output the f32 one was widened from (without a bias, the same values).
        if (!bias)
          for (size_t i = 0; i < y16v.size(); ++i)
            if (static_cast<float>(value_of(t, y16v[i])) != yv[i]) {
              ADD_FAILURE() << what << ": y[" << i << "] is not its 16-bit code widened";
              break;
            }
        if (bias) {
          // db: Σ dy32 over (n, oh·ow), f32 sums: within γ (u = 2^-24) of Σ|dy|.
          const int64_t ohw = g.oh() * g.ow();
          for (int64_t k = 0; k < g.k; ++k) {
            double sum = 0, abs = 0;
            for (int64_t i = 0; i < g.n; ++i)
              for (int64_t p = 0; p < ohw; ++p) {
                const double d = dy32[static_cast<size_t>((i * g.k + k) * ohw + p)];
                sum += d;
                abs += std::fabs(d);
              }
            const double nu = static_cast<double>(g.n * ohw) * 0x1p-24;
            EXPECT_LE(std::fabs(dbv[static_cast<size_t>(k)] - sum), nu / (1 - nu) * abs) << what << " db " << k;
          }
        }
        first_y = yv, first_dx = dxv, first_dw = dwv, first_db = dbv, first_y16 = y16v;
      } else {
        EXPECT_EQ(y16v, first_y16) << what << ": y16 again";
        if (y16_only) {
          EXPECT_TRUE(std::all_of(yv.begin(), yv.end(), [](float f) { return std::isnan(f); }))
              << what << ": the f32 output was written without being asked for";
        } else {
          expect_bitwise(yv, first_y, what + " y again");
        }
        expect_bitwise(dxv, first_dx, what + " dx again");
        expect_bitwise(dwv, first_dw, what + " dW again");
        expect_bitwise(dbv, first_db, what + " db again");
      }
    }
  }
  void* cudnn_ = nullptr;
};

constexpr HalfType kTypes[] = {HalfType::BF16, HalfType::F16};

TEST_F(ConvLowp, AllThreePassesWithinTheBound) {
  const std::vector<ConvGeom> cases = {
      conv(2, 3, 7, 9, 4, 3, 3, 1, 1),          // padded, sizes not multiples of 8
      conv(2, 8, 8, 8, 16, 3, 3, 2, 1),         // strided
      conv(2, 8, 8, 8, 12, 3, 3, 2, 1, 1, 4),   // strided, four groups
      conv(2, 8, 9, 9, 8, 3, 3, 1, 1, 1, 8),    // depthwise
      conv(1, 4, 11, 10, 6, 3, 3, 1, 2, 2),     // dilated
      conv(2, 16, 6, 6, 32, 1, 1),              // 1x1
      conv(2, 16, 8, 8, 32, 1, 1, 2),           // 1x1 strided (a ResNet's downsampling)
      conv(2, 3, 32, 32, 16, 7, 7, 2, 3),       // a ResNet stem
      conv(4, 64, 14, 14, 64, 3, 3, 1, 1),      // long dot products: K = 576, dW over 784
  };
  uint32_t seed = 10;
  for (const HalfType t : kTypes)
    for (const ConvGeom& g : cases) check(t, g, false, seed += 4);
}

TEST_F(ConvLowp, WithABiasAndItsGradient) {
  for (const HalfType t : kTypes) {
    check(t, conv(2, 4, 8, 8, 6, 3, 3, 1, 1), true, 200);
    check(t, conv(2, 8, 8, 8, 12, 3, 3, 2, 1, 1, 4), true, 210);
  }
}

// A ResNet's convolutions must have a 16-bit plan: otherwise the backend
// runs them in f32 (with a note at load).
TEST_F(ConvLowp, CudnnHasPlansForAResNetsConvolutions) {
  gpu::ConvContext ctx{cublas_, cudnn_, stream_, nullptr, 0};
  for (const HalfType t : kTypes)
    for (const ConvGeom& g : {conv(64, 3, 224, 224, 64, 7, 7, 2, 3), conv(64, 64, 56, 56, 64, 3, 3, 1, 1),
                              conv(64, 64, 56, 56, 256, 1, 1), conv(64, 256, 56, 56, 128, 1, 1, 2),
                              conv(64, 512, 7, 7, 512, 3, 3, 1, 1)}) {
      EXPECT_TRUE(gpu::conv2d_lowp_available(t, g, ctx)) << name_of(t) << " " << str(g);
      if (gpu::conv2d_lowp_available(t, g, ctx)) {
        EXPECT_GE(gpu::conv2d_lowp_workspace_bytes(t, g, ctx), 2u * static_cast<size_t>(g.weight_numel()));
      }
    }
}

// Without cuDNN there is no 16-bit path: refused, not run on im2col.
TEST_F(ConvLowp, RefusedWithoutCudnn) {
  const ConvGeom g = conv(2, 3, 6, 6, 4, 3, 3, 1, 1);
  const gpu::ConvContext none{cublas_, nullptr, stream_, nullptr, 0};
  EXPECT_FALSE(gpu::conv2d_lowp_available(HalfType::BF16, g, none));
  EXPECT_THROW((void)gpu::conv2d_lowp_workspace_bytes(HalfType::BF16, g, none), std::invalid_argument);
}

}  // namespace
}  // namespace remat::gpu_testing
