#!/usr/bin/env bash
# Every GPU-machine step in order, each in well under 10 minutes, each writing
# its log to OUTDIR: build, test, bench, torch, apply (gpu/device/*.sh; docs/gpu.md),
# and on request sanitize (the GPU tests under compute-sanitizer), profile
# (gpu/op_times.py on the large models), goals (issue 33's goal table,
# gpu/torch_goals.py: 2 to 4 minutes, so not among the default five) and
# mixed (mixed precision's 16-bit paths alone, in bisecting order, about a minute).
# Usage: gpu/run-on-device.sh [OUTDIR] [STEP ...]   (default: all five steps)
# A build failure stops the rest; the exit code is the first failing step's.
# REMAT_DEVICE_DEADLINE=S: all steps end within S seconds (a step is cut at what
# is left, and one with under 20 s left is skipped), so that a call with a
# fixed limit still returns every log the steps wrote. At the end OUTDIR is
# packed into all.tgz (below) for the device call's 8-file limit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-/tmp/remat-out}}
shift || true
steps=("$@")
((${#steps[@]})) || steps=(build test bench torch apply)
mkdir -p "$out"
deadline=${REMAT_DEVICE_DEADLINE:-0}
rc=0
for step in "${steps[@]}"; do
  [[ -x $here/device/$step.sh ]] || { echo "unknown step '$step' (build, test, bench, torch, apply, sanitize, profile, goals, mixed)"; exit 2; }
  limit=540
  if ((deadline > 0)); then
    left=$((deadline - SECONDS))
    ((left < 20)) && { echo "== $step: skipped, ${left} s left of REMAT_DEVICE_DEADLINE"; ((rc)) || rc=124; continue; }
    ((left < limit)) && limit=$left
  fi
  echo "== $step (limit $limit s)"
  start=$SECONDS
  timeout "$limit" "$here/device/$step.sh" "$out"
  s=$?
  echo "== $step: exit $s after $((SECONDS - start)) s"
  ((s == 0)) || { ((rc)) || rc=$s; }
  [[ $step == build && $s != 0 ]] && break
done
# A device call brings back 8 files at most, 2 folders down: everything goes
# into all.tgz too, the folders (peak_gap/, snapshots/, torch_apply/) only
# there, and beside it the 7 smallest files (the logs and tables).
# REMAT_DEVICE_PACK=0 leaves OUTDIR as the steps wrote it.
if [[ ${REMAT_DEVICE_PACK:-1} != 0 ]]; then
  tar czf /tmp/remat-all.tgz -C "$out" --exclude=./all.tgz . && mv /tmp/remat-all.tgz "$out/all.tgz"
  find "$out" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
  mapfile -t files < <(find "$out" -maxdepth 1 -type f ! -name all.tgz -printf '%s %p\n' | sort -n | cut -d' ' -f2-)
  while ((${#files[@]} > 7)); do
    rm -f "${files[-1]}"
    unset 'files[-1]'
  done
fi
exit "$rc"
