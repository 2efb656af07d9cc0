// Binomial checkpointing counts (Griewank & Walther), shared by revolve.cpp
// and its tests.
#pragma once
#include <cstdint>

namespace remat {

// Minimal number of forward advances to reverse n steps with c slots
// (Griewank & Walther): r·n − β(c+1, r−1), β(c, r) = binom(c+r, c), r the
// least integer with β(c, r) >= n.
int64_t revolve_advances(int64_t n, int c);

}  // namespace remat
