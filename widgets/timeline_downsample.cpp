#include "widgets/timeline_downsample.h"

#include <algorithm>

namespace remat {

QList<QPointF> downsample_minmax(const std::vector<uint64_t>& y, int buckets) {
  QList<QPointF> out;
  const std::size_t n = y.size();
  buckets = std::max(buckets, 1);
  if (n <= static_cast<std::size_t>(buckets) * 2) {
    out.reserve(static_cast<qsizetype>(n));
    for (std::size_t i = 0; i < n; ++i) out.append(QPointF(double(i), double(y[i])));
    return out;
  }
  out.reserve(buckets * 2);
  for (int b = 0; b < buckets; ++b) {
    const std::size_t lo = n * std::size_t(b) / std::size_t(buckets);
    const std::size_t hi = n * std::size_t(b + 1) / std::size_t(buckets);
    if (lo >= hi) continue;
    std::size_t mn = lo, mx = lo;
    for (std::size_t i = lo; i < hi; ++i) {
      if (y[i] < y[mn]) mn = i;
      if (y[i] > y[mx]) mx = i;
    }
    const std::size_t a = std::min(mn, mx), c = std::max(mn, mx);
    out.append(QPointF(double(a), double(y[a])));
    if (c != a) out.append(QPointF(double(c), double(y[c])));
  }
  return out;
}

}  // namespace remat
