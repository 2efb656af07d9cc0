// The CPU kernels of real models on ResNet-18 and GPT-2-small-like shapes,
// single-threaded (as the kernels always are): convolution forward and
// backward (dx and dW, no bias, as before a batch norm), batch norm, max
// pooling, and attention's batched matmul and softmax.
//
// Each benchmark's arguments are its shape, named, so that
// tests/bench/bench_kernels_vs_torch.py can run the very same shapes through
// PyTorch (torch.set_num_threads(1)) and print both side by side.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/cpu_kernels.h"

namespace {

using namespace remat::cpu;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// n, c, hw (square input), k, r (square kernel), stride; padding r/2, as in ResNet.
ConvGeom conv_geom(const benchmark::State& state) {
  ConvGeom g;
  g.n = state.range(0), g.c = state.range(1), g.h = g.w = state.range(2);
  g.k = state.range(3), g.r = g.s = state.range(4);
  g.stride_h = g.stride_w = state.range(5);
  g.pad_h = g.pad_w = g.r / 2;
  return g;
}

double conv_flops(const ConvGeom& g) {
  return 2.0 * g.n * g.k * g.oh() * g.ow() * (g.c / g.groups) * g.r * g.s;
}

void BM_Conv2dFwd(benchmark::State& state) {
  const ConvGeom g = conv_geom(state);
  const auto x = random_floats(g.n * g.c * g.h * g.w, 1), W = random_floats(g.weight_numel(), 2);
  std::vector<float> y(g.n * g.k * g.oh() * g.ow()), scratch(conv2d_scratch_floats(g));
  for (auto _ : state) {
    conv2d_fwd(g, x.data(), W.data(), nullptr, y.data(), scratch.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(conv_flops(g) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Conv2dBwd(benchmark::State& state) {
  const ConvGeom g = conv_geom(state);
  const auto x = random_floats(g.n * g.c * g.h * g.w, 1), W = random_floats(g.weight_numel(), 2);
  const auto dy = random_floats(g.n * g.k * g.oh() * g.ow(), 3);
  std::vector<float> dx(x.size()), dW(W.size()), scratch(conv2d_scratch_floats(g));
  for (auto _ : state) {
    conv2d_bwd(g, x.data(), W.data(), dy.data(), dx.data(), dW.data(), nullptr, false, scratch.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::DoNotOptimize(dW.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2 * conv_flops(g) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ResNet-18 at batch 8: the stem, each stage's 3x3 convolution, a stage's
// strided entry and its 1x1 downsampling shortcut.
void conv_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "c", "hw", "k", "r", "stride"});
  b->Args({8, 3, 224, 64, 7, 2});
  b->Args({8, 64, 56, 64, 3, 1});
  b->Args({8, 64, 56, 128, 3, 2});
  b->Args({8, 64, 56, 128, 1, 2});
  b->Args({8, 128, 28, 128, 3, 1});
  b->Args({8, 256, 14, 256, 3, 1});
  b->Args({8, 512, 7, 512, 3, 1});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Conv2dFwd)->Apply(conv_shapes);
BENCHMARK(BM_Conv2dBwd)->Apply(conv_shapes);

// n, c, hw (square).
struct BnBuffers {
  int64_t n, c, hw;
  std::vector<float> x, gamma, beta, y, mean, invstd, rmean, rvar, dy, dx, dgamma, dbeta;
  explicit BnBuffers(const benchmark::State& state)
      : n(state.range(0)), c(state.range(1)), hw(state.range(2) * state.range(2)),
        x(random_floats(n * c * hw, 4)), gamma(random_floats(c, 5)), beta(random_floats(c, 6)),
        y(x.size()), mean(c), invstd(c), rmean(c, 0.0f), rvar(c, 1.0f), dy(random_floats(x.size(), 7)),
        dx(x.size()), dgamma(c), dbeta(c) {}
  void forward() {
    batchnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(), rmean.data(),
                  rvar.data(), n, c, hw, 1e-5f, 0.1f);
  }
};

void BM_BatchNormFwd(benchmark::State& state) {
  BnBuffers b(state);
  for (auto _ : state) {
    b.forward();
    benchmark::DoNotOptimize(b.y.data());
    benchmark::ClobberMemory();
  }
}

void BM_BatchNormBwd(benchmark::State& state) {
  BnBuffers b(state);
  b.forward();
  for (auto _ : state) {
    batchnorm_bwd(b.x.data(), b.dy.data(), b.gamma.data(), b.mean.data(), b.invstd.data(), b.dx.data(),
                  b.dgamma.data(), b.dbeta.data(), b.n, b.c, b.hw, false);
    benchmark::DoNotOptimize(b.dx.data());
    benchmark::ClobberMemory();
  }
}

void bn_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "c", "hw"});
  b->Args({8, 64, 112});
  b->Args({8, 64, 56});
  b->Args({8, 512, 7});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_BatchNormFwd)->Apply(bn_shapes);
BENCHMARK(BM_BatchNormBwd)->Apply(bn_shapes);

// ResNet's 3x3 stride-2 max pool after the stem: n, c, hw (square).
PoolGeom pool_geom(const benchmark::State& state) {
  PoolGeom g;
  g.n = state.range(0), g.c = state.range(1), g.h = g.w = state.range(2);
  g.kh = g.kw = 3, g.stride_h = g.stride_w = 2, g.pad_h = g.pad_w = 1;
  return g;
}

void BM_MaxPoolFwd(benchmark::State& state) {
  const PoolGeom g = pool_geom(state);
  const auto x = random_floats(g.n * g.c * g.h * g.w, 8);
  std::vector<float> y(g.n * g.c * g.oh() * g.ow());
  std::vector<int64_t> idx(y.size());
  for (auto _ : state) {
    maxpool2d_fwd(g, x.data(), y.data(), idx.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

void BM_MaxPoolBwd(benchmark::State& state) {
  const PoolGeom g = pool_geom(state);
  const auto x = random_floats(g.n * g.c * g.h * g.w, 8);
  std::vector<float> y(g.n * g.c * g.oh() * g.ow()), dx(x.size());
  std::vector<int64_t> idx(y.size());
  const auto dy = random_floats(y.size(), 9);
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  for (auto _ : state) {
    maxpool2d_bwd(g, dy.data(), idx.data(), dx.data(), false);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_MaxPoolFwd)->ArgNames({"n", "c", "hw"})->Args({8, 64, 112})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaxPoolBwd)->ArgNames({"n", "c", "hw"})->Args({8, 64, 112})->Unit(benchmark::kMillisecond);

// Attention scores q·kᵀ and their softmax: batch·heads, T, head size.
void BM_AttentionScores(benchmark::State& state) {
  const int64_t bh = state.range(0), T = state.range(1), d = state.range(2);
  const auto q = random_floats(bh * T * d, 10), k = random_floats(bh * T * d, 11);
  std::vector<float> s(bh * T * T);
  for (auto _ : state) {
    bmm(q.data(), k.data(), s.data(), bh, T, T, d, false, true, false);
    benchmark::DoNotOptimize(s.data());
    benchmark::ClobberMemory();
  }
}

void BM_SoftmaxFwd(benchmark::State& state) {
  const int64_t rows = state.range(0) * state.range(1), cols = state.range(1);
  const auto x = random_floats(rows * cols, 12);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    softmax_fwd(x.data(), y.data(), rows, cols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

void BM_SoftmaxBwd(benchmark::State& state) {
  const int64_t rows = state.range(0) * state.range(1), cols = state.range(1);
  const auto x = random_floats(rows * cols, 12), dy = random_floats(rows * cols, 13);
  std::vector<float> y(x.size()), dx(x.size());
  softmax_fwd(x.data(), y.data(), rows, cols);
  for (auto _ : state) {
    softmax_bwd(y.data(), dy.data(), dx.data(), rows, cols, false);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
}

// Fused attention over (bh, T, d) heads, causal: the forward (scores, softmax,
// ·v, logsumexp) and the backward (scores recomputed), beside the unfused
// path's pieces above (scores, softmax) for one picture of the GPT's cost.
SdpaGeom sdpa_geom_of(const benchmark::State& state) {
  SdpaGeom g;
  g.heads = state.range(0), g.tq = g.tk = state.range(1), g.d = g.dv = state.range(2), g.causal = true;
  g.scale = 0.125f;
  g.q_strides = g.k_strides = g.v_strides = g.out_strides = SdpaGeom::dense_strides(g.heads, g.tq, g.d);
  return g;
}
void BM_SdpaFwd(benchmark::State& state) {
  const SdpaGeom g = sdpa_geom_of(state);
  const int64_t n = g.heads * g.tq * g.d;
  const auto q = random_floats(n, 20), k = random_floats(n, 21), v = random_floats(n, 22);
  std::vector<float> out(n), lse(g.heads * g.tq), scratch(g.scratch_floats());
  for (auto _ : state) {
    sdpa_fwd(g, q.data(), k.data(), v.data(), out.data(), lse.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}
void BM_SdpaBwd(benchmark::State& state) {
  const SdpaGeom g = sdpa_geom_of(state);
  const int64_t n = g.heads * g.tq * g.d;
  const auto q = random_floats(n, 20), k = random_floats(n, 21), v = random_floats(n, 22), dout = random_floats(n, 23);
  std::vector<float> out(n), lse(g.heads * g.tq), scratch(g.scratch_floats()), dq(n), dk(n), dv(n);
  sdpa_fwd(g, q.data(), k.data(), v.data(), out.data(), lse.data(), scratch.data());
  for (auto _ : state) {
    sdpa_bwd(g, q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data(),
             false, false, false, scratch.data());
    benchmark::DoNotOptimize(dq.data());
    benchmark::ClobberMemory();
  }
}

// A GPT-2 head's cross-entropy (rows, classes = the vocabulary): the plain
// pair, and the pair that keeps the log-probabilities (autocast's, and every
// captured cross-entropy's). Each calls exp once an element after a vector
// loop: with GCC 12's -fipa-ra the second pair left the upper YMM halves dirty
// and ran glibc's SSE exp wrapper at 20 to 40x the cost (core/kernels/CMakeLists.txt).
// Logits of rows x classes and a label a row.
struct CeInputs {
  int64_t rows, classes;
  std::vector<float> x;
  std::vector<int32_t> labels;
  explicit CeInputs(const benchmark::State& state)
      : rows(state.range(0)), classes(state.range(1)), x(random_floats(rows * classes, 30)),
        labels(static_cast<std::size_t>(rows), 7) {}
};
void BM_SoftmaxCEFwd(benchmark::State& state) {
  const CeInputs in(state);
  for (auto _ : state) benchmark::DoNotOptimize(softmax_ce_fwd(in.x.data(), in.labels.data(), in.rows, in.classes, 0.0));
}
void BM_SoftmaxCEBwd(benchmark::State& state) {
  const CeInputs in(state);
  std::vector<float> dx(in.x.size());
  for (auto _ : state) {
    softmax_ce_bwd(in.x.data(), in.labels.data(), dx.data(), in.rows, in.classes, false, 0.0);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
}
void BM_SoftmaxCEFwdKeepLogp(benchmark::State& state) {
  const CeInputs in(state);
  std::vector<float> logp(in.x.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        softmax_ce_fwd_keep_logp(in.x.data(), in.labels.data(), logp.data(), in.rows, in.classes, 0.0));
    benchmark::ClobberMemory();
  }
}
void BM_SoftmaxCEBwdFromLogp(benchmark::State& state) {
  const CeInputs in(state);
  std::vector<float> logp(in.x.size()), dx(in.x.size());
  softmax_ce_fwd_keep_logp(in.x.data(), in.labels.data(), logp.data(), in.rows, in.classes, 0.0);
  for (auto _ : state) {
    softmax_ce_bwd_from_logp(logp.data(), in.labels.data(), dx.data(), in.rows, in.classes, false, 0.0);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_AttentionScores)->ArgNames({"bh", "T", "d"})->Args({8 * 12, 128, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxFwd)->ArgNames({"bh", "T"})->Args({8 * 12, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxBwd)->ArgNames({"bh", "T"})->Args({8 * 12, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SdpaFwd)->ArgNames({"bh", "T", "d"})->Args({8 * 12, 128, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SdpaBwd)->ArgNames({"bh", "T", "d"})->Args({8 * 12, 128, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCEFwd)->ArgNames({"rows", "classes"})->Args({64, 50257})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCEBwd)->ArgNames({"rows", "classes"})->Args({64, 50257})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCEFwdKeepLogp)->ArgNames({"rows", "classes"})->Args({64, 50257})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCEBwdFromLogp)->ArgNames({"rows", "classes"})->Args({64, 50257})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
