#!/usr/bin/env bash
# Mixed precision's device checks, alone and first (issue 33's tensor-core
# GEMMs and 16-bit loads and stores were written without a GPU;
# docs/gpu.md#16-bit-loads-and-stores): the 16-bit kernels against the
# widening path byte for byte (PointwiseIo.*), the tensor-core GEMMs within
# their bound (GemmLowp.*), the presets on every path and strategy
# (Presets/CudaMixed.*), the CLI's switches (CliRun.Cuda*); then store-all of
# a bf16@cuda GPT-2 small and ResNet-50 with 16-bit loads and stores and with
# REMAT_CUDA_POINTWISE=f32 (the two must show the same loss and gradient
# hash; the times are the gain). About a minute after the build.
# Usage: gpu/device/mixed.sh [OUTDIR]; log in OUTDIR/mixed.log.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
[[ -d $build ]] || { echo "mixed: no build in $build: run gpu/device/build.sh first"; exit 1; }
log=$out/mixed.log
export REMAT_REQUIRE_CUDA=1
rc=0
run() {
  echo "== $*" | tee -a "$log"
  "$@" >>"$log" 2>&1 || { rc=1; echo "   FAILED (see $log)"; }
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \]" "$log" | tail -3
}
run "$build/tests/gpu/test_gpu_kernels" --gtest_filter='PointwiseIo.*:GemmLowp.*'
run "$build/tests/gpu/test_cuda_backend" --gtest_filter='Presets/CudaMixed.*'
run "$build/tests/exec/test_cli_run" --gtest_filter='CliRun.Cuda*'
models=${REMAT_BENCH_POINTWISE_MODELS-gpt:12:768:12:1024:8:bf16@cuda resnet:50:64:224:32:1000:bf16@cuda}
for spec in $models; do
  for path in 16bit f32; do
    echo "== $spec, REMAT_CUDA_POINTWISE=$path"
    REMAT_CUDA_POINTWISE=$path "$build/app/remat" run -m "$spec" -s store-all --backend cuda --repeat 3 2>&1 |
      grep -E '^bf16/f16|^store-all|error' || echo "(no result)"
  done
done | tee -a "$log"
echo "mixed: exit $rc (log: $log)"
exit "$rc"
