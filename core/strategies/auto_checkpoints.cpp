// Automatic checkpoints for DAGs, as in the original TensorFlow implementation
// (gradient-checkpointing's "memory" mode): the articulation points of the
// undirected graph are the places where one tensor separates the past from the
// future, so checkpointing them bounds every segment's recompute.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/biconnected_components.hpp>
#include <algorithm>
#include <iterator>

#include "core/checkpoint_schedule.h"
#include "core/model.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

class Auto final : public Strategy {
 public:
  std::string name() const override { return "auto"; }
  Schedule schedule(const Model& m) const override { return segment_schedule(m, auto_checkpoints(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, auto_checkpoints(m), limit);
  }
};

}  // namespace

std::vector<int> articulation_candidates(const Model& m) {
  using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Undirected g(static_cast<std::size_t>(m.size()));
  for (int v = 1; v < m.size(); ++v) {
    for (int u : m.op(v).inputs) boost::add_edge(static_cast<std::size_t>(u), static_cast<std::size_t>(v), g);
  }
  std::vector<std::size_t> points;
  boost::articulation_points(g, std::back_inserter(points));
  std::vector<int> out;
  for (std::size_t p : points) {
    const int v = static_cast<int>(p);
    if (v > 0 && v < m.loss()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Greedy: the first candidate at least ceil(sqrt(n)) ops after the previous
// pick (on a chain every op is a candidate, so this is exactly `sqrt`).
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

std::unique_ptr<Strategy> make_auto() { return std::make_unique<Auto>(); }

}  // namespace remat
