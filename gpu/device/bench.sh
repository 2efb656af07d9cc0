#!/usr/bin/env bash
# Step 3 on the GPU machine: the CUDA executor benchmark (Google Benchmark, then
# its summary table). Usage: gpu/device/bench.sh [OUTDIR]; output in
# OUTDIR/bench_cuda_executor.txt.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
b=$build/tests/bench/bench_cuda_executor
[[ -x $b ]] || { echo "bench: $b missing: run gpu/device/build.sh first"; exit 1; }
"$b" --benchmark_repetitions=1 >"$out/bench_cuda_executor.txt" 2>&1 || { tail -20 "$out/bench_cuda_executor.txt"; exit 1; }
sed -n '/^summary:/,$p' "$out/bench_cuda_executor.txt"
