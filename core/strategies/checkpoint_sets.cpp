#include "core/strategies/checkpoint_sets.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/biconnected_components.hpp>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/model.h"

namespace remat {

bool is_chain(const Model& model) {
  for (int v = 1; v < model.size(); ++v) {
    const auto& in = model.op(v).inputs;
    if (in.size() != 1 || in[0] != v - 1) return false;
    if (model.consumers(v - 1).size() != 1) return false;
  }
  return true;
}

std::vector<int> every_k_checkpoints(const Model& model, int k) {
  std::vector<int> c;
  for (int v = k; v < model.loss(); v += k) c.push_back(v);
  return c;
}

int sqrt_interval(const Model& model) {
  const int n = model.loss();  // ops after the input
  return std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
}

// The model's graph is directed (bidirectionalS); articulation_points needs an
// undirected one, so its edges are copied into an undirected view.
std::vector<int> articulation_candidates(const Model& m) {
  using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  const Model::Graph& g = m.graph();
  Undirected u(boost::num_vertices(g));
  for (auto [e, end] = boost::edges(g); e != end; ++e) boost::add_edge(boost::source(*e, g), boost::target(*e, g), u);
  std::vector<std::size_t> points;
  boost::articulation_points(u, std::back_inserter(points));
  std::vector<int> out;
  for (std::size_t p : points) {
    const int v = static_cast<int>(p);
    if (v > 0 && v < m.loss()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> auto_checkpoints(const Model& m) {
  const int k = sqrt_interval(m);
  std::vector<int> picks;
  int last = 0;
  for (int v : articulation_candidates(m)) {
    if (v - last >= k) {
      picks.push_back(v);
      last = v;
    }
  }
  return picks;
}

namespace {

bool cheap(OpKind k) {
  switch (k) {
    case OpKind::ReLU: case OpKind::GELU: case OpKind::Tanh: case OpKind::LayerNorm:
    case OpKind::Add: case OpKind::Dropout:
      return true;
    default:  // Linear, Dense, losses, and Generic ops whose cost we do not trust
      return false;
  }
}

}  // namespace

// Without the branch points one segment's recompute would run back along
// every residual Add to the input.
std::vector<int> selective_checkpoints(const Model& m) {
  std::vector<int> keep;
  for (int v = 1; v < m.loss(); ++v) {
    if (!cheap(m.op(v).kind) || m.consumers(v).size() > 1) keep.push_back(v);
  }
  return keep;
}

Schedule checkpoint_schedule(const Model& model, std::vector<char> checkpoint,
                             const std::vector<int>& phase_start, std::string strategy) {
  const int n = model.size();
  checkpoint.resize(static_cast<std::size_t>(n), 0);
  checkpoint[0] = 1;
  // Keeping a view keeps its storage: the aliases down to the owner are kept
  // too (free), so a recompute never makes a second copy of a held storage.
  for (int v = n; v-- > 1;) {
    if (checkpoint[static_cast<std::size_t>(v)] && model.op(v).view)
      checkpoint[static_cast<std::size_t>(model.op(v).inputs[0])] = 1;
  }
  std::vector<Instr> code;
  code.reserve(static_cast<std::size_t>(3 * n));
  for (int v = 1; v < n; ++v) code.push_back({InstrKind::Fwd, v});

  std::vector<int> stamp(static_cast<std::size_t>(n), -1);  // phase that last recomputed A(v)
  std::vector<int> stack, needed;
  for (int p = static_cast<int>(phase_start.size()) - 1; p >= 0; --p) {
    const int first = phase_start[static_cast<std::size_t>(p)];
    const int last = p + 1 < static_cast<int>(phase_start.size()) ? phase_start[static_cast<std::size_t>(p) + 1] - 1 : n - 1;
    const bool final_phase = p + 1 == static_cast<int>(phase_start.size());
    if (!final_phase) {
      auto available = [&](int t) { return checkpoint[static_cast<std::size_t>(t)] || stamp[static_cast<std::size_t>(t)] == p; };
      needed.clear();
      auto need = [&](int t) {
        stamp[static_cast<std::size_t>(t)] = p;  // mark now; emitted below in order
        needed.push_back(t);
        stack.push_back(t);
      };
      for (int v = first; v <= last; ++v) {
        for (int t : model.op(v).saved) {
          if (!available(t)) need(t);
        }
        // aux(v) comes only from a fwd v: kept from the forward pass for a
        // checkpoint, otherwise made again by recomputing v in this phase.
        if (model.op(v).aux_bytes > 0 && !available(v)) need(v);
      }
      while (!stack.empty()) {  // iterative: recompute chains can be a million deep
        const int t = stack.back();
        stack.pop_back();
        for (int u : model.op(t).inputs) {
          if (!available(u)) need(u);
        }
      }
      std::sort(needed.begin(), needed.end());
      for (int t : needed) code.push_back({InstrKind::Fwd, t});
    }
    for (int v = last; v >= first; --v) code.push_back({InstrKind::Bwd, v});
  }
  return with_frees(model, std::move(code), std::move(strategy));
}

Schedule segment_schedule(const Model& model, const std::vector<int>& checkpoints, std::string strategy) {
  const int n = model.size();
  std::vector<char> keep(static_cast<std::size_t>(n), 0);
  for (int c : checkpoints) keep[static_cast<std::size_t>(c)] = 1;
  std::vector<int> starts{1};
  for (int v = 1; v < n - 1; ++v) {
    if (keep[static_cast<std::size_t>(v)]) starts.push_back(v + 1);
  }
  return checkpoint_schedule(model, std::move(keep), starts, std::move(strategy));
}

}  // namespace remat
