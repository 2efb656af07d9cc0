#!/usr/bin/env bash
# Step 5 on the GPU machine: remat's plans put on PyTorch modules with
# remat_capture.apply, the step's peak from the CUDA allocator's trace
# (.grad None, the gradients left out) against remat's predicted peak,
# within 5 % (gpu/torch_apply.py).
# Usage: gpu/device/apply.sh [OUTDIR]; output in OUTDIR/torch_apply.txt.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
need_torch_and_remat apply
set -o pipefail
PYTHONUNBUFFERED=1 "$py" "$repo/gpu/torch_apply.py" "$build/app/remat" --out "$out/torch_apply" | tee "$out/torch_apply.txt"
