// Which of cuDNN's algorithm query results a convolution plan takes
// (gpu/kernels/conv.cu), as a pure function of what the query said, so that
// the rule is tested without a GPU (tests/kernels/test_conv_algo_choice.cpp).
// Plain C++17 (conv.cu is compiled by nvcc as C++17): no cuDNN type here; the
// plan turns each cudnnConvolution*AlgoPerf_t into an AlgoCandidate.
//
// The query results come fastest first by cuDNN's heuristics. A plan takes
// the first that ran the query successfully, whose math the plan runs (the
// descriptor's math type decides the call, not the result's), that sums
// products directly where the plan asks for that (the 16-bit plans, whose
// error bound is a summation's), and that is deterministic unless the
// backward may be non-deterministic (remat run --nondeterministic-backward):
// then the first such result whatever its determinism, which is the faster
// one wherever cuDNN ranks an atomic algorithm first.
#pragma once

namespace remat::cuda {

struct AlgoCandidate {
  bool succeeded = false;      // status == CUDNN_STATUS_SUCCESS
  bool deterministic = false;  // determinism == CUDNN_DETERMINISTIC (the 16-bit plans: and deterministic by name)
  bool math_ok = false;        // a math type the plan accepts
  bool direct_sum = false;     // sums products directly, with atomics or not (no FFT, no Winograd)
};

// The index of the candidate taken, or -1 when none qualifies.
inline int choose_conv_algo(const AlgoCandidate* candidates, int count, bool need_direct_sum,
                            bool allow_nondeterministic) {
  for (int i = 0; i < count; ++i) {
    const AlgoCandidate& c = candidates[i];
    if (c.succeeded && c.math_ok && (c.direct_sum || !need_direct_sum) && (c.deterministic || allow_nondeterministic))
      return i;
  }
  return -1;
}

}  // namespace remat::cuda
