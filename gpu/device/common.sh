# Sourced by the GPU-machine steps (gpu/device/*.sh). That machine has CUDA,
# cmake, ninja and PyTorch but no Qt, no apt and no network: the libraries it
# lacks travel as Debian .deb files in .carry/debs (tools/fetch-device-deps.sh)
# and are unpacked here once.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
build=${REMAT_DEVICE_BUILD:-$repo/build-device}
deps=${REMAT_DEVICE_DEPS:-/tmp/remat-deps}
arch_lib=$deps/usr/lib/x86_64-linux-gnu
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$arch_lib:${LD_LIBRARY_PATH:-}

# OUT: where each step writes its log (the first argument, else $OUT, else /tmp/remat-out).
out_dir() {
  local o=${1:-${OUT:-/tmp/remat-out}}
  mkdir -p "$o"
  echo "$o"
}

unpack_deps() {
  [[ -f $deps/.unpacked ]] && return 0
  shopt -s nullglob
  local debs=("$repo"/.carry/debs/*.deb)
  shopt -u nullglob
  if ((${#debs[@]} == 0)); then
    echo "no .carry/debs: run tools/fetch-device-deps.sh on the dev machine and carry .carry" >&2
    return 2
  fi
  mkdir -p "$deps"
  local f t
  for f in "${debs[@]}"; do
    if command -v dpkg >/dev/null; then
      dpkg -x "$f" "$deps"
    else
      t=$(mktemp -d)
      (cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$deps")
      rm -rf "$t"
    fi
  done
  touch "$deps/.unpacked"
}

# For a step that runs remat beside PyTorch: sets py to a Python that imports
# torch and checks the build's remat, else says why (naming the step) and exits 1.
need_torch_and_remat() {
  py=$(find_torch_python)
  [[ -n $py ]] || { echo "$1: no Python here imports torch (set REMAT_PYTHON)"; exit 1; }
  [[ -x $build/app/remat ]] || { echo "$1: $build/app/remat missing: run gpu/device/build.sh first"; exit 1; }
}

# The first Python that imports torch: $REMAT_PYTHON, then python3 on PATH, then
# the usual places (Debian's, a venv). Prints nothing when there is none.
find_torch_python() {
  local p
  for p in ${REMAT_PYTHON:-} python3 /usr/bin/python3 /opt/torch/.venv/bin/python3 /usr/local/bin/python3; do
    command -v "$p" >/dev/null 2>&1 || continue
    if "$p" -c "import torch" >/dev/null 2>&1; then
      command -v "$p"
      return 0
    fi
  done
  return 0
}
