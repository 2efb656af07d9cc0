#!/usr/bin/env bash
# Step 1 on the GPU machine: configure and build what the GPU needs, GUI off,
# CUDA on (sm_90: H100/H200): the CLI, the core, GPU and bridge test suites and the CUDA
# benchmark. Usage: gpu/device/build.sh [OUTDIR]; log in OUTDIR/build.log. A
# configure or compile error stops here with the error and exit 1.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
log=$out/build.log
start=$SECONDS
: >"$log"
# cuDNN: the toolkit's, else the one PyTorch's wheels bring (nvidia.cudnn).
if [[ ! -f /usr/local/cuda/include/cudnn.h && -z ${CUDNN_ROOT:-} ]]; then
  py=$(find_torch_python)
  if [[ -n $py ]]; then
    CUDNN_ROOT=$("$py" -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))" 2>/dev/null) || true
    [[ -n $CUDNN_ROOT ]] && export CUDNN_ROOT && echo "cuDNN from $CUDNN_ROOT" >>"$log"
  fi
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  nvcc --version | tail -2
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DREMAT_BUILD_GUI=OFF -DREMAT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_INCLUDE_PATH="$deps/usr/include" \
    -DBoost_DIR="$arch_lib/cmake/Boost-1.74.0" -DGTest_DIR="$arch_lib/cmake/GTest" \
    -Dbenchmark_DIR="$arch_lib/cmake/benchmark" -DREMAT_ONNX=OFF
} >>"$log" 2>&1 || { tail -40 "$log"; echo "build: configure failed (log: $log)"; exit 1; }
targets=(remat test_gpu_kernels test_cuda_backend test_exec test_cli_run test_torch_formats bench_cuda_executor bench_executor)
if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$log" 2>&1; then
  grep -E -A5 "error|FAILED" "$log" | head -60
  echo "build: failed (log: $log)"
  exit 1
fi
echo "build: ok in $((SECONDS - start)) s ($build)"
