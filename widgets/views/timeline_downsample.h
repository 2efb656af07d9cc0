// Reduces a memory timeline to at most two points per pixel bucket (the min
// and the max, in step order), so a million-instruction schedule draws fast
// and its peak never disappears.
#pragma once
#include <QList>
#include <QPointF>
#include <cstdint>
#include <vector>

namespace remat {

// Points (step, bytes) for steps [0, y.size()); all of them when they fit.
QList<QPointF> downsample_minmax(const std::vector<uint64_t>& y, int buckets);
// The same over steps [from, to) only (a zoomed chart), plus the steps just
// outside so that the line reaches the edges.
QList<QPointF> downsample_minmax(const std::vector<uint64_t>& y, int buckets, std::size_t from, std::size_t to);

}  // namespace remat
