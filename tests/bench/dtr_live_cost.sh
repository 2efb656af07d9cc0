#!/bin/bash
# What deciding inside the run costs dtr (docs/run.md): the median step time
# remat run reports for dtr:B deciding live, against the same decisions
# replayed as a precomputed schedule (--replay-decisions), in one run of this
# script, the modes alternating; each figure is the lower of two runs'
# medians (REPEAT timed steps each). B is 60% of store-all's peak.
# Usage: tests/bench/dtr_live_cost.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=${1:-build}
repeat=${2:-15}
remat="$build/app/remat"
py=/usr/bin/python3
printf '%-24s %12s %12s %8s\n' model "live ms" "replay ms" ratio
for model in mlp:8:512:64 transformer:2:128:4:64 resnet:18:8:32:2:10; do
  peak=$("$remat" simulate --model "$model" --strategy store-all --json |
         $py -c 'import json,sys; print(json.load(sys.stdin)["strategies"][0]["peak_bytes"])')
  budget=$((peak * 60 / 100))
  time_of() {
    "$remat" run --model "$model" --strategy "dtr:$budget" --backend cpu --repeat "$repeat" --json "$@" |
      $py -c 'import json,sys; s=json.load(sys.stdin)["strategies"]; print([x for x in s if x["name"].startswith("dtr")][0]["time_ms"])'
  }
  live=$(time_of); replay=$(time_of --replay-decisions)
  live2=$(time_of); replay2=$(time_of --replay-decisions)
  $py -c "
live=min($live,$live2); replay=min($replay,$replay2)
print(f'{\"$model\":<24} {live:12.3f} {replay:12.3f} {live/replay:8.3f}')"
done
