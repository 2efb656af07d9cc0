#!/usr/bin/env bash
# Optional step on the GPU machine: where a step's time goes on the large
# models, remat beside PyTorch (gpu/op_times.py). Usage: gpu/device/profile.sh
# [OUTDIR]; output in OUTDIR/op_times.txt. REMAT_PROFILE_MODELS overrides the models.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
need_torch_and_remat profile
read -r -a models <<<"${REMAT_PROFILE_MODELS:-resnet:50:64:224:32:1000 gpt:12:768:12:1024:4:f32:50257}"
set -o pipefail
PYTHONUNBUFFERED=1 "$py" "$repo/gpu/op_times.py" "$build/app/remat" "${models[@]}" 2>&1 | tee "$out/op_times.txt"
