// The 16-bit variants of mixed precision's memory-bound kernels
// (gpu/kernels/pointwise_io.cu) against the path they replace, on the
// device: the inputs widened to f32 (bf16_to_f32 / f16_to_f32), the f32
// kernel into f32 scratch, the result stored as the widening call stores it
// (core/exec/mixed_call.h: a forward output narrowed; a gradient rounded to
// its dtype, then narrowed or added with add_to_bf16/f16; an f32 one copied
// or added). Every element must have the same bits, over every combination
// of stored dtypes the kernels take and data that includes rounding ties of
// both formats, NaN, infinities, signed zeros, f16 subnormals (and ties
// between them) and f16 overflow.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/convert.h"
#include "core/kernels/rng.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gpu_testing {
namespace {

using gpu::IoIn;
using gpu::IoOut;
using gpu::IoType;
using Bytes = std::vector<uint8_t>;

const char* type_name(IoType t) { return t == IoType::BF16 ? "bf16" : t == IoType::F16 ? "f16" : "f32"; }
size_t elem_size(IoType t) { return t == IoType::F32 ? 4 : 2; }

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Values that test the roundings: every 16th a NaN, infinities, zeros of
// both signs, exact ties of bf16 and of f16 (the dropped bits exactly half
// an ulp), f16 subnormals and the ties between them, f16's overflow and its
// rounding-to-infinity tie, a bf16 normal below f16's range; the rest uniform.
Vec special_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::uniform_int_distribution<uint32_t> bits(0, 0xFFFFFFFFu);
  Vec v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = bits(gen);
    const uint32_t sign = r & 0x80000000u;
    switch (i % 16) {
      case 0: v[i] = from_bits(0x7FC00000u | (r & 0x3FFFFFu)); break;  // a NaN, some payload
      case 1: v[i] = INFINITY; break;
      case 2: v[i] = -INFINITY; break;
      case 3: v[i] = 0.0f; break;
      case 4: v[i] = -0.0f; break;
      case 5: v[i] = from_bits(sign | (0x3E000000u + (r & 0x01FF0000u)) | 0x8000u); break;  // a bf16 tie
      case 6: v[i] = from_bits(sign | (0x3E000000u + (r & 0x01FFE000u)) | 0x1000u); break;  // an f16 tie
      case 7: v[i] = std::ldexp(static_cast<float>(r % 1024), -24) * (sign ? -1.0f : 1.0f); break;  // f16 subnormal
      case 8: v[i] = std::ldexp(static_cast<float>(2 * (r % 512) + 1), -25); break;  // a tie between two of them
      case 9: v[i] = sign ? -70000.0f : 70000.0f; break;                              // beyond f16
      case 10: v[i] = 65520.0f; break;                                                // f16's tie to infinity
      case 11: v[i] = 1e-30f; break;                                                  // zero in f16
      default: v[i] = u(gen);
    }
  }
  return v;
}

Bytes encode(const Vec& v, IoType t) {
  Bytes b(v.size() * elem_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == IoType::F32) std::memcpy(&b[4 * i], &v[i], 4);
    else {
      const uint16_t c = t == IoType::BF16 ? cpu::bf16_bits(v[i]) : cpu::f16_bits(v[i]);
      std::memcpy(&b[2 * i], &c, 2);
    }
  }
  return b;
}

// The widening path's f32 copy of a stored tensor, on the device.
void widen_on_device(IoType t, const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (t == IoType::BF16) gpu::bf16_to_f32(static_cast<const uint16_t*>(src), dst, n, s);
  else if (t == IoType::F16) gpu::f16_to_f32(static_cast<const uint16_t*>(src), dst, n, s);
  else CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, 4 * n, cudaMemcpyDeviceToDevice, s));
}

// The widening call's store of f32 scratch `r` into `o`: a forward output
// narrowed (store_output); a gradient rounded to its dtype, then narrowed or
// added (store_dx: round_to, narrow / add_stored).
void store_like_the_mixed_call(float* r, IoOut o, int64_t n, bool gradient, cudaStream_t s) {
  if (o.t == IoType::F32) {
    if (o.add) gpu::add_f32(static_cast<float*>(o.p), r, n, s);
    else CUDA_CHECK_THROW(cudaMemcpyAsync(o.p, r, 4 * n, cudaMemcpyDeviceToDevice, s));
    return;
  }
  auto* d = static_cast<uint16_t*>(o.p);
  if (gradient) {
    if (o.t == IoType::BF16) gpu::round_bf16(r, n, s);
    else gpu::round_f16(r, n, s);
  }
  if (o.add) {
    if (o.t == IoType::BF16) gpu::add_to_bf16(d, r, n, s);
    else gpu::add_to_f16(d, r, n, s);
  } else if (o.t == IoType::BF16) gpu::f32_to_bf16(r, d, n, s);
  else gpu::f32_to_f16(r, d, n, s);
}

using F32Call = std::function<void(const std::vector<const float*>& in, float* out)>;
using IoCall = std::function<void(const std::vector<IoIn>& in, IoOut out)>;

class PointwiseIo : public GpuKernels {
 protected:
  // One case: inputs of the given stored types (special values, seeds from
  // `seed`), an output of type `out` holding earlier values (what `add`
  // adds to), n elements each. Both paths from the same bytes; the results
  // compared byte for byte.
  void expect_same_bits(const std::string& what, const std::vector<IoType>& ins, IoType out, bool add, bool gradient,
                        int64_t n, const F32Call& f32, const IoCall& io, uint32_t seed = 11, bool specials = true) {
    SCOPED_TRACE(what + " in " + [&] {
      std::string s;
      for (IoType t : ins) s += std::string(type_name(t)) + " ";
      return s;
    }() + "out " + type_name(out) + (add ? " (add)" : ""));
    const auto un = static_cast<size_t>(n);
    std::vector<std::unique_ptr<DeviceArray<uint8_t>>> stored;
    std::vector<std::unique_ptr<Dev>> widened;
    std::vector<const float*> f32_in;
    std::vector<IoIn> io_in;
    for (size_t k = 0; k < ins.size(); ++k) {
      const Vec values = specials ? special_values(un, seed + 7 * k) : random_vec(un, seed + 7 * k, -3.0f, 3.0f);
      stored.push_back(std::make_unique<DeviceArray<uint8_t>>(encode(values, ins[k])));
      widened.push_back(std::make_unique<Dev>(Vec(un)));
      widen_on_device(ins[k], stored.back()->get(), widened.back()->get(), n, stream_);
      f32_in.push_back(widened.back()->get());
      io_in.push_back(IoIn{stored.back()->get(), ins[k]});
    }
    const Bytes before = encode(random_vec(un, seed + 101, -2.0f, 2.0f), out);
    DeviceArray<uint8_t> ref(before), got(before);
    Dev scratch{Vec(un, std::nanf(""))};  // the kernel writes every element
    f32(f32_in, scratch.get());
    store_like_the_mixed_call(scratch.get(), IoOut{ref.get(), out, add}, n, gradient, stream_);
    io(io_in, IoOut{got.get(), out, add});
    const Bytes a = ref.fetch(), b = got.fetch();
    ASSERT_EQ(a.size(), b.size());
    const size_t es = elem_size(out);
    int shown = 0;
    for (size_t i = 0; i < un && shown < 5; ++i)
      if (std::memcmp(&a[i * es], &b[i * es], es) != 0) {
        uint32_t x = 0, y = 0;
        std::memcpy(&x, &a[i * es], es);
        std::memcpy(&y, &b[i * es], es);
        ADD_FAILURE() << "element " << i << ": widening path 0x" << std::hex << x << ", 16-bit kernel 0x" << y;
        ++shown;
      }
  }
  // The dtype combinations the mixed call hands over: 16-bit to 16-bit of
  // one format, 16-bit to f32 (a softmax under autocast), f32 to 16-bit, f32 alone.
  static std::vector<std::pair<IoType, IoType>> pairs() {
    return {{IoType::BF16, IoType::BF16}, {IoType::F16, IoType::F16}, {IoType::BF16, IoType::F32},
            {IoType::F16, IoType::F32},   {IoType::F32, IoType::BF16}, {IoType::F32, IoType::F16},
            {IoType::F32, IoType::F32}};
  }
  static constexpr int64_t kN = 4096 + 37;  // more than one block, not a multiple of one
};

TEST_F(PointwiseIo, ActivationsForwardAndBackward) {
  for (const Act act : {Act::None, Act::ReLU, Act::Tanh, Act::GELU, Act::Sigmoid, Act::SiLU})
    for (const auto& [in, out] : pairs()) {
      const std::string name = "act " + std::to_string(static_cast<int>(act));
      expect_same_bits(name + " fwd", {in}, out, false, false, kN,
                       [&](auto& x, float* y) { gpu::act_fwd(act, x[0], y, kN, stream_); },
                       [&](auto& x, IoOut y) { gpu::act_fwd_io(act, x[0], y, kN, stream_); });
      for (const bool add : {false, true})
        expect_same_bits(name + " bwd", {in, in}, out, add, true, kN,
                         [&](auto& x, float* dx) { gpu::act_bwd(act, x[0], x[1], dx, kN, false, stream_); },
                         [&](auto& x, IoOut dx) { gpu::act_bwd_io(act, x[0], x[1], dx, kN, stream_); });
    }
}

TEST_F(PointwiseIo, ByAConstant) {
  const Vec scale{0.125f}, eight = random_vec(8, 3, -2.0f, 2.0f);
  const Vec repeat = random_vec(1, 9, 0.5f, 3.0f);
  for (const cpu::ConstOp op : {cpu::ConstOp::Mul, cpu::ConstOp::Div, cpu::ConstOp::Add})
    for (const Vec* c : {&scale, &eight, &repeat}) {
      const Dev dc(*c);
      const auto cn = static_cast<int64_t>(c->size());
      const int64_t n = cn == 8 ? 4096 : kN;
      for (const auto& [in, out] : pairs()) {
        const std::string name = "const " + std::to_string(static_cast<int>(op)) + " cn " + std::to_string(cn);
        expect_same_bits(name + " fwd", {in}, out, false, false, n,
                         [&](auto& x, float* y) { gpu::const_fwd(op, x[0], dc.get(), y, n, cn, stream_); },
                         [&](auto& x, IoOut y) { gpu::const_fwd_io(op, x[0], dc.get(), y, n, cn, stream_); });
        for (const bool add : {false, true})
          expect_same_bits(name + " bwd", {in}, out, add, true, n,
                           [&](auto& x, float* dx) { gpu::const_bwd(op, x[0], dc.get(), dx, n, cn, false, stream_); },
                           [&](auto& x, IoOut dx) { gpu::const_bwd_io(op, x[0], dc.get(), dx, n, cn, stream_); });
      }
    }
}

TEST_F(PointwiseIo, MaskedFill) {
  const int64_t n = 4096, mask_n = 1024;
  std::vector<uint8_t> mask(mask_n);
  for (int64_t i = 0; i < mask_n; ++i) mask[static_cast<size_t>(i)] = (i * 7919) % 3 == 0;
  const DeviceArray<uint8_t> dm(mask);
  for (const auto& [in, out] : pairs()) {
    expect_same_bits("masked_fill fwd", {in}, out, false, false, n,
                     [&](auto& x, float* y) { gpu::masked_fill_fwd(x[0], dm.get(), y, n, mask_n, -INFINITY, stream_); },
                     [&](auto& x, IoOut y) { gpu::masked_fill_fwd_io(x[0], dm.get(), y, n, mask_n, -INFINITY, stream_); });
    for (const bool add : {false, true})
      expect_same_bits("masked_fill bwd", {in}, out, add, true, n,
                       [&](auto& x, float* dx) { gpu::masked_fill_bwd(x[0], dm.get(), dx, n, mask_n, false, stream_); },
                       [&](auto& x, IoOut dx) { gpu::masked_fill_bwd_io(x[0], dm.get(), dx, n, mask_n, stream_); });
  }
}

// Forward and backward are one kernel each way; p = 0 is the copy shortcut, p = 1 drops everything.
TEST_F(PointwiseIo, Dropout) {
  for (const float p : {0.0f, 0.1f, 0.5f, 1.0f})
    for (const auto& [in, out] : pairs()) {
      const std::string name = "dropout p " + std::to_string(p);
      expect_same_bits(name + " fwd", {in}, out, false, false, kN,
                       [&](auto& x, float* y) { gpu::dropout_fwd(x[0], y, kN, p, 42, 5, stream_); },
                       [&](auto& x, IoOut y) { gpu::dropout_io(x[0], y, kN, p, 42, 5, stream_); });
      for (const bool add : {false, true})
        expect_same_bits(name + " bwd", {in}, out, add, true, kN,
                         [&](auto& x, float* dx) { gpu::dropout_bwd(x[0], dx, kN, p, 42, 5, false, stream_); },
                         [&](auto& x, IoOut dx) { gpu::dropout_io(x[0], dx, kN, p, 42, 5, stream_); });
    }
}

// Add's forward on mixed operands (a GPT's residual: f32 + bf16 -> f32) and
// its backward, G copied into (or added to) each input's gradient.
TEST_F(PointwiseIo, AddForwardAndItsGradientCopy) {
  const std::vector<std::vector<IoType>> ins = {{IoType::BF16, IoType::BF16}, {IoType::F16, IoType::F16},
                                                {IoType::F32, IoType::BF16},  {IoType::F32, IoType::F16},
                                                {IoType::F32, IoType::F32}};
  for (const auto& in : ins)
    for (const IoType out : {IoType::F32, in[1]})
      expect_same_bits("add fwd", in, out, false, false, kN,
                       [&](auto& x, float* y) { gpu::add_fwd(x[0], x[1], y, kN, stream_); },
                       [&](auto& x, IoOut y) { gpu::add_fwd_io(x[0], x[1], y, kN, stream_); });
  for (const auto& [in, out] : pairs())
    for (const bool add : {false, true})
      expect_same_bits("add bwd", {in}, out, add, true, kN,
                       [&](auto& x, float* dx) { gpu::add_into(x[0], dx, kN, false, stream_); },
                       [&](auto& x, IoOut dx) { gpu::copy_io(x[0], dx, kN, stream_); });
}

// Rows of a GPT's attention (1024 columns, a quarter masked to -inf as the
// causal mask leaves them), a short odd row, and one wider than the block.
TEST_F(PointwiseIo, Softmax) {
  for (const int64_t cols : {int64_t{1024}, int64_t{77}, int64_t{1000}}) {
    const int64_t rows = 24, n = rows * cols;
    for (const auto& [in, out] : pairs()) {
      const std::string name = "softmax cols " + std::to_string(cols);
      expect_same_bits(name + " fwd", {in}, out, false, false, n,
                       [&](auto& x, float* y) { gpu::softmax_fwd(x[0], y, rows, cols, stream_); },
                       [&](auto& x, IoOut y) { gpu::softmax_fwd_io(x[0], y, rows, cols, stream_); });
      for (const bool add : {false, true})
        expect_same_bits(name + " bwd", {in, in}, out, add, true, n,
                         [&](auto& x, float* dx) { gpu::softmax_bwd(x[0], x[1], dx, rows, cols, false, stream_); },
                         [&](auto& x, IoOut dx) { gpu::softmax_bwd_io(x[0], x[1], dx, rows, cols, stream_); });
    }
  }
}

// The special values make every row above hold a NaN (and so give NaN rows):
// rows of plain values, 16-bit in and out, check the finite results too.
TEST_F(PointwiseIo, SoftmaxOfFiniteRows) {
  const int64_t rows = 512, cols = 1024, n = rows * cols;
  for (const IoType t : {IoType::BF16, IoType::F16}) {
    const Bytes x = encode(random_vec(static_cast<size_t>(n), 17, -8.0f, 8.0f), t);
    DeviceArray<uint8_t> dx16(x);
    Dev x32{Vec(static_cast<size_t>(n))};
    widen_on_device(t, dx16.get(), x32.get(), n, stream_);
    Dev y32{Vec(static_cast<size_t>(n))};
    gpu::softmax_fwd(x32.get(), y32.get(), rows, cols, stream_);
    DeviceArray<uint8_t> ref(Bytes(static_cast<size_t>(n) * 2)), got(Bytes(static_cast<size_t>(n) * 2));
    store_like_the_mixed_call(y32.get(), IoOut{ref.get(), t, false}, n, false, stream_);
    gpu::softmax_fwd_io(IoIn{dx16.get(), t}, IoOut{got.get(), t, false}, rows, cols, stream_);
    EXPECT_EQ(ref.fetch(), got.fetch()) << type_name(t);
  }
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

// Batch norm (batchnorm.cu's kernels, templated on the operands' storage):
// one block a channel and the grid-wide path with partial sums, the output,
// the saved statistics, the input gradient (stored and added) and the
// parameters' gradients; plain values (the statistics of a channel with a
// NaN are NaN throughout) and, on the small shape, the special values.
TEST_F(PointwiseIo, BatchNorm) {
  struct Shape {
    int64_t n, c, hw;
  };
  const std::vector<std::pair<IoType, IoType>> kinds = {
      {IoType::BF16, IoType::BF16}, {IoType::F16, IoType::F16}, {IoType::BF16, IoType::F32}, {IoType::F32, IoType::BF16}};
  for (const Shape sh : {Shape{2, 3, 35}, Shape{4, 8, 4096}})
    for (const bool grid : {false, true})
      for (const bool specials : {false, true}) {
        if (specials && sh.hw > 35) continue;
        const int64_t n = sh.n * sh.c * sh.hw, count = grid ? gpu::batchnorm_partial_count(sh.n, sh.c, sh.hw) : 0;
        if (grid) {
          ASSERT_GT(count, 0);
        }
        DeviceArray<double> part(std::vector<double>(static_cast<size_t>(count > 0 ? count : 1)));
        double* partials = grid ? part.get() : nullptr;
        const auto uc = static_cast<size_t>(sh.c);
        const Dev gamma(random_vec(uc, 31, 0.5f, 1.5f)), beta(random_vec(uc, 37));
        for (const auto& [in, out] : kinds) {
          const std::string name = std::string(grid ? "grid-wide " : "") + "batchnorm c" + std::to_string(sh.c) +
                                   " hw" + std::to_string(sh.hw) + (specials ? " specials" : "");
          Dev mean_a{Vec(uc)}, inv_a{Vec(uc)}, mean_b{Vec(uc)}, inv_b{Vec(uc)};
          expect_same_bits(
              name + " fwd", {in}, out, false, false, n,
              [&](auto& x, float* y) {
                gpu::batchnorm_fwd(x[0], gamma.get(), beta.get(), y, mean_a.get(), inv_a.get(), nullptr, nullptr, sh.n,
                                   sh.c, sh.hw, 1e-5f, 0.1f, stream_, partials, count);
              },
              [&](auto& x, IoOut y) {
                gpu::batchnorm_fwd_io(x[0], gamma.get(), beta.get(), y, mean_b.get(), inv_b.get(), sh.n, sh.c, sh.hw,
                                      1e-5f, stream_, partials, count);
              },
              11, specials);
          EXPECT_TRUE(same_bits(mean_a.fetch(), mean_b.fetch())) << name;
          EXPECT_TRUE(same_bits(inv_a.fetch(), inv_b.fetch())) << name;
          for (const bool add : {false, true}) {
            Dev dg_a{Vec(uc, 0.0f)}, db_a{Vec(uc, 0.0f)}, dg_b{Vec(uc, 0.0f)}, db_b{Vec(uc, 0.0f)};
            expect_same_bits(
                name + " bwd", {in, in}, out, add, true, n,
                [&](auto& x, float* dx) {
                  gpu::batchnorm_bwd(x[0], x[1], gamma.get(), mean_a.get(), inv_a.get(), dx, dg_a.get(), db_a.get(),
                                     sh.n, sh.c, sh.hw, false, stream_, partials, count);
                },
                [&](auto& x, IoOut dx) {
                  gpu::batchnorm_bwd_io(x[0], x[1], gamma.get(), mean_a.get(), inv_a.get(), dx, dg_b.get(), db_b.get(),
                                        sh.n, sh.c, sh.hw, stream_, partials, count);
                },
                13, specials);
            EXPECT_TRUE(same_bits(dg_a.fetch(), dg_b.fetch())) << name;
            EXPECT_TRUE(same_bits(db_a.fetch(), db_b.fetch())) << name;
          }
          // Without an input gradient: the parameters' alone, the same bits.
          Dev dg_a{Vec(uc, 0.0f)}, db_a{Vec(uc, 0.0f)}, dg_b{Vec(uc, 0.0f)}, db_b{Vec(uc, 0.0f)};
          Dev scratch{Vec(static_cast<size_t>(n))};
          const Bytes xs = encode(random_vec(static_cast<size_t>(n), 41, -3.0f, 3.0f), in);
          DeviceArray<uint8_t> x16(xs), dy16(xs);
          Dev x32{Vec(static_cast<size_t>(n))}, dy32{Vec(static_cast<size_t>(n))};
          widen_on_device(in, x16.get(), x32.get(), n, stream_);
          widen_on_device(in, dy16.get(), dy32.get(), n, stream_);
          gpu::batchnorm_bwd(x32.get(), dy32.get(), gamma.get(), mean_a.get(), inv_a.get(), scratch.get(), dg_a.get(),
                             db_a.get(), sh.n, sh.c, sh.hw, false, stream_, partials, count);
          gpu::batchnorm_bwd_io(IoIn{x16.get(), in}, IoIn{dy16.get(), in}, gamma.get(), mean_a.get(), inv_a.get(),
                                IoOut{}, dg_b.get(), db_b.get(), sh.n, sh.c, sh.hw, stream_, partials, count);
          EXPECT_TRUE(same_bits(dg_a.fetch(), dg_b.fetch())) << name << " (no dx)";
          EXPECT_TRUE(same_bits(db_a.fetch(), db_b.fetch())) << name << " (no dx)";
        }
      }
}

// The cross-entropy (losses.cu's kernels, templated on how the logits and dx
// are stored): the loss with and without the grid-wide partial sums, the
// log-probabilities it keeps, and the logits' gradient from the logits or
// from the kept log-probabilities, stored and added; a label out of range
// (a NaN row) among them.
TEST_F(PointwiseIo, CrossEntropy) {
  for (const int64_t classes : {int64_t{1000}, int64_t{77}}) {
    const int64_t rows = 64, n = rows * classes;
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919) % classes);
    labels[5] = -1;
    const DeviceArray<int32_t> dl(labels);
    const int64_t count = gpu::softmax_ce_partial_count(rows);
    DeviceArray<double> part(std::vector<double>(static_cast<size_t>(count)));
    for (const IoType in : {IoType::BF16, IoType::F16, IoType::F32}) {
      const std::string name = std::string("cross-entropy classes ") + std::to_string(classes) + " " + type_name(in);
      const Bytes x = encode(random_vec(static_cast<size_t>(n), 43, -6.0f, 6.0f), in);
      DeviceArray<uint8_t> x16(x);
      Dev x32{Vec(static_cast<size_t>(n))};
      widen_on_device(in, x16.get(), x32.get(), n, stream_);
      for (double* partials : {static_cast<double*>(nullptr), part.get()}) {
        const int64_t cap = partials ? count : 0;
        Dev loss_a{Vec(1)}, loss_b{Vec(1)}, loss_c{Vec(1)}, loss_d{Vec(1)};
        Dev logp_a{Vec(static_cast<size_t>(n))}, logp_b{Vec(static_cast<size_t>(n))};
        gpu::softmax_ce_fwd(x32.get(), dl.get(), loss_a.get(), rows, classes, stream_, partials, cap);
        gpu::softmax_ce_fwd_io(IoIn{x16.get(), in}, dl.get(), loss_b.get(), nullptr, rows, classes, stream_, partials,
                               cap);
        gpu::softmax_ce_fwd_keep_logp(x32.get(), dl.get(), loss_c.get(), logp_a.get(), rows, classes, stream_,
                                      partials, cap);
        gpu::softmax_ce_fwd_io(IoIn{x16.get(), in}, dl.get(), loss_d.get(), logp_b.get(), rows, classes, stream_,
                               partials, cap);
        EXPECT_TRUE(same_bits(loss_a.fetch(), loss_b.fetch())) << name << (partials ? " grid-wide" : "");
        EXPECT_TRUE(same_bits(loss_c.fetch(), loss_d.fetch())) << name << (partials ? " grid-wide" : "");
        EXPECT_TRUE(same_bits(logp_a.fetch(), logp_b.fetch())) << name << " log-probabilities";
      }
      for (const IoType out : {in, IoType::F32})
        for (const bool add : {false, true})
          expect_same_bits(
              name + " bwd", {in}, out, add, true, n,
              [&](auto& v, float* dx) { gpu::softmax_ce_bwd(v[0], dl.get(), dx, rows, classes, false, stream_); },
              [&](auto& v, IoOut dx) { gpu::softmax_ce_bwd_io(v[0], dl.get(), dx, rows, classes, stream_); }, 47,
              false);
    }
    // From f32 log-probabilities (what the loss keeps) into each gradient dtype.
    for (const IoType out : {IoType::BF16, IoType::F16, IoType::F32})
      for (const bool add : {false, true})
        expect_same_bits(
            "cross-entropy bwd from logp", {IoType::F32}, out, add, true, n,
            [&](auto& v, float* dx) { gpu::softmax_ce_bwd_from_logp(v[0], dl.get(), dx, rows, classes, false, stream_); },
            [&](auto& v, IoOut dx) {
              gpu::softmax_ce_bwd_from_logp_io(static_cast<const float*>(v[0].p), dl.get(), dx, rows, classes, stream_);
            },
            53);
  }
}

// The pointwise family on stored tensors (pointwise_fwd_io / pointwise_bwd_io)
// against the widening path, over (6, 40, 96): operand 0 full and read
// transposed, operand 1 broadcast as a norm's weight (96), its statistics
// (6, 40, 1) or the same shape; the forward output and each operand's
// gradient (stored or added) byte for byte, for functions that read a, b and
// y, over every dtype pair.
TEST_F(PointwiseIo, PointwiseFamilyBroadcastAndStrided) {
  const int64_t shape[3] = {6, 40, 96};
  const int64_t n_out = shape[0] * shape[1] * shape[2];
  for (const auto fn : {pw::Fn::Mul, pw::Fn::Div, pw::Fn::Rsqrt, pw::Fn::SiLU, pw::Fn::Where})
    for (const auto& dims1 : {std::vector<int64_t>{1, 1, 96}, std::vector<int64_t>{6, 40, 1},
                              std::vector<int64_t>{6, 40, 96}})
      for (const auto& [in, out] : pairs()) {
        cpu::PwGeom g;
        g.rank = 3;
        g.fn = fn;
        g.arity = pw::kFns[static_cast<int>(fn)].arity;
        pw::attr_defaults(fn, g.p, g.q);
        std::vector<int64_t> n_of;
        for (int k = 0; k < g.arity; ++k) {
          const std::vector<int64_t> dims = k == 1 ? dims1 : std::vector<int64_t>{6, 40, 96};
          // Operand 0 stored transposed (as its reversed shape, row-major), the others row-major.
          const int64_t st[3] = {k == 0 ? 1 : dims[1] * dims[2], k == 0 ? dims[0] : dims[2],
                                 k == 0 ? dims[0] * dims[1] : 1};
          for (int d = 0; d < 3; ++d) {
            g.shape[d] = shape[d];
            g.dims[k][d] = dims[static_cast<std::size_t>(d)];
            g.stride[k][d] = dims[static_cast<std::size_t>(d)] == 1 ? 0 : st[d];
          }
          n_of.push_back(dims[0] * dims[1] * dims[2]);
        }
        const std::string name = std::string(pw::kFns[static_cast<int>(fn)].name) + " operand 1 (" +
                                 std::to_string(dims1[0]) + ", " + std::to_string(dims1[1]) + ", " +
                                 std::to_string(dims1[2]) + ") " + type_name(in) + " -> " + type_name(out);
        SCOPED_TRACE(name);
        // Operands stored in `in` (Where's condition 0/1), widened for the f32 path.
        std::vector<std::unique_ptr<DeviceArray<uint8_t>>> stored;
        std::vector<std::unique_ptr<Dev>> wide;
        const float* xf[3] = {};
        IoIn xi[3] = {};
        for (int k = 0; k < g.arity; ++k) {
          const auto n = static_cast<size_t>(n_of[static_cast<std::size_t>(k)]);
          Vec v = special_values(n, 70u + static_cast<uint32_t>(k));
          if (fn == pw::Fn::Where && k == 0)
            for (float& e : v) e = e > 0.5f ? 1.0f : 0.0f;
          stored.push_back(std::make_unique<DeviceArray<uint8_t>>(encode(v, in)));
          wide.push_back(std::make_unique<Dev>(Vec(n)));
          widen_on_device(in, stored.back()->get(), wide.back()->get(), static_cast<int64_t>(n), stream_);
          xf[k] = wide.back()->get();
          xi[k] = IoIn{stored.back()->get(), in};
        }
        // Forward: y stored in `out`.
        const auto un = static_cast<size_t>(n_out);
        DeviceArray<uint8_t> y_ref(Bytes(un * elem_size(out))), y_got(Bytes(un * elem_size(out)));
        Dev scratch{Vec(un, std::nanf(""))};
        gpu::pointwise_fwd(g, xf, scratch.get(), stream_);
        store_like_the_mixed_call(scratch.get(), IoOut{y_ref.get(), out, false}, n_out, false, stream_);
        gpu::pointwise_fwd_io(g, xi, IoOut{y_got.get(), out, false}, stream_);
        ASSERT_EQ(y_ref.fetch(), y_got.fetch()) << "forward";
        // Backward: y and dy as stored in `out`, widened for the f32 path.
        Dev y_wide{Vec(un)}, dy_wide{Vec(un)};
        widen_on_device(out, y_ref.get(), y_wide.get(), n_out, stream_);
        const DeviceArray<uint8_t> dy(encode(special_values(un, 91), out));
        widen_on_device(out, dy.get(), dy_wide.get(), n_out, stream_);
        for (int k = fn == pw::Fn::Where ? 1 : 0; k < g.arity; ++k) {
          const int64_t n = n_of[static_cast<std::size_t>(k)];
          for (const bool add : {false, true}) {
            const Bytes before = encode(random_vec(static_cast<size_t>(n), 93, -2.0f, 2.0f), in);
            DeviceArray<uint8_t> ref(before), got(before);
            Dev grad{Vec(static_cast<size_t>(n), std::nanf(""))};
            gpu::pointwise_bwd(g, k, xf, y_wide.get(), dy_wide.get(), grad.get(), false, stream_);
            store_like_the_mixed_call(grad.get(), IoOut{ref.get(), in, add}, n, true, stream_);
            gpu::pointwise_bwd_io(g, k, xi, IoIn{y_got.get(), out}, IoIn{dy.get(), out}, IoOut{got.get(), in, add},
                                  stream_);
            ASSERT_EQ(ref.fetch(), got.fetch()) << "d/d operand " << k << (add ? " (add)" : "");
          }
        }
      }
}

// The fused attention on stored tensors (sdpa_fwd_io / sdpa_bwd_io, the
// templates of sdpa.cu on DIn/DOut) against the widening path: q, k, v and
// out laid out as a GPT's heads are (q (batch, t, heads, d) read as (batch,
// heads, t, d); k stored transposed per head; v the second half of a
// projection's rows; out written as (batch, t, heads, dv)), widened whole for
// the f32 kernels; causal and not, with an additive mask (-inf where hidden,
// the first key always visible), tq != tk, d != dv, more than one tile of
// rows. out and lse byte for byte; then from out and dout as stored each
// gradient stored and added (over earlier values), and with dq not wanted.
TEST_F(PointwiseIo, FusedAttention) {
  struct Shape {
    int64_t batch, heads, tq, tk, d, dv;
    bool causal, mask;
  };
  const Shape shapes[] = {{2, 3, 70, 70, 32, 32, true, false},
                          {2, 2, 37, 45, 20, 24, false, true},
                          {1, 2, 40, 33, 64, 64, false, false},
                          {2, 1, 33, 33, 16, 16, true, true}};
  for (const Shape& sh : shapes)
    for (const IoType t : {IoType::BF16, IoType::F16}) {
      cpu::SdpaGeom g;
      g.batch = sh.batch, g.heads = sh.heads, g.tq = sh.tq, g.tk = sh.tk, g.d = sh.d, g.dv = sh.dv;
      g.causal = sh.causal;
      g.scale = 1.0f / std::sqrt(static_cast<float>(sh.d));
      const int64_t b = sh.batch, h = sh.heads, tq = sh.tq, tk = sh.tk, d = sh.d, dv = sh.dv;
      g.q_strides = {tq * h * d, d, h * d, 1};
      g.k_strides = {h * d * tk, d * tk, 1, tk};
      g.v_strides = {tk * h * 2 * dv, 2 * dv, h * 2 * dv, 1};  // from dv on: the second half
      g.out_strides = {tq * h * dv, dv, h * dv, 1};
      const int64_t nq = b * tq * h * d, nk = b * h * d * tk, nvb = b * tk * h * 2 * dv, nv = b * h * tk * dv;
      const int64_t no = b * h * tq * dv, nl = b * h * tq;
      const std::string name = std::string(type_name(t)) + " b" + std::to_string(b) + " h" + std::to_string(h) +
                               " tq" + std::to_string(tq) + " tk" + std::to_string(tk) + " d" + std::to_string(d) +
                               " dv" + std::to_string(dv) + (sh.causal ? " causal" : "") + (sh.mask ? " mask" : "");
      SCOPED_TRACE(name);
      Vec mask;
      if (sh.mask) {  // (batch, 1, tq, tk)
        std::mt19937 gen(5);
        mask.resize(static_cast<size_t>(b * tq * tk));
        for (size_t i = 0; i < mask.size(); ++i)
          mask[i] = i % static_cast<size_t>(tk) != 0 && gen() % 10 < 3 ? -INFINITY : 0.0f;
        g.mask_strides = {tq * tk, 0, tk, 1};
      }
      const Dev mask_d(mask);
      g.mask = sh.mask ? mask_d.get() : nullptr;
      // The stored tensors (values the dtype holds), and their f32 copies.
      const DeviceArray<uint8_t> q16(encode(random_vec(static_cast<size_t>(nq), 1, -2.0f, 2.0f), t));
      const DeviceArray<uint8_t> k16(encode(random_vec(static_cast<size_t>(nk), 2, -2.0f, 2.0f), t));
      const DeviceArray<uint8_t> v16(encode(random_vec(static_cast<size_t>(nvb), 3, -2.0f, 2.0f), t));
      Dev qf{Vec(static_cast<size_t>(nq))}, kf{Vec(static_cast<size_t>(nk))}, vf{Vec(static_cast<size_t>(nvb))};
      widen_on_device(t, q16.get(), qf.get(), nq, stream_);
      widen_on_device(t, k16.get(), kf.get(), nk, stream_);
      widen_on_device(t, v16.get(), vf.get(), nvb, stream_);
      const auto* v16_at = reinterpret_cast<const uint16_t*>(v16.get()) + dv;
      const IoIn qi{q16.get(), t}, ki{k16.get(), t}, vi{v16_at, t};
      // Forward.
      const auto es = elem_size(t);
      DeviceArray<uint8_t> out_ref(Bytes(static_cast<size_t>(no) * es)), out_got(Bytes(static_cast<size_t>(no) * es));
      Dev out32{nan_vec(static_cast<size_t>(no))}, lse_ref{nan_vec(static_cast<size_t>(nl))},
          lse_got{nan_vec(static_cast<size_t>(nl))};
      gpu::sdpa_fwd(g, qf.get(), kf.get(), vf.get() + dv, out32.get(), lse_ref.get(), nullptr, stream_);
      store_like_the_mixed_call(out32.get(), IoOut{out_ref.get(), t, false}, no, false, stream_);
      gpu::sdpa_fwd_io(g, qi, ki, vi, IoOut{out_got.get(), t, false}, lse_got.get(), stream_);
      ASSERT_EQ(out_ref.fetch(), out_got.fetch()) << "out";
      ASSERT_TRUE(same_bits(lse_ref.fetch(), lse_got.fetch())) << "lse";
      // Backward from out and dout (contiguous) as stored.
      const DeviceArray<uint8_t> dout16(encode(random_vec(static_cast<size_t>(no), 4, -2.0f, 2.0f), t));
      Dev out_wide{Vec(static_cast<size_t>(no))}, dout_wide{Vec(static_cast<size_t>(no))};
      widen_on_device(t, out_ref.get(), out_wide.get(), no, stream_);
      widen_on_device(t, dout16.get(), dout_wide.get(), no, stream_);
      const int64_t ng[3] = {b * h * tq * d, b * h * tk * d, nv};
      for (const bool add : {false, true})
        for (const bool want_dq : {true, false}) {
          SCOPED_TRACE(std::string(add ? "add" : "store") + (want_dq ? "" : ", no dq"));
          std::vector<std::unique_ptr<Dev>> f32;
          std::vector<std::unique_ptr<DeviceArray<uint8_t>>> ref, got;
          for (int k = 0; k < 3; ++k) {
            const auto n = static_cast<size_t>(ng[k]);
            f32.push_back(std::make_unique<Dev>(nan_vec(n)));
            const Bytes before = encode(random_vec(n, 10u + static_cast<uint32_t>(k), -2.0f, 2.0f), t);
            ref.push_back(std::make_unique<DeviceArray<uint8_t>>(before));
            got.push_back(std::make_unique<DeviceArray<uint8_t>>(before));
          }
          gpu::sdpa_bwd(g, qf.get(), kf.get(), vf.get() + dv, out_wide.get(), lse_ref.get(), dout_wide.get(),
                        want_dq ? f32[0]->get() : nullptr, f32[1]->get(), f32[2]->get(), false, false, false, nullptr,
                        stream_);
          for (int k = want_dq ? 0 : 1; k < 3; ++k)
            store_like_the_mixed_call(f32[static_cast<size_t>(k)]->get(),
                                      IoOut{ref[static_cast<size_t>(k)]->get(), t, add}, ng[k], true, stream_);
          const IoOut dq = want_dq ? IoOut{got[0]->get(), t, add} : IoOut{};
          gpu::sdpa_bwd_io(g, qi, ki, vi, IoIn{out_got.get(), t}, lse_got.get(), IoIn{dout16.get(), t}, dq,
                           IoOut{got[1]->get(), t, add}, IoOut{got[2]->get(), t, add}, stream_);
          const char* names[3] = {"dq", "dk", "dv"};
          for (int k = 0; k < 3; ++k)  // dq untouched where not wanted
            EXPECT_EQ(ref[static_cast<size_t>(k)]->fetch(), got[static_cast<size_t>(k)]->fetch()) << names[k];
        }
    }
}

}  // namespace
}  // namespace remat::gpu_testing
