// kernel_probe DIR: runs the CPU kernels on the cases kernels_vs_torch.py
// describes in DIR/manifest.json and writes their results beside them, so
// that the script can hold every output and gradient against PyTorch.
//
// A case is {"name", "op", ...its sizes}. Inputs are raw little-endian files
// DIR/<name>.<tensor>.bin (float32; int32 indices, uint8 masks); results go to
// DIR/<name>.out.<tensor>.bin (float32; int64 max-pool indices). Gradients are
// computed with accumulate == false into NaN-filled buffers and parameter
// gradients into zeroed ones, as the executor does.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

using nlohmann::json;

class CaseIo {
 public:
  CaseIo(std::string dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {}

  template <class T>
  std::vector<T> read(const std::string& tensor, int64_t count) const {
    const std::string path = dir_ + "/" + name_ + "." + tensor + ".bin";
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw std::runtime_error("cannot open " + path);
    const auto bytes = static_cast<int64_t>(in.tellg());
    if (bytes != count * static_cast<int64_t>(sizeof(T))) {
      throw std::runtime_error(path + " holds " + std::to_string(bytes) + " bytes, expected " +
                               std::to_string(count * sizeof(T)));
    }
    std::vector<T> v(count);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(v.data()), bytes);
    return v;
  }
  std::vector<float> floats(const std::string& tensor, int64_t count) const { return read<float>(tensor, count); }

  template <class T>
  void write(const std::string& tensor, const std::vector<T>& v) const {
    const std::string path = dir_ + "/" + name_ + ".out." + tensor + ".bin";
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    if (!out) throw std::runtime_error("cannot write " + path);
  }

 private:
  std::string dir_, name_;
};

std::vector<float> nans(int64_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

void run_conv2d(const json& c, const CaseIo& io) {
  ConvGeom g;
  g.n = c["n"], g.c = c["c"], g.h = c["h"], g.w = c["w"], g.k = c["k"], g.r = c["r"], g.s = c["s"];
  g.stride_h = c["stride_h"], g.stride_w = c["stride_w"], g.pad_h = c["pad_h"], g.pad_w = c["pad_w"];
  g.dil_h = c["dil_h"], g.dil_w = c["dil_w"], g.groups = c["groups"];
  check_conv(g);
  const bool bias = c["bias"];
  const int64_t ysize = g.n * g.k * g.oh() * g.ow();
  const auto x = io.floats("x", g.n * g.c * g.h * g.w), W = io.floats("W", g.weight_numel());
  const auto b = bias ? io.floats("b", g.k) : std::vector<float>();
  const auto dy = io.floats("dy", ysize);
  std::vector<float> y(ysize);
  auto scratch = nans(conv2d_scratch_floats(g));  // the kernels must not read what they did not write
  conv2d_fwd(g, x.data(), W.data(), bias ? b.data() : nullptr, y.data(), scratch.data());
  auto dx = nans(x.size());
  std::vector<float> dW(W.size(), 0.0f), db(g.k, 0.0f);
  conv2d_bwd(g, x.data(), W.data(), dy.data(), dx.data(), dW.data(), bias ? db.data() : nullptr, false,
             scratch.data());
  io.write("y", y);
  io.write("dx", dx);
  io.write("dW", dW);
  if (bias) io.write("db", db);
}

void run_batchnorm(const json& c, const CaseIo& io) {
  const int64_t n = c["n"], ch = c["c"], hw = c["hw"];
  const float eps = c["eps"], momentum = c["momentum"];
  const auto x = io.floats("x", n * ch * hw), dy = io.floats("dy", n * ch * hw);
  const auto gamma = io.floats("gamma", ch), beta = io.floats("beta", ch);
  auto rmean = io.floats("running_mean", ch), rvar = io.floats("running_var", ch);
  std::vector<float> y(x.size()), mean(ch), invstd(ch);
  batchnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(), rmean.data(), rvar.data(),
                n, ch, hw, eps, momentum);
  auto dx = nans(x.size());
  std::vector<float> dgamma(ch, 0.0f), dbeta(ch, 0.0f);
  batchnorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), invstd.data(), dx.data(), dgamma.data(),
                dbeta.data(), n, ch, hw, false);
  io.write("y", y);
  io.write("save_mean", mean);
  io.write("save_invstd", invstd);
  io.write("running_mean", rmean);
  io.write("running_var", rvar);
  io.write("dx", dx);
  io.write("dgamma", dgamma);
  io.write("dbeta", dbeta);
}

PoolGeom pool_geom(const json& c) {
  PoolGeom g;
  g.n = c["n"], g.c = c["c"], g.h = c["h"], g.w = c["w"], g.kh = c["kh"], g.kw = c["kw"];
  g.stride_h = c["stride_h"], g.stride_w = c["stride_w"], g.pad_h = c["pad_h"], g.pad_w = c["pad_w"];
  g.dil_h = c.value("dil_h", 1), g.dil_w = c.value("dil_w", 1);
  g.ceil_mode = c.value("ceil_mode", false), g.count_include_pad = c.value("count_include_pad", true);
  g.out_h = c.value("out_h", 0), g.out_w = c.value("out_w", 0);
  check_pool(g);
  return g;
}

void run_pool(const json& c, const CaseIo& io, bool max) {
  const PoolGeom g = pool_geom(c);
  const int64_t ysize = g.n * g.c * g.oh() * g.ow();
  const auto x = io.floats("x", g.n * g.c * g.h * g.w), dy = io.floats("dy", ysize);
  std::vector<float> y(ysize);
  auto dx = nans(x.size());
  if (max) {
    std::vector<int64_t> idx(ysize);
    maxpool2d_fwd(g, x.data(), y.data(), idx.data());
    maxpool2d_bwd(g, dy.data(), idx.data(), dx.data(), false);
    io.write("indices", idx);
  } else {
    avgpool2d_fwd(g, x.data(), y.data());
    avgpool2d_bwd(g, dy.data(), dx.data(), false);
  }
  io.write("y", y);
  io.write("dx", dx);
}

void run_global_avgpool(const json& c, const CaseIo& io) {
  const int64_t nc = c["nc"], hw = c["hw"];
  const auto x = io.floats("x", nc * hw), dy = io.floats("dy", nc);
  std::vector<float> y(nc);
  auto dx = nans(x.size());
  global_avgpool_fwd(x.data(), y.data(), nc, hw);
  global_avgpool_bwd(dy.data(), dx.data(), nc, hw, false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_bmm(const json& c, const CaseIo& io) {
  const int64_t batch = c["batch"], m = c["m"], n = c["n"], k = c["k"];
  const bool ta = c["trans_a"], tb = c["trans_b"];
  const auto a = io.floats("a", batch * m * k), b = io.floats("b", batch * k * n);
  const auto dc = io.floats("dc", batch * m * n);
  auto out = nans(batch * m * n), da = nans(a.size()), db = nans(b.size());
  bmm(a.data(), b.data(), out.data(), batch, m, n, k, ta, tb, false);
  bmm_bwd(a.data(), b.data(), dc.data(), da.data(), db.data(), batch, m, n, k, ta, tb, false, false);
  io.write("c", out);
  io.write("da", da);
  io.write("db", db);
}

void run_softmax(const json& c, const CaseIo& io) {
  const int64_t rows = c["rows"], cols = c["cols"];
  const auto x = io.floats("x", rows * cols), dy = io.floats("dy", rows * cols);
  std::vector<float> y(x.size());
  auto dx = nans(x.size());
  softmax_fwd(x.data(), y.data(), rows, cols);
  softmax_bwd(y.data(), dy.data(), dx.data(), rows, cols, false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_masked_fill(const json& c, const CaseIo& io) {
  const int64_t n = c["numel"], mask_n = c["mask_n"];
  const float value = c["value"] == "-inf" ? -std::numeric_limits<float>::infinity() : c["value"].get<float>();
  const auto x = io.floats("x", n), dy = io.floats("dy", n);
  const auto mask = io.read<uint8_t>("mask", mask_n);
  std::vector<float> y(n);
  auto dx = nans(n);
  masked_fill_fwd(x.data(), mask.data(), y.data(), n, mask_n, value);
  masked_fill_bwd(dy.data(), mask.data(), dx.data(), n, mask_n, false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_scale(const json& c, const CaseIo& io) {
  const int64_t n = c["numel"];
  const float alpha = c["alpha"];
  const auto x = io.floats("x", n), dy = io.floats("dy", n);
  std::vector<float> y(n);
  auto dx = nans(n);
  scale_fwd(x.data(), y.data(), n, alpha);
  scale_bwd(dy.data(), dx.data(), n, alpha, false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_act(const json& c, const CaseIo& io) {
  const int64_t n = c["numel"];
  const std::string name = c["act"];
  const Act act = name == "relu"      ? Act::ReLU
                  : name == "tanh"    ? Act::Tanh
                  : name == "gelu"    ? Act::GELU
                  : name == "sigmoid" ? Act::Sigmoid
                  : name == "silu"    ? Act::SiLU
                                      : throw std::runtime_error("unknown act " + name);
  const auto x = io.floats("x", n), dy = io.floats("dy", n);
  std::vector<float> y(n);
  auto dx = nans(n);
  act_fwd(act, x.data(), y.data(), n);
  const bool reads_y = act == Act::ReLU || act == Act::Tanh || act == Act::Sigmoid;
  act_bwd(act, reads_y ? y.data() : x.data(), dy.data(), dx.data(), n, false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_concat(const json& c, const CaseIo& io) {
  const int64_t outer = c["outer"], inner = c["inner"];
  const std::vector<int64_t> widths = c["widths"];
  const auto count = static_cast<int64_t>(widths.size());
  int64_t total = 0;
  std::vector<std::vector<float>> xs, dxs;
  for (int64_t i = 0; i < count; ++i) {
    xs.push_back(io.floats("x" + std::to_string(i), outer * widths[i] * inner));
    dxs.push_back(nans(outer * widths[i] * inner));
    total += widths[i];
  }
  std::vector<const float*> in;
  std::vector<float*> out;
  for (int64_t i = 0; i < count; ++i) in.push_back(xs[i].data()), out.push_back(dxs[i].data());
  const auto dy = io.floats("dy", outer * total * inner);
  std::vector<float> y(dy.size());
  const std::vector<uint8_t> acc(count, 0);
  concat_fwd(in.data(), widths.data(), count, y.data(), outer, inner);
  concat_bwd(dy.data(), out.data(), widths.data(), count, outer, inner, acc.data());
  io.write("y", y);
  for (int64_t i = 0; i < count; ++i) io.write("dx" + std::to_string(i), dxs[i]);
}

// Pad: "shape" (the input's), "before"/"after" per dimension, "mode" 0-3 (PadMode), "value".
void run_pad(const json& c, const CaseIo& io) {
  PadGeom g;
  const std::vector<int64_t> shape = c["shape"], before = c["before"], after = c["after"];
  g.rank = static_cast<int>(shape.size());
  g.mode = static_cast<PadMode>(c["mode"].get<int>());
  g.value = c["value"].get<float>();
  int64_t xn = 1, yn = 1;
  for (int d = 0; d < g.rank; ++d) {
    g.in[d] = shape[d];
    g.before[d] = before[d];
    g.out[d] = shape[d] + before[d] + after[d];
    xn *= g.in[d];
    yn *= g.out[d];
  }
  const auto x = io.floats("x", xn), dy = io.floats("dy", yn);
  std::vector<float> y(yn), dx = nans(xn);
  pad_fwd(g, x.data(), y.data());
  pad_bwd(g, dy.data(), dx.data(), false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_embedding(const json& c, const CaseIo& io) {
  const int64_t n = c["positions"], dim = c["dim"], vocab = c["vocab"];
  const auto table = io.floats("table", vocab * dim), dy = io.floats("dy", n * dim);
  const auto idx = io.read<int32_t>("idx", n);
  std::vector<float> y(n * dim), dtable(table.size(), 0.0f);
  embedding_fwd(table.data(), idx.data(), y.data(), n, dim, vocab);
  embedding_bwd(dy.data(), idx.data(), dtable.data(), n, dim, vocab);
  io.write("y", y);
  io.write("dtable", dtable);
}

// The pointwise family over a (2, 3, 4) output: operand k (x<k>, its own 3-D
// dims, 1 where it broadcasts; operand 0 stored transposed when "transposed")
// and the gradient of each operand but a where's condition.
void run_pointwise(const json& c, const CaseIo& io) {
  PwGeom g;
  const std::string name = c["fn"];
  int fn = 0;
  while (fn < pw::kFnCount && name != pw::kFns[fn].name) ++fn;
  if (fn == pw::kFnCount) throw std::runtime_error("unknown function " + name);
  g.fn = static_cast<pw::Fn>(fn);
  g.rank = 3;
  g.arity = pw::kFns[fn].arity;
  g.p = c["p"], g.q = c["q"];
  const std::vector<int64_t> shape = c["shape"];
  for (int d = 0; d < 3; ++d) g.shape[d] = shape[static_cast<std::size_t>(d)];
  std::vector<std::vector<float>> xs;
  const float* x[3] = {};
  for (int k = 0; k < g.arity; ++k) {
    const std::vector<int64_t> dims = c["dims"][static_cast<std::size_t>(k)];
    const bool t = k == 0 && c["transposed"].get<bool>();
    const int64_t st[3] = {t ? 1 : dims[1] * dims[2], t ? dims[0] : dims[2], t ? dims[0] * dims[1] : 1};
    for (int d = 0; d < 3; ++d) {
      g.dims[k][d] = dims[static_cast<std::size_t>(d)];
      g.stride[k][d] = dims[static_cast<std::size_t>(d)] == 1 ? 0 : st[d];
    }
    xs.push_back(io.floats("x" + std::to_string(k), dims[0] * dims[1] * dims[2]));
  }
  for (int k = 0; k < g.arity; ++k) x[k] = xs[static_cast<std::size_t>(k)].data();
  const auto dy = io.floats("dy", g.numel());
  std::vector<float> y(static_cast<std::size_t>(g.numel()));
  pointwise_fwd(g, x, y.data());
  io.write("y", y);
  for (int k = g.fn == pw::Fn::Where ? 1 : 0; k < g.arity; ++k) {
    auto dx = nans(static_cast<int64_t>(xs[static_cast<std::size_t>(k)].size()));
    pointwise_bwd(g, k, x, y.data(), dy.data(), dx.data(), false);
    io.write("dx" + std::to_string(k), dx);
  }
}

// sum, mean or amax of x (2, 3, 4) over "axes".
void run_reduce(const json& c, const CaseIo& io) {
  ReduceGeom g;
  const std::string name = c["fn"];
  g.fn = name == "sum" ? pw::ReduceFn::Sum : name == "mean" ? pw::ReduceFn::Mean : pw::ReduceFn::Amax;
  g.rank = 3;
  const int64_t shape[3] = {2, 3, 4};
  int64_t out = 1;
  for (int d = 0; d < 3; ++d) {
    g.shape[d] = shape[d];
    g.stride[d] = d == 0 ? 12 : d == 1 ? 4 : 1;
  }
  for (const int64_t a : c["axes"].get<std::vector<int64_t>>()) g.reduced[a] = true;
  for (int d = 0; d < 3; ++d) out *= g.reduced[d] ? 1 : shape[d];
  const auto x = io.floats("x", 24), dy = io.floats("dy", out);
  std::vector<float> y(static_cast<std::size_t>(out));
  reduce_fwd(g, x.data(), y.data());
  auto dx = nans(24);
  reduce_bwd(g, x.data(), y.data(), dy.data(), dx.data(), false);
  io.write("y", y);
  io.write("dx", dx);
}

void run_case(const json& c, const std::string& dir) {
  const CaseIo io(dir, c["name"]);
  const std::string op = c["op"];
  if (op == "conv2d") return run_conv2d(c, io);
  if (op == "batchnorm") return run_batchnorm(c, io);
  if (op == "maxpool2d") return run_pool(c, io, true);
  if (op == "avgpool2d") return run_pool(c, io, false);
  if (op == "global_avgpool") return run_global_avgpool(c, io);
  if (op == "bmm") return run_bmm(c, io);
  if (op == "softmax") return run_softmax(c, io);
  if (op == "masked_fill") return run_masked_fill(c, io);
  if (op == "scale") return run_scale(c, io);
  if (op == "act") return run_act(c, io);
  if (op == "concat") return run_concat(c, io);
  if (op == "embedding") return run_embedding(c, io);
  if (op == "pad") return run_pad(c, io);
  if (op == "pointwise") return run_pointwise(c, io);
  if (op == "reduce") return run_reduce(c, io);
  throw std::runtime_error("unknown op " + op);
}

}  // namespace
}  // namespace remat::cpu

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kernel_probe DIR (DIR/manifest.json lists the cases)\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::ifstream in(dir + "/manifest.json");
    if (!in) throw std::runtime_error("cannot open " + dir + "/manifest.json");
    const auto manifest = nlohmann::json::parse(in);
    for (const auto& c : manifest["cases"]) {
      try {
        remat::cpu::run_case(c, dir);
      } catch (const std::exception& e) {
        throw std::runtime_error("case " + c["name"].get<std::string>() + ": " + e.what());
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "kernel_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
