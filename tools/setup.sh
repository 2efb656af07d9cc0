#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root):
#   tools/setup.sh app    install what is missing, build, open Remat Studio
#   tools/setup.sh test   install what is missing, build, run the whole test suite
# The CUDA backend is built too when nvcc is found (/usr/local/cuda); without it
# the build goes on CPU-only.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  app|test) ;;
  *) echo "usage: tools/setup.sh app|test" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libxkbcommon-dev libgl-dev
  libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  coinor-libcbc-dev libglpk-dev
  libgif-dev libavcodec-dev libavformat-dev libswscale-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-torch python3-torchvision python3-onnx
  # python3-torch brings only the reference BLAS (libblas3), 30x slower on the
  # linear layers that the benchmarks against PyTorch time: OpenBLAS takes its place.
  libopenblas0-pthread
  xvfb xauth
  hyperfine jq time
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
echo "== configuring (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== building with $jobs jobs"
cmake --build build -j "$jobs"

if [[ $mode == test ]]; then
  export QT_QPA_PLATFORM=offscreen
  rc=0
  (cd build && ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 600 --output-junit ctest-junit.xml) || rc=1
  # Under CI a test that skipped for want of a tool is a failure (tools/ci-skips.py).
  if [[ ${CI:-} == true ]]; then
    python3 tools/ci-skips.py build build/ctest-junit.xml || rc=1
  fi
  # The engine again under AddressSanitizer + UBSan (the CPU backend then
  # allocates exact sizes and really frees, so a kernel reading a released
  # tensor is caught): the core, kernel and executor suites, GUI and CUDA off.
  echo "== AddressSanitizer + UBSan: core, kernel and executor suites (build-asan/)"
  sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DREMAT_CUDA=OFF -DREMAT_BUILD_GUI=OFF \
    -DREMAT_BUILD_BENCH=OFF -DREMAT_ONNX=OFF -DCMAKE_CXX_FLAGS="$sanitize" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build build-asan -j "$jobs" --target test_core test_kernels test_exec
  for t in core/test_core kernels/test_kernels exec/test_exec; do
    echo "== build-asan/tests/$t"
    "build-asan/tests/$t" --gtest_brief=1 || rc=1
  done
  exit "$rc"
fi

if [[ -n ${DISPLAY:-}${WAYLAND_DISPLAY:-} ]]; then
  exec ./build/app/studio/remat-studio
fi
echo "== no display here: showing the built-in demo in the CLI instead."
echo "   (for the window: xvfb-run -a ./build/app/studio/remat-studio, or run this on a desktop)"
exec ./build/app/remat simulate --model chain:16 --strategy store-all,recompute-all,sqrt
