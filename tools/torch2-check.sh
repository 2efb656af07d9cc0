#!/usr/bin/env bash
# Runs the PyTorch-facing tests (ctest labels `bridge` and `torch`: capture,
# memory snapshots, traces, the ONNX exports and the autograd cross-checks)
# with PyTorch 2.x on this Debian 12 machine, whose own python3-torch is 1.13.
#
# Debian 13 (trixie) packages PyTorch 2.x. This script puts a minimal trixie
# in ROOT with debootstrap (from Debian's archive, the only one reachable
# here), runs the tests' Python inside it, and runs remat there with the
# libraries it was built against: trixie's libonnx has the same soname as
# bookworm's but another ABI (remat crashes on it), so remat's own libraries
# are copied in and a wrapper over the build's remat points the loader at them.
#
# Usage: tools/torch2-check.sh BUILD_DIR [ROOT]   (root; ROOT=/opt/trixie)
# REMAT_TORCH2_TESTS=REGEX runs only the tests it matches (ctest -R).
# First run: about 700 MB downloaded and 5 minutes. The log is
# BUILD_DIR/torch2-check.log; the exit status is ctest's.
set -euo pipefail

build=$(realpath "${1:?usage: tools/torch2-check.sh BUILD_DIR [ROOT]}")
root=${2:-/opt/trixie}
repo=$(realpath "$(dirname "$0")/..")
remat="$build/app/remat"
[[ -x $remat ]] || { echo "torch2-check: $remat is not built" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "torch2-check: chroot and mount need root" >&2; exit 2; }

mounts=()
bind() {  # bind SRC DST: mount SRC at DST for this run only
  mkdir -p "$2" 2>/dev/null || true
  mount --bind "$1" "$2"
  mounts=("$2" "${mounts[@]}")
}
cleanup() { for m in "${mounts[@]}"; do umount "$m" || true; done; }
trap cleanup EXIT

if ! chroot "$root" /usr/bin/python3 -c "import torch, torchvision, numpy, onnx" 2>/dev/null; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
  [[ -x $root/usr/bin/python3 ]] || debootstrap --variant=minbase --include=python3 trixie "$root" http://deb.debian.org/debian
  mountpoint -q "$root/proc" || bind /proc "$root/proc"
  chroot "$root" apt-get update -q
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    python3-torch python3-torchvision python3-numpy python3-onnx
fi

# The shared libraries of remat and of the shape inference program it starts
# from beside itself (remat-onnx-infer: libonnx), as built here, except the C
# and C++ runtimes (trixie's are newer and keep the old symbols).
lib="$root/opt/remat-host-lib"
rm -rf "$lib" && mkdir -p "$lib"
ldd "$remat" "$build/app/remat-onnx-infer" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  sort -u | xargs -I{} cp -L {} "$lib/"

# oneDNN sizes its blocks from /sys's cache sizes (a divide by zero without it).
for d in /proc /sys /dev; do mountpoint -q "$root$d" || bind "$d" "$root$d"; done
# The repository at its own path (the tests pass absolute paths) and once more
# at /host, where the wrapper below does not hide the real binary.
bind "$repo" "$root$repo"
[[ $build == "$repo"/* ]] || bind "$build" "$root$build"
bind "$build" "$root/host-build"
cat >"$root/opt/remat-wrapper" <<EOF
#!/bin/sh
LD_LIBRARY_PATH=/opt/remat-host-lib exec /host-build/app/remat "\$@"
EOF
chmod +x "$root/opt/remat-wrapper"
bind "$root/opt/remat-wrapper" "$root$remat"

# Where /sys lists no CPU caches (this VM), oneDNN 3.6 divides by zero
# choosing a convolution backward (ResNet-50's); PyTorch's own kernels then.
mkdir -p "$root/opt/remat-site"
if [[ ! -d /sys/devices/system/cpu/cpu0/cache ]]; then
  cat >"$root/opt/remat-site/sitecustomize.py" <<'EOF'
try:
    import torch
    torch.backends.mkldnn.enabled = False
except ImportError:
    pass
EOF
else
  rm -f "$root/opt/remat-site/sitecustomize.py"
fi
py="$build/torch2-python3"
cat >"$py" <<EOF
#!/bin/sh
exec chroot "$root" /usr/bin/env -C "\$PWD" PYTHONPATH=/opt/remat-site /usr/bin/python3 "\$@"
EOF
chmod +x "$py"

log="$build/torch2-check.log"
echo "torch2-check: $("$py" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)')" | tee "$log"
rc=0
(cd "$build" && REMAT_PYTHON="$py" REMAT_REQUIRE_TORCH2=1 CI=true ctest -L 'bridge|torch' ${REMAT_TORCH2_TESTS:+-R "$REMAT_TORCH2_TESTS"} --output-on-failure -j 2 --timeout 900) >>"$log" 2>&1 || rc=$?
grep -E "tests passed|tests failed|\*\*\*|Skipped" "$log" | head -40 || true
echo "torch2-check: exit $rc (log: $log)"
exit $rc
