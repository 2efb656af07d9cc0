#include "core/strategies/repeated_blocks.h"

#include <algorithm>
#include <map>

#include "core/base/errors.h"
#include "core/model/model.h"

namespace remat {
std::string block_text(const Model& m, int first, int last) {
  const int base = first - 1;
  std::string s;
  auto num = [&s](double x) {
    s += std::to_string(x);
    s += ',';
  };
  for (int v = first; v <= last; ++v) {
    const Op& o = m.op(v);
    num(static_cast<double>(o.kind));
    num(static_cast<double>(o.dtype));
    num(o.view);
    num(static_cast<double>(o.bytes));
    num(static_cast<double>(o.aux_bytes));
    num(static_cast<double>(o.param_bytes));
    num(o.fwd_flops);
    num(o.bwd_flops);
    num(m.storage(v) - base);
    s += 'i';
    for (int u : o.inputs) num(u - base);
    s += 's';
    for (int u : o.saved) num(u - base);
    s += 'h';
    for (int64_t d : o.shape) num(static_cast<double>(d));
    s += ';';
  }
  return s;
}

std::vector<int> model_cuts(const Model& m) {
  // c is a cut when the latest reader of every op before c is at most c.
  std::vector<int> cuts;
  int reach = 0;  // the latest op reading anything made before the current op
  for (int c = 0; c < m.loss(); ++c) {
    int last_read = c;
    for (int w : m.consumers(c)) last_read = std::max(last_read, w);
    if (c > 0 && reach <= c) cuts.push_back(c);
    reach = std::max(reach, last_read);
  }
  return cuts;
}

std::vector<Block> block_chain(const Model& m) {
  std::vector<int> cuts = model_cuts(m);
  // Segments (cut before, cut]; the last ends at the op before the loss.
  std::vector<std::pair<int, int>> seg;
  int prev = 0;
  for (int c : cuts) {
    seg.emplace_back(prev + 1, c);
    prev = c;
  }
  if (prev + 1 <= m.loss() - 1) seg.emplace_back(prev + 1, m.loss() - 1);
  std::map<std::string, int> ids;
  std::vector<int> sig;
  for (auto [a, b] : seg) sig.push_back(ids.emplace(block_text(m, a, b), static_cast<int>(ids.size())).first->second);
  const int n = static_cast<int>(seg.size());
  auto equal = [&](int i, int j, int p) {
    for (int k = 0; k < p; ++k)
      if (sig[static_cast<std::size_t>(i + k)] != sig[static_cast<std::size_t>(j + k)]) return false;
    return true;
  };
  std::vector<Block> out;
  std::map<std::string, int> shapes;
  auto add = [&](int first_seg, int last_seg, bool repeated) {
    Block b;
    b.first = seg[static_cast<std::size_t>(first_seg)].first;
    b.last = seg[static_cast<std::size_t>(last_seg)].second;
    b.shape = shapes.emplace(block_text(m, b.first, b.last), static_cast<int>(shapes.size())).first->second;
    b.repeated = repeated;
    out.push_back(b);
  };
  constexpr int kMaxPeriod = 16;
  for (int i = 0; i < n;) {
    // The period covering the most segments from i by repeats (r >= 2); the
    // shorter on a tie (a run of single segments is not read as pairs).
    int best_p = 0, best_r = 0;
    for (int p = 1; p <= kMaxPeriod && i + 2 * p <= n; ++p) {
      int r = 1;
      while (i + (r + 1) * p <= n && equal(i, i + r * p, p)) ++r;
      if (r >= 2 && r * p > best_r * best_p) best_p = p, best_r = r;
    }
    if (!best_r) {
      add(i, i, false);
      ++i;
      continue;
    }
    for (int k = 0; k < best_r; ++k) add(i + k * best_p, i + (k + 1) * best_p - 1, true);
    i += best_r * best_p;
  }
  return out;
}

std::vector<std::vector<int>> attention_cores(const Model& m) {
  std::vector<std::vector<int>> cores;
  auto only_reader = [&](int v) { return m.consumers(v).size() == 1 ? m.consumers(v)[0] : -1; };
  for (int s = 1; s < m.loss(); ++s) {
    if (m.op(s).kind != OpKind::Softmax) continue;
    std::vector<int> core{s};
    int x = m.op(s).inputs[0];
    auto elementwise = [&](int v) {
      const OpKind k = m.op(v).kind;
      return k == OpKind::MulConst || k == OpKind::DivConst || k == OpKind::MaskedFill ||
             (k == OpKind::AddConst && !m.op(v).attrs->learned);
    };
    while (x > 0 && elementwise(x) && only_reader(x) >= 0) {
      core.push_back(x);
      x = m.op(x).inputs[0];
    }
    if (x <= 0 || m.op(x).kind != OpKind::MatMul || only_reader(x) < 0) continue;
    core.push_back(x);
    int out = s;
    if (const int d = only_reader(s); d >= 0 && m.op(d).kind == OpKind::Dropout) {
      core.push_back(d);
      out = d;
    }
    const int pv = only_reader(out);
    if (pv < 0 || m.op(pv).kind != OpKind::MatMul) continue;
    std::sort(core.begin(), core.end());
    cores.push_back(core);
  }
  return cores;
}

std::vector<int> attention_core_checkpoints(const Model& m, int count) {
  auto cores = attention_cores(m);
  if (count > 0 && static_cast<std::size_t>(count) < cores.size()) cores.resize(static_cast<std::size_t>(count));
  std::vector<char> in_core(static_cast<std::size_t>(m.size()), 0);
  for (const auto& c : cores)
    for (int v : c) in_core[static_cast<std::size_t>(v)] = 1;
  std::vector<int> ckpt;
  for (int v = 1; v < m.loss(); ++v)
    if (!in_core[static_cast<std::size_t>(v)]) ckpt.push_back(v);
  return ckpt;
}

std::string attention_core_absent(const Model& m) {
  if (!attention_cores(m).empty()) return "";
  return "model '" + m.name +
         "' has no attention core (a MatMul, then scale or mask, a Softmax and a Dropout, read by a MatMul): "
         "nothing is recomputed (as store-all)";
}

std::string blocks_absent(const Model& m) {
  for (const Block& b : block_chain(m))
    if (b.first < b.last) return "";
  return "model '" + m.name +
         "' has no block of more than one op between two cuts (every op is its own block, as in a chain): "
         "nothing is recomputed (as store-all)";
}

std::vector<int> block_input_checkpoints(const Model& m, int every) {
  std::vector<char> inside(static_cast<std::size_t>(m.size()), 0);
  int multi = 0;  // blocks of more than one op so far
  for (const Block& b : block_chain(m)) {
    if (b.first == b.last) continue;
    for (int v = b.first; v < b.last; ++v) inside[static_cast<std::size_t>(v)] = 1;
    // Its output goes too, but for every K-th block's.
    if (++multi % std::max(1, every) != 0) inside[static_cast<std::size_t>(b.last)] = 1;
  }
  std::vector<int> ckpt;
  for (int v = 1; v < m.loss(); ++v)
    if (!inside[static_cast<std::size_t>(v)]) ckpt.push_back(v);
  return ckpt;
}

}  // namespace remat
