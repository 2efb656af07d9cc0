// Round axis scales: ticks at 1, 2 or 5 times a power of ten (0, 5, 10, 15,
// 20), and one byte unit per axis chosen so that the labels are those round
// numbers in that unit (the axis title names it).
#pragma once
#include <QString>
#include <cstdint>

namespace remat {

struct NiceScale {
  double step = 1;  // between ticks, in the axis' unit
  double top = 1;   // the axis maximum: a multiple of step, >= the data
  int ticks() const { return static_cast<int>(top / step + 0.5) + 1; }
};
// At most `maxTicks` ticks from 0 to at least `max` (> 0).
NiceScale nice_scale(double max, int maxTicks = 6);

struct ByteUnit {
  double bytes = 1;     // one unit in bytes
  QString name = "B";   // "B", "KiB", "MiB", "GiB", "TiB"
};
// The largest binary unit in which `maxBytes` is at least 1.
ByteUnit byte_unit(uint64_t maxBytes);

}  // namespace remat
