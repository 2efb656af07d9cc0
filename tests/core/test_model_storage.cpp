// How a model is stored: ops in one array with their short lists inline
// (SmallVec), consumers in compressed rows, and Model::graph() as a Boost.Graph
// view over them (no copy). The view must be a graph Boost's algorithms accept
// and agree edge for edge with the ops' inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/graph/graph_concepts.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <set>
#include <sstream>
#include <tuple>

#include "core/io/graphviz.h"
#include "core/model/model_graph.h"
#include "core/model/presets.h"
#include "core/base/small_vec.h"

using namespace remat;

BOOST_CONCEPT_ASSERT((boost::VertexListGraphConcept<ModelGraph>));
BOOST_CONCEPT_ASSERT((boost::EdgeListGraphConcept<ModelGraph>));
BOOST_CONCEPT_ASSERT((boost::IncidenceGraphConcept<ModelGraph>));
BOOST_CONCEPT_ASSERT((boost::BidirectionalGraphConcept<ModelGraph>));

namespace {

// x; r = ReLU(x); s = Add(r, r); t = Add(x, s); loss(t): a repeated input
// (two parallel edges r -> s) and a skip edge.
Model with_repeated_input() {
  Model m;
  m.name = "repeated";
  auto op = [](OpKind k, OpIds in, Shape shape = {}) {
    Op o;
    o.kind = k;
    o.inputs = in;
    o.shape = shape;
    return o;
  };
  m.add(op(OpKind::Input, {}, {2, 4}));
  m.add(op(OpKind::ReLU, {0}));
  m.add(op(OpKind::Add, {1, 1}));
  m.add(op(OpKind::Add, {0, 2}));
  m.add(op(OpKind::MSELoss, {3}));
  m.finalize();
  return m;
}

using Edge = std::tuple<int, int, int>;  // from, to, slot

std::vector<Edge> edges_from_inputs(const Model& m) {
  std::vector<Edge> out;
  for (int v = 0; v < m.size(); ++v)
    for (std::size_t k = 0; k < m.op(v).inputs.size(); ++k) out.emplace_back(m.op(v).inputs[k], v, static_cast<int>(k));
  return out;
}

}  // namespace

TEST(ModelStorage, ConsumersAreEachReaderOnceInOrder) {
  const Model m = with_repeated_input();
  auto list = [&](int v) {
    const auto c = m.consumers(v);
    return std::vector<int>(c.begin(), c.end());
  };
  EXPECT_EQ(list(0), (std::vector<int>{1, 3}));
  EXPECT_EQ(list(1), (std::vector<int>{2}));  // Add(r, r) reads r twice, consumes it once
  EXPECT_EQ(list(2), (std::vector<int>{3}));
  EXPECT_EQ(list(3), (std::vector<int>{4}));
  EXPECT_TRUE(m.consumers(4).empty());
  EXPECT_FALSE(m.is_sequential());
  EXPECT_TRUE(make_preset("mlp:3:8:2").is_sequential());
}

TEST(ModelStorage, SumsTakenWhileAddingEqualTheLoops) {
  for (const char* spec : {"chain:16:8", "mlp:4:16:2", "transformer:2:8:4:1"}) {
    const Model m = make_preset(spec);
    uint64_t params = 0;
    double fwd = 0, bwd = 0;
    bool uniform = true;
    for (int v = 0; v < m.size(); ++v) {
      params += m.op(v).param_bytes;
      if (v > 0) fwd += m.op(v).fwd_flops, bwd += m.op(v).bwd_flops;
      uniform = uniform && m.op(v).bytes == m.op(0).bytes;
    }
    EXPECT_EQ(m.param_bytes(), params) << spec;
    EXPECT_EQ(m.forward_flops(), fwd) << spec;  // same order of additions: bit-identical
    EXPECT_EQ(m.backward_flops(), bwd) << spec;
    EXPECT_EQ(m.uniform_bytes(), uniform ? m.op(0).bytes : 0u) << spec;
  }
}

TEST(ModelGraph, EdgesAreTheInputSlots) {
  for (const Model& m : {with_repeated_input(), make_preset("transformer:2:8:2:1")}) {
    const ModelGraph g = m.graph();
    const auto expected = edges_from_inputs(m);
    std::vector<Edge> listed;
    for (auto [it, end] = edges(g); it != end; ++it) listed.emplace_back(source(*it, g), target(*it, g), it->slot);
    EXPECT_EQ(listed, expected) << m.name;
    EXPECT_EQ(num_edges(g), expected.size());
    EXPECT_EQ(num_vertices(g), static_cast<std::size_t>(m.size()));
    for (int v = 0; v < m.size(); ++v) {
      std::vector<Edge> in, out, in_expected, out_expected;
      for (auto [it, end] = in_edges(v, g); it != end; ++it) in.emplace_back(source(*it, g), target(*it, g), it->slot);
      for (auto [it, end] = out_edges(v, g); it != end; ++it) out.emplace_back(source(*it, g), target(*it, g), it->slot);
      for (const Edge& e : expected) {
        if (std::get<1>(e) == v) in_expected.push_back(e);
        if (std::get<0>(e) == v) out_expected.push_back(e);
      }
      EXPECT_EQ(in, in_expected) << m.name << " op " << v;
      EXPECT_EQ(out, out_expected) << m.name << " op " << v;  // consumers in order, then slots
      EXPECT_EQ(in_degree(v, g), in_expected.size());
      EXPECT_EQ(out_degree(v, g), out_expected.size());
    }
  }
  const Model m = with_repeated_input();
  EXPECT_EQ(out_degree(1, m.graph()), 2u);  // the two parallel edges r -> s
}

TEST(ModelGraph, BoostAlgorithmsRunOnIt) {
  const Model m = make_preset("transformer:2:8:2:1");
  std::vector<int> order;
  const ModelGraph g = m.graph();
  boost::topological_sort(g, std::back_inserter(order));  // reverse topological order
  ASSERT_EQ(order.size(), static_cast<std::size_t>(m.size()));
  std::vector<int> position(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) position[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
  for (const auto& [from, to, slot] : edges_from_inputs(m))
    EXPECT_GT(position[static_cast<std::size_t>(from)], position[static_cast<std::size_t>(to)]) << from << "->" << to;
}

TEST(ModelGraph, GraphvizHasAnEdgePerInput) {
  const Model m = with_repeated_input();
  std::ostringstream dot;
  write_model_dot(dot, m);
  const std::string s = dot.str();
  auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("->"), 6);
  EXPECT_EQ(count("1->2"), 2);
  EXPECT_EQ(count("0->3"), 1);
}

TEST(SmallVec, StaysInPlaceUpToNThenMovesToTheHeap) {
  SmallVec<int, 2> v;
  EXPECT_TRUE(v.empty());
  v.push_back(1);
  v.push_back(2);
  EXPECT_EQ(v.capacity(), 2u);  // in place
  v.push_back(3);
  EXPECT_GT(v.capacity(), 2u);
  EXPECT_EQ(v, (std::vector<int>{1, 2, 3}));
  v.insert(v.begin() + 1, 9);
  EXPECT_EQ(v, (std::vector<int>{1, 9, 2, 3}));
  v.erase(v.begin(), v.begin() + 2);
  EXPECT_EQ(v, (std::vector<int>{2, 3}));
  v.push_back(v.front());  // an element of the vector itself, across a reallocation
  EXPECT_EQ(v, (std::vector<int>{2, 3, 2}));
  EXPECT_THROW((void)v.at(3), std::out_of_range);
}

TEST(SmallVec, CopiesMovesAndConverts) {
  const SmallVec<int64_t, 2> inline_one{4, 5}, heap_one{1, 2, 3, 4};
  for (const auto& src : {inline_one, heap_one}) {
    SmallVec<int64_t, 2> copy = src;
    EXPECT_EQ(copy, src);
    SmallVec<int64_t, 2> moved = std::move(copy);
    EXPECT_EQ(moved, src);
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from SmallVec is empty
    copy = moved;
    EXPECT_EQ(copy, src);
    const std::vector<int64_t> as_vector = src;
    EXPECT_EQ((SmallVec<int64_t, 2>(as_vector)), src);
    const std::span<const int64_t> as_span = src;
    EXPECT_TRUE(std::equal(as_span.begin(), as_span.end(), src.begin(), src.end()));
  }
  EXPECT_LT(inline_one, (SmallVec<int64_t, 2>{4, 6}));
  EXPECT_LT(heap_one, inline_one);
}
