#!/usr/bin/env bash
# Step 3 on the GPU machine: the CUDA executor benchmark (Google Benchmark, then
# its summary table). Usage: gpu/device/bench.sh [OUTDIR]; output in
# OUTDIR/bench_cuda_executor.txt; the two GEMM paths of mixed precision in
# OUTDIR/gemm_paths.txt, its two pointwise paths in OUTDIR/pointwise_paths.txt,
# its two convolution paths in OUTDIR/conv_paths.txt, runs without and with
# --nondeterministic-backward in OUTDIR/nondeterministic_backward.txt.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
b=$build/tests/bench/bench_cuda_executor
[[ -x $b ]] || { echo "bench: $b missing: run gpu/device/build.sh first"; exit 1; }
"$b" --benchmark_repetitions=1 >"$out/bench_cuda_executor.txt" 2>&1 || { tail -20 "$out/bench_cuda_executor.txt"; exit 1; }
sed -n '/^summary:/,$p' "$out/bench_cuda_executor.txt"

# Mixed precision's 16-bit paths, each against its f32 twin: store-all of
# each model in MODELS with the switch VAR at its default value, then at f32
# (the other switches as the environment has them); the run's path line, its
# row, or its error, into OUTDIR/FILE.
remat=$build/app/remat
time_paths() {  # VAR DEFAULT FILE PATTERN MODELS...
  local var=$1 default=$2 file=$3 pattern=$4 spec path
  shift 4
  for spec in "$@"; do
    for path in "$default" f32; do
      echo "== $spec, $var=$path"
      env "$var=$path" "$remat" run -m "$spec" -s store-all --backend cuda --repeat 3 2>&1 |
        grep -E "$pattern|^store-all|error" || echo "(no result)"
    done
  done | tee "$out/$file"
}

# The GEMMs (docs/gpu.md#mixed-precision-on-tensor-cores): REMAT_BENCH_GEMM_MODELS,
# default a bf16 GPT-2 small at batch 8 (empty: none).
time_paths REMAT_CUDA_GEMM tensor gemm_paths.txt '^bf16/f16 products' \
  ${REMAT_BENCH_GEMM_MODELS-gpt:12:768:12:1024:8:bf16}
# The 16-bit loads and stores (docs/gpu.md#16-bit-loads-and-stores):
# REMAT_BENCH_POINTWISE_MODELS, default a bf16 GPT-2 small at batch 8 and a
# ResNet-50 at batch 32, CUDA autocast's dtypes, and GPT-2 small's attention
# as one fused bf16 Attention (gpu/device/models/gpt2_sdpa_block_bf16.json).
# The two paths must print the same loss and gradient hash.
time_paths REMAT_CUDA_POINTWISE 16bit pointwise_paths.txt '^bf16/f16' \
  ${REMAT_BENCH_POINTWISE_MODELS-gpt:12:768:12:1024:8:bf16@cuda resnet:50:64:224:32:1000:bf16@cuda gpu/device/models/gpt2_sdpa_block_bf16.json}
# The convolutions (docs/gpu.md#convolutions-on-cudnns-16-bit-path):
# REMAT_BENCH_CONV_MODELS, default a bf16 ResNet-50 at 224 px, batch 16,
# autocast's CUDA dtypes.
time_paths REMAT_CUDA_CONV tensor conv_paths.txt '^bf16/f16 convolutions' \
  ${REMAT_BENCH_CONV_MODELS-resnet:50:64:224:16:1000:bf16@cuda}
# The non-deterministic backward (docs/gpu.md#non-deterministic-backward):
# REMAT_BENCH_NONDET_MODELS, default a ResNet-50 at batch 32 in f32 and in
# bf16 (autocast's CUDA dtypes, batch 16) for the convolutions, GPT-2 small
# in f32 at batch 4 for its embedding gradients; store-all and sqrt without
# and with --nondeterministic-backward: the times, what ran that way and the
# loss (the same bits both ways: the forward does not change).
for spec in ${REMAT_BENCH_NONDET_MODELS-resnet:50:64:224:32:1000 resnet:50:64:224:16:1000:bf16@cuda gpt:12:768:12:1024:4:f32:50257}; do
  for flag in "" --nondeterministic-backward; do
    echo "== $spec ${flag:-(deterministic)}"
    "$remat" run -m "$spec" -s store-all,sqrt --backend cuda --repeat 3 $flag 2>&1 |
      grep -E "^--nondeterministic|^  [a-zA-Z]|^store-all|^sqrt|error" || echo "(no result)"
  done
done | tee "$out/nondeterministic_backward.txt"
