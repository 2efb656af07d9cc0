#!/usr/bin/env bash
# Every GPU-machine step in order, each in well under 10 minutes, each writing
# its log to OUTDIR: build, test, bench, torch (gpu/device/*.sh; docs/gpu.md).
# Usage: gpu/run-on-device.sh [OUTDIR] [STEP ...]   (default: all four steps)
# A build failure stops the rest; the exit code is the first failing step's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-/tmp/remat-out}}
shift || true
steps=("$@")
((${#steps[@]})) || steps=(build test bench torch)
mkdir -p "$out"
rc=0
for step in "${steps[@]}"; do
  [[ -x $here/device/$step.sh ]] || { echo "unknown step '$step' (build, test, bench, torch)"; exit 2; }
  echo "== $step"
  start=$SECONDS
  timeout 540 "$here/device/$step.sh" "$out"
  s=$?
  echo "== $step: exit $s after $((SECONDS - start)) s"
  ((s == 0)) || { ((rc)) || rc=$s; }
  [[ $step == build && $s != 0 ]] && break
done
exit "$rc"
