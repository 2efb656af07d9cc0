// Eigen, for the kernels' GEMMs; the only way the kernels include it.
// Built with -march=native (CMakeLists.txt), its AVX-512 paths inline GCC
// 12's avx512fintrin.h, whose undefined-vector idiom trips
// -Wmaybe-uninitialized and -Wuninitialized on every GEMM (a false positive
// of the compiler): silenced for Eigen's code only.
#pragma once

// Every product through the blocked GEMM, whose summation order depends only
// on the sizes: Eigen evaluates small ones (rows + cols + depth < 20)
// coefficient by coefficient, and with AVX-512 those peel to the buffers'
// alignment, so a recomputed tensor at another address summed differently.
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
