#!/usr/bin/env bash
# Step on the GPU machine (on request): issue 33's goal table, remat against
# PyTorch on the same device in one call (gpu/torch_goals.py): bf16 under
# torch.autocast, PyTorch deterministic (the goal) and with its defaults, then
# float32; where the activation peaks differ by more than 5 %, a recorded
# PyTorch step held against remat's prediction (remat compare-snapshot) and op
# by op. Usage: gpu/device/goals.sh [OUTDIR]; OUTDIR/goals.md (the table),
# goals.json, goals.txt (the log), peak_gap/, snapshots/.
# REMAT_GOALS_CASES: case names or groups (default issue33); REMAT_LLAMA_MODEL:
# a Llama captured beforehand at the case's size, llama:8:1024:16:1024:4:32000 (else
# it is captured here, in the background, into OUTDIR).
#
# Wall time on an H100, estimated from the FLOPs of a step (remat simulate):
# remat's bf16 runs f32 GEMMs on bf16-rounded values (about 15 TFLOP/s, the
# rate its f32 GPT-2 small step reached on 2026-11-26), PyTorch's bf16 tensor
# cores several times that; 6 steps of each remat strategy (1 warm-up, 5
# timed), 8 of each PyTorch variant and mode, 2 recorded steps per case with a
# gap, plus each process's start:
#   gpt:12:768:12:1024:8:bf16      7.0 TFLOP a step (sqrt 8.3)    ~25 s
#   resnet:50:64:224:64:1000:bf16  1.6 TFLOP (sqrt 2.1)           ~15 s
#   llama:8:1024:16:1024:4:32000   3.3 TFLOP; its capture runs on the CPU from
#                                  the start (12 threads, ~30-120 s)  ~15 s after it
#   gpt:24:1024:16:1024:4:bf16    10.0 TFLOP (sqrt 12.4)          ~25 s
#   resnet:50:64:224:32:1000 f32   0.8 TFLOP (sqrt 1.1)           ~10 s
#   gpt:12:768:12:1024:4:f32       3.5 TFLOP (sqrt 4.1)           ~20 s
# about 2 to 4 minutes in all; the table is rewritten after each case, so a
# step cut by its limit still leaves the cases done.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
need_torch_and_remat goals
set -o pipefail
cases=()
for c in ${REMAT_GOALS_CASES:-issue33}; do cases+=(--case "$c"); done
PYTHONUNBUFFERED=1 "$py" "$repo/gpu/torch_goals.py" "$build/app/remat" --out "$out" "${cases[@]}" 2>&1 | tee "$out/goals.txt"
