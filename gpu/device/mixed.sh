#!/usr/bin/env bash
# Mixed precision's device checks, alone and first (issue 33's tensor-core
# GEMMs, cuDNN's 16-bit convolutions and 16-bit loads and stores were written
# without a GPU; docs/gpu.md), in the order that bisects them, each program
# going on after a failure:
#   1. the kernels: GemmLowp.* and ConvLowp.* within their float64 bounds,
#      PointwiseIo.* byte for byte against the widening path (the fused
#      attention's among them: PointwiseIo.FusedAttention);
#   2. the backend, each path against its f32 twin, bitwise across strategies
#      (CudaMixedConv.*, CudaMixed.Both*Paths*, CudaMixedCaptured.*: a captured
#      Llama, the fused attention's models in bf16 and f16);
#   3. the presets near the CPU (CudaMixed.PeakExact*) as the environment has
#      it, then with REMAT_CUDA_POINTWISE=f32, REMAT_CUDA_CONV=f32 and
#      REMAT_CUDA_GEMM=f32 added one by one (the last is the path before any
#      16-bit kernel), so that a failure names the path;
#   4. the CLI's switches (CliRun.Cuda*).
# About a minute after the build; the paths' times are bench.sh's.
# Usage: gpu/device/mixed.sh [OUTDIR]; log in OUTDIR/mixed.log.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
[[ -d $build ]] || { echo "mixed: no build in $build: run gpu/device/build.sh first"; exit 1; }
log=$out/mixed.log
export REMAT_REQUIRE_CUDA=1
k=$build/tests/gpu/test_gpu_kernels
b=$build/tests/gpu/test_cuda_backend
rc=0
step() {
  echo "== $*" | tee -a "$log"
  "$@" >>"$log" 2>&1 || { rc=1; echo "   FAILED (see $log)"; }
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \]" "$log" | tail -3
}
: >"$log"
step "$k" --gtest_filter='GemmLowp.*:ConvLowp.*:PointwiseIo.*'
step "$b" --gtest_filter='*CudaMixedConv.*:*CudaMixed.Both*:CudaMixedCaptured.*'
step "$b" --gtest_filter='*CudaMixed.PeakExact*'
step env REMAT_CUDA_POINTWISE=f32 "$b" --gtest_filter='*CudaMixed.PeakExact*'
step env REMAT_CUDA_POINTWISE=f32 REMAT_CUDA_CONV=f32 "$b" --gtest_filter='*CudaMixed.PeakExact*'
step env REMAT_CUDA_POINTWISE=f32 REMAT_CUDA_CONV=f32 REMAT_CUDA_GEMM=f32 "$b" --gtest_filter='*CudaMixed.PeakExact*'
step "$build/tests/exec/test_cli_run" --gtest_filter='CliRun.Cuda*'
grep -E "^\[  FAILED  \]|Failure|outside the bound" "$log" | head -40 || true
echo "mixed: exit $rc (log: $log)"
exit "$rc"
