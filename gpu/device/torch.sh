#!/usr/bin/env bash
# Step 4 on the GPU machine: PyTorch against remat on the same models and
# checkpoint boundaries (gpu/torch_compare.py). Usage: gpu/device/torch.sh
# [OUTDIR]; output in OUTDIR/torch_compare.txt. Fails when no Python imports torch.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
need_torch_and_remat torch
set -o pipefail
# REMAT_TORCH_CASES: names of the cases to run (the large ones among them; "all":
# every case), else the default set.
cases=()
for c in ${REMAT_TORCH_CASES:-}; do cases+=(--case "$c"); done
PYTHONUNBUFFERED=1 "$py" "$repo/gpu/torch_compare.py" "$build/app/remat" "${cases[@]}" | tee "$out/torch_compare.txt"
