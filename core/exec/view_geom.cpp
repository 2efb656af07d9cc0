#include "core/exec/view_geom.h"

namespace remat {
namespace {

bool fits(const ViewMap& m) { return m.shape.size() <= static_cast<std::size_t>(cpu::PwGeom::kMaxRank); }

// One operand read through m's strides, every dimension its own (kept).
cpu::PwGeom through(const ViewMap& m, pw::Fn fn) {
  cpu::PwGeom g;
  g.rank = static_cast<int>(m.shape.size());
  g.fn = fn;
  g.arity = 1;
  for (int d = 0; d < g.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    g.shape[d] = m.shape[i];
    g.dims[0][d] = m.shape[i];
    g.stride[0][d] = m.stride[i];
  }
  return g;
}

}  // namespace

bool copy_geom(const ViewMap& m, cpu::PwGeom& g) {
  if (!fits(m)) return false;
  g = through(m, pw::Fn::Cast);
  return true;
}

bool add_back_geom(const ViewMap& m, cpu::PwGeom& g) {
  if (!fits(m)) return false;
  for (std::size_t d = 0; d < m.shape.size(); ++d)
    if (m.stride[d] == 0 && m.shape[d] > 1) return false;
  g = through(m, pw::Fn::Add);
  g.arity = 2;
  int64_t at = 1;  // dy: row-major over the view
  for (int d = g.rank; d-- > 0;) {
    g.dims[1][d] = g.shape[d];
    g.stride[1][d] = at;
    at *= g.shape[d];
  }
  g.out_strided = true;
  for (int d = 0; d < g.rank; ++d) g.out_stride[d] = g.stride[0][d];
  return true;
}

bool expand_sum_geom(const ViewMap& m, cpu::PwGeom& g) {
  if (!fits(m) || m.base != 0) return false;
  int64_t at = 1;
  for (std::size_t d = m.shape.size(); d-- > 0;) {
    if (m.stride[d] == 0 || m.shape[d] == 1) continue;
    if (m.stride[d] != at) return false;
    at *= m.shape[d];
  }
  g = through(m, pw::Fn::Cast);
  for (int d = 0; d < g.rank; ++d)
    if (g.stride[0][d] == 0) g.dims[0][d] = 1;
  return true;
}

}  // namespace remat
