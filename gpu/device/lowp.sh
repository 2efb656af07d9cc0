#!/usr/bin/env bash
# Step on the GPU machine (on request, after build): mixed precision's 16-bit
# paths alone (docs/gpu.md#mixed-precision-on-tensor-cores), in the order that
# bisects them: the kernels against their float64 bounds (GEMMs, then
# convolutions), then the backend with both convolution paths and both GEMM
# paths, bitwise across strategies, then the CudaMixed presets again with
# REMAT_CUDA_CONV=f32 and with both switches at f32 (the paths before the
# tensor cores), so that a failure names the path. Each program continues
# after a failure. Usage: gpu/device/lowp.sh [OUTDIR]; log in OUTDIR/lowp.log.
# About a minute after build.sh.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
[[ -d $build ]] || { echo "lowp: no build in $build: run gpu/device/build.sh first"; exit 1; }
log=$out/lowp.log
export REMAT_REQUIRE_CUDA=1
k=$build/tests/gpu/test_gpu_kernels
b=$build/tests/gpu/test_cuda_backend
rc=0
step() {
  echo "== $*" | tee -a "$log"
  "$@" >>"$log" 2>&1 || rc=1
  grep -E "^\[  (PASSED|FAILED) |tests? ran" "$log" | tail -3
}
: >"$log"
step "$k" --gtest_filter='GemmLowp.*'
step "$k" --gtest_filter='ConvLowp.*'
step "$b" --gtest_filter='*CudaMixedConv.*:*CudaMixed.BothGemmPaths*'
step "$b" --gtest_filter='*CudaMixed.PeakExact*'
step env REMAT_CUDA_CONV=f32 "$b" --gtest_filter='*CudaMixed.PeakExact*'
step env REMAT_CUDA_CONV=f32 REMAT_CUDA_GEMM=f32 "$b" --gtest_filter='*CudaMixed.PeakExact*'
grep -E "^\[  FAILED  \]|Failure|outside the bound" "$log" | head -40 || true
echo "lowp: exit $rc (log: $log)"
exit "$rc"
