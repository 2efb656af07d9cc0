#include "widgets/views/timeline_downsample.h"

#include <algorithm>

namespace remat {

QList<QPointF> downsample_minmax(const std::vector<uint64_t>& y, int buckets) {
  return downsample_minmax(y, buckets, 0, y.size());
}

QList<QPointF> downsample_minmax(const std::vector<uint64_t>& y, int buckets, std::size_t from, std::size_t to) {
  QList<QPointF> out;
  to = std::min(to, y.size());
  if (from >= to) return out;
  buckets = std::max(buckets, 1);
  const std::size_t n = to - from;
  auto at = [&](std::size_t i) { return QPointF(double(i), double(y[i])); };
  if (from > 0) out.append(at(from - 1));
  if (n <= static_cast<std::size_t>(buckets) * 2) {
    for (std::size_t i = from; i < to; ++i) out.append(at(i));
  } else {
    out.reserve(buckets * 2 + 2);
    for (int b = 0; b < buckets; ++b) {
      const std::size_t lo = from + n * std::size_t(b) / std::size_t(buckets);
      const std::size_t hi = from + n * std::size_t(b + 1) / std::size_t(buckets);
      if (lo >= hi) continue;
      std::size_t mn = lo, mx = lo;
      for (std::size_t i = lo; i < hi; ++i) {
        if (y[i] < y[mn]) mn = i;
        if (y[i] > y[mx]) mx = i;
      }
      const std::size_t a = std::min(mn, mx), c = std::max(mn, mx);
      out.append(at(a));
      if (c != a) out.append(at(c));
    }
  }
  if (to < y.size()) out.append(at(to));
  return out;
}

}  // namespace remat
