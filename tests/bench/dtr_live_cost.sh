#!/bin/bash
# What deciding inside the run costs dtr (docs/run.md): the median step time
# remat run reports for dtr:B deciding live, against the same decisions
# replayed as a precomputed schedule (--replay-decisions), B being 60% of
# store-all's peak. Each `remat run` also times store-all, which decides
# nothing either way: on this shared machine a whole process's steps run up
# to a third slower from one process to the next (store-all's too), so each
# run's dtr time is taken over its own store-all's, and the figure is
# live's ratio over replay's, the median of ROUNDS rounds (the modes
# alternating, REPEAT timed steps a run). The times are the rounds' medians.
# Usage: tests/bench/dtr_live_cost.sh [BUILD_DIR] [REPEAT] [ROUNDS]
set -euo pipefail
build=${1:-build}
repeat=${2:-15}
rounds=${3:-5}
remat="$build/app/remat"
py=/usr/bin/python3
printf '%-24s %12s %12s %14s\n' model "live ms" "replay ms" "live/replay"
for model in mlp:8:512:64 transformer:2:128:4:64 resnet:18:8:32:2:10; do
  peak=$("$remat" simulate --model "$model" --strategy store-all --json |
         $py -c 'import json,sys; print(json.load(sys.stdin)["strategies"][0]["peak_bytes"])')
  budget=$((peak * 60 / 100))
  # "dtr_ms/store_all_ms" of one run
  time_of() {
    "$remat" run --model "$model" --strategy "store-all,dtr:$budget" --backend cpu --repeat "$repeat" --json "$@" |
      $py -c 'import json,sys; s={x["name"].split(":")[0]: x["time_ms"] for x in json.load(sys.stdin)["strategies"]}; print(str(s["dtr"]) + "/" + str(s["store-all"]))'
  }
  lives=() replays=()
  for ((r = 0; r < rounds; ++r)); do
    lives+=("$(time_of)"); replays+=("$(time_of --replay-decisions)")
  done
  $py -c "
import statistics as st
live=[tuple(map(float, x.split('/'))) for x in '${lives[*]}'.split()]
replay=[tuple(map(float, x.split('/'))) for x in '${replays[*]}'.split()]
ratio=st.median((l[0] / l[1]) / (r[0] / r[1]) for l, r in zip(live, replay))
print(f'{\"$model\":<24} {st.median(l[0] for l in live):12.3f} {st.median(r[0] for r in replay):12.3f} {ratio:14.3f}')"
done
