#!/usr/bin/env bash
# On a bare GPU machine (CUDA, cmake, ninja, PyTorch; no Qt, no apt, no network):
# unpack the carried .debs (tools/fetch-device-deps.sh), build with the GUI off
# and CUDA on, run every test (the GPU ones included), run the benchmarks, and
# print the tables last. Usage: gpu/run-on-device.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/remat-out}}
mkdir -p "$out"
deps=/tmp/remat-deps
mkdir -p "$deps"
shopt -s nullglob
debs=(.carry/debs/*.deb)
if ((${#debs[@]} == 0)); then
  echo "no .carry/debs: run tools/fetch-device-deps.sh on the dev machine and carry .carry" >&2
  exit 2
fi
for f in "${debs[@]}"; do
  if command -v dpkg >/dev/null; then dpkg -x "$f" "$deps"
  else (t=$(mktemp -d) && cd "$t" && ar x "$OLDPWD/$f" && tar -xf data.tar.* -C "$deps" && rm -rf "$t"); fi
done
arch_lib=$deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$arch_lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt" || true
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DREMAT_BUILD_GUI=OFF -DREMAT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_INCLUDE_PATH="$deps/usr/include" \
  -DBoost_DIR="$arch_lib/cmake/Boost-1.74.0" -DGTest_DIR="$arch_lib/cmake/GTest" \
  -Dbenchmark_DIR="$arch_lib/cmake/benchmark" 2>&1 | tee "$out/configure.log" | tail -25
cmake --build build-device -j "$(nproc)" 2>&1 | tee "$out/build.log" | grep -E "error|warning: |FAILED" || true

set +e
(cd build-device && ctest --output-on-failure -j 4 --timeout 600) 2>&1 | tee "$out/ctest.log" | tail -40
tests_rc=${PIPESTATUS[0]}
set -e

# Benchmarks: each bench_* program that exists (bench_cuda* run the CUDA backend).
for b in build-device/tests/bench/bench_*; do
  [[ -x $b ]] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | tee "$out/$(basename "$b").txt" | grep -E "median|^Run|---" || true
done
# The summary tables of the benchmarks (Google Benchmark's own lines are above
# and in $out/bench_*.txt).
for t in "$out"/bench_*.txt; do
  case $(basename "$t") in
    bench_cuda_executor.txt) echo "== bench_cuda_executor summary"; sed -n '/^summary:/,$p;/skipped, no CUDA device/p' "$t" ;;
    bench_executor.txt) echo "== bench_executor summary (CPU)"; sed -n '/^model /,$p' "$t" ;;
  esac
done
if [[ -x gpu/torch_compare.py ]] && python3 -c "import torch" 2>/dev/null; then
  echo "== PyTorch checkpoint_sequential vs remat on the same MLP"
  python3 gpu/torch_compare.py build-device/app/remat | tee "$out/torch_compare.txt"
fi
echo "== tests exit code: $tests_rc"
exit "$tests_rc"
