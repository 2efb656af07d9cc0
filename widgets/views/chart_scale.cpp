#include "widgets/views/chart_scale.h"

#include <algorithm>
#include <cmath>

namespace remat {

NiceScale nice_scale(double max, int maxTicks) {
  NiceScale s;
  if (!(max > 0)) return s;
  maxTicks = std::max(maxTicks, 2);
  // The smallest 1/2/5 x 10^k step that needs at most maxTicks ticks.
  double p = std::pow(10.0, std::floor(std::log10(max / (maxTicks - 1))));
  for (;; p *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * p;
      const double top = std::ceil(max / step - 1e-9) * step;
      if (top / step + 1 <= maxTicks + 1e-9) return {step, top};
    }
  }
}

ByteUnit byte_unit(uint64_t maxBytes) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  ByteUnit u;
  for (int i = 1; i < 5 && double(maxBytes) >= std::pow(1024.0, i); ++i) u = {std::pow(1024.0, i), names[i]};
  return u;
}

}  // namespace remat
