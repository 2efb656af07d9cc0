#!/usr/bin/env bash
# Step 3 on the GPU machine: the CUDA executor benchmark (Google Benchmark, then
# its summary table). Usage: gpu/device/bench.sh [OUTDIR]; output in
# OUTDIR/bench_cuda_executor.txt; the two GEMM paths of mixed precision in
# OUTDIR/gemm_paths.txt, its two pointwise paths in OUTDIR/pointwise_paths.txt,
# its two convolution paths in OUTDIR/conv_paths.txt.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
b=$build/tests/bench/bench_cuda_executor
[[ -x $b ]] || { echo "bench: $b missing: run gpu/device/build.sh first"; exit 1; }
"$b" --benchmark_repetitions=1 >"$out/bench_cuda_executor.txt" 2>&1 || { tail -20 "$out/bench_cuda_executor.txt"; exit 1; }
sed -n '/^summary:/,$p' "$out/bench_cuda_executor.txt"

# Mixed precision's two GEMM paths (docs/gpu.md#mixed-precision-on-tensor-cores):
# store-all of each of REMAT_BENCH_GEMM_MODELS (default a bf16 GPT-2 small,
# batch 8; empty: none) on tensor cores, then with REMAT_CUDA_GEMM=f32.
remat=$build/app/remat
models=${REMAT_BENCH_GEMM_MODELS-gpt:12:768:12:1024:8:bf16}
for spec in $models; do
  for path in tensor f32; do
    echo "== $spec, REMAT_CUDA_GEMM=$path"
    REMAT_CUDA_GEMM=$path "$remat" run -m "$spec" -s store-all --backend cuda --repeat 3 2>&1 |
      grep -E '^bf16/f16 products|^store-all|error' || echo "(no result)"
  done
done | tee "$out/gemm_paths.txt"

# Mixed precision's two pointwise paths (docs/gpu.md#16-bit-loads-and-stores):
# store-all of each of REMAT_BENCH_POINTWISE_MODELS (default a bf16 GPT-2
# small at batch 8 and a ResNet-50 at batch 32, CUDA autocast's dtypes;
# empty: none) with 16-bit loads and stores, then with REMAT_CUDA_POINTWISE=f32.
# The two must print the same loss and gradient hash.
models=${REMAT_BENCH_POINTWISE_MODELS-gpt:12:768:12:1024:8:bf16@cuda resnet:50:64:224:32:1000:bf16@cuda}
for spec in $models; do
  for path in 16bit f32; do
    echo "== $spec, REMAT_CUDA_POINTWISE=$path"
    REMAT_CUDA_POINTWISE=$path "$remat" run -m "$spec" -s store-all --backend cuda --repeat 3 2>&1 |
      grep -E '^bf16/f16|^store-all|error' || echo "(no result)"
  done
done | tee "$out/pointwise_paths.txt"
# Mixed precision's two convolution paths (docs/gpu.md#convolutions-on-cudnns-16-bit-path):
# store-all of each of REMAT_BENCH_CONV_MODELS (default a bf16 ResNet-50 at
# 224 px, batch 16, autocast's CUDA dtypes; empty: none) on cuDNN's 16-bit
# path, then with REMAT_CUDA_CONV=f32 (the GEMMs on the environment's path).
models=${REMAT_BENCH_CONV_MODELS-resnet:50:64:224:16:1000:bf16@cuda}
for spec in $models; do
  for path in tensor f32; do
    echo "== $spec, REMAT_CUDA_CONV=$path"
    REMAT_CUDA_CONV=$path "$remat" run -m "$spec" -s store-all --backend cuda --repeat 3 2>&1 |
      grep -E '^bf16/f16 convolutions|^store-all|error' || echo "(no result)"
  done
done | tee "$out/conv_paths.txt"
