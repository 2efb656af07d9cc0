// Model::graph(): the model as a Boost.Graph (VertexListGraph, EdgeListGraph,
// IncidenceGraph, BidirectionalGraph, with a vertex_index map) reading the
// model's own arrays. An adjacency_list copy kept four heap blocks per op and
// doubled the memory of a large model; this view keeps nothing. Vertices are
// op ids; an edge is one input slot of an op (Add(x, x) has two edges x -> v).
#pragma once
#include <boost/graph/graph_traits.hpp>
#include <boost/graph/properties.hpp>
#include <boost/iterator/counting_iterator.hpp>
#include <boost/iterator/iterator_facade.hpp>
#include <boost/property_map/property_map.hpp>
#include <cstdint>
#include <utility>

#include "core/model/model.h"

namespace remat {

// Input slot `slot` of op `to` reads op `from`.
struct ModelEdge {
  int from = 0, to = 0, slot = 0;
  bool operator==(const ModelEdge&) const = default;
};

class ModelGraph {
 public:
  explicit ModelGraph(const Model& model) : m_(&model) {}
  const Model& model() const { return *m_; }

  // Edges into v: its input slots in order.
  class InEdgeIterator : public boost::iterator_facade<InEdgeIterator, ModelEdge, std::forward_iterator_tag, ModelEdge> {
   public:
    InEdgeIterator() = default;
    InEdgeIterator(const Model* m, int v, int slot) : m_(m), v_(v), slot_(slot) {}

   private:
    friend class boost::iterator_core_access;
    ModelEdge dereference() const { return {m_->op(v_).inputs[static_cast<std::size_t>(slot_)], v_, slot_}; }
    bool equal(const InEdgeIterator& o) const { return v_ == o.v_ && slot_ == o.slot_; }
    void increment() { ++slot_; }
    const Model* m_ = nullptr;
    int v_ = 0, slot_ = 0;
  };

  // Edges out of u: for each consumer in order, its slots that read u.
  class OutEdgeIterator
      : public boost::iterator_facade<OutEdgeIterator, ModelEdge, std::forward_iterator_tag, ModelEdge> {
   public:
    OutEdgeIterator() = default;
    OutEdgeIterator(const Model* m, int u, std::size_t consumer) : m_(m), u_(u), c_(consumer) { settle(); }

   private:
    friend class boost::iterator_core_access;
    ModelEdge dereference() const { return {u_, consumer(), slot_}; }
    bool equal(const OutEdgeIterator& o) const { return u_ == o.u_ && c_ == o.c_ && slot_ == o.slot_; }
    void increment() {
      ++slot_;
      settle();
    }
    int consumer() const { return m_->consumers(u_)[c_]; }
    // Moves to the next slot reading u, at this consumer or a later one.
    void settle() {
      const auto cs = m_->consumers(u_);
      for (; c_ < cs.size(); ++c_, slot_ = 0) {
        const auto& in = m_->op(cs[c_]).inputs;
        for (; static_cast<std::size_t>(slot_) < in.size(); ++slot_)
          if (in[static_cast<std::size_t>(slot_)] == u_) return;
      }
      slot_ = 0;
    }
    const Model* m_ = nullptr;
    int u_ = 0;
    std::size_t c_ = 0;
    int slot_ = 0;
  };

  // Every edge: ops in order, each op's input slots in order.
  class EdgeIterator : public boost::iterator_facade<EdgeIterator, ModelEdge, std::forward_iterator_tag, ModelEdge> {
   public:
    EdgeIterator() = default;
    EdgeIterator(const Model* m, int v) : m_(m), v_(v) { settle(); }

   private:
    friend class boost::iterator_core_access;
    ModelEdge dereference() const { return {m_->op(v_).inputs[static_cast<std::size_t>(slot_)], v_, slot_}; }
    bool equal(const EdgeIterator& o) const { return v_ == o.v_ && slot_ == o.slot_; }
    void increment() {
      ++slot_;
      settle();
    }
    void settle() {
      while (v_ < m_->size() && static_cast<std::size_t>(slot_) >= m_->op(v_).inputs.size()) {
        ++v_;
        slot_ = 0;
      }
    }
    const Model* m_ = nullptr;
    int v_ = 0, slot_ = 0;
  };

 private:
  const Model* m_;
};

inline ModelGraph Model::graph() const { return ModelGraph(*this); }

}  // namespace remat

namespace boost {

template <>
struct graph_traits<remat::ModelGraph> {
  struct traversal_category : vertex_list_graph_tag, edge_list_graph_tag, bidirectional_graph_tag {};
  using vertex_descriptor = int;
  using edge_descriptor = remat::ModelEdge;
  using directed_category = directed_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  using vertex_iterator = counting_iterator<int>;
  using out_edge_iterator = remat::ModelGraph::OutEdgeIterator;
  using in_edge_iterator = remat::ModelGraph::InEdgeIterator;
  using edge_iterator = remat::ModelGraph::EdgeIterator;
  using adjacency_iterator = void;
  using vertices_size_type = std::size_t;
  using edges_size_type = std::size_t;
  using degree_size_type = std::size_t;
  static int null_vertex() { return -1; }
};

template <>
struct property_map<remat::ModelGraph, vertex_index_t> {
  using type = typed_identity_property_map<int>;
  using const_type = type;
};

}  // namespace boost

namespace remat {

// Boost.Graph's free functions, found by argument-dependent lookup.
inline std::pair<boost::counting_iterator<int>, boost::counting_iterator<int>> vertices(const ModelGraph& g) {
  return {boost::counting_iterator<int>(0), boost::counting_iterator<int>(g.model().size())};
}
inline std::size_t num_vertices(const ModelGraph& g) { return static_cast<std::size_t>(g.model().size()); }
inline int source(const ModelEdge& e, const ModelGraph&) { return e.from; }
inline int target(const ModelEdge& e, const ModelGraph&) { return e.to; }

inline std::pair<ModelGraph::InEdgeIterator, ModelGraph::InEdgeIterator> in_edges(int v, const ModelGraph& g) {
  const auto n = static_cast<int>(g.model().op(v).inputs.size());
  return {ModelGraph::InEdgeIterator(&g.model(), v, 0), ModelGraph::InEdgeIterator(&g.model(), v, n)};
}
inline std::size_t in_degree(int v, const ModelGraph& g) { return g.model().op(v).inputs.size(); }

inline std::pair<ModelGraph::OutEdgeIterator, ModelGraph::OutEdgeIterator> out_edges(int u, const ModelGraph& g) {
  return {ModelGraph::OutEdgeIterator(&g.model(), u, 0),
          ModelGraph::OutEdgeIterator(&g.model(), u, g.model().consumers(u).size())};
}
inline std::size_t out_degree(int u, const ModelGraph& g) {
  std::size_t d = 0;
  for (int w : g.model().consumers(u))
    for (int x : g.model().op(w).inputs) d += x == u;
  return d;
}
inline std::size_t degree(int v, const ModelGraph& g) { return in_degree(v, g) + out_degree(v, g); }

inline std::pair<ModelGraph::EdgeIterator, ModelGraph::EdgeIterator> edges(const ModelGraph& g) {
  return {ModelGraph::EdgeIterator(&g.model(), 0), ModelGraph::EdgeIterator(&g.model(), g.model().size())};
}
inline std::size_t num_edges(const ModelGraph& g) {
  std::size_t e = 0;
  for (int v = 0; v < g.model().size(); ++v) e += g.model().op(v).inputs.size();
  return e;
}

inline boost::typed_identity_property_map<int> get(boost::vertex_index_t, const ModelGraph&) { return {}; }
inline int get(boost::vertex_index_t, const ModelGraph&, int v) { return v; }

}  // namespace remat
