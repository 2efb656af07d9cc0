#!/usr/bin/env bash
# The commands a user types, timed end to end (start-up, model building,
# scheduling, simulation, printing): hyperfine's median of several runs, and
# the peak resident memory of one run (/usr/bin/time). Complements the Google
# Benchmark programs beside it, which time the engine's functions alone.
#
#   tests/bench/commands.sh [REMAT] [RUNS]
#     REMAT  the binary to time (default: build/app/remat); build it Release or
#            RelWithDebInfo
#     RUNS   hyperfine runs per command (default 10; slow commands use fewer)
#
# Prints a Markdown table. Needs hyperfine, jq and /usr/bin/time (tools/setup.sh installs them).
set -euo pipefail

remat=${1:-build/app/remat}
runs=${2:-10}
if [[ ! -x $remat ]]; then
  echo "commands.sh: '$remat' is not an executable (build it first, or pass its path)" >&2
  exit 2
fi
for tool in hyperfine jq /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "commands.sh: $tool is not installed (tools/setup.sh installs it)" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Instructions of recompute-all on chain:N (ops 0..N, n = N + 1): the forward
# pass computes ops 1..N, the backward phase of op v < N recomputes ops 1..v,
# so F = N(N+1)/2 forward steps; with N backward steps, one free per forward,
# one for the input and one per gradient (N - 1), 2F + 2n - 2 in all.
recompute_all_instructions() {
  local N=$1 n=$(($1 + 1))
  local F=$((N * (N + 1) / 2))
  echo $((2 * F + 2 * n - 2))
}

# name | runs | arguments
cases=(
  "remat --help|$runs|--help"
  "simulate chain:16|$runs|simulate --model chain:16"
  "model chain:10^6|$(((runs + 1) / 2))|model --model chain:1000000"
  "simulate chain:10^6 store-all,sqrt|$(((runs + 1) / 2))|simulate --model chain:1000000 --strategy store-all,sqrt"
  "simulate chain:3000 recompute-all|$(((runs + 2) / 3))|simulate --model chain:3000 --strategy recompute-all"
  "run resnet:18:16:32:8:10:bf16 on the CPU|$(((runs + 2) / 3))|run --model resnet:18:16:32:8:10:bf16 --strategy store-all,sqrt --repeat 3 --backend cpu"
  # GPT-2's vocabulary: the cross-entropy keeping its log-probabilities over 64 x 50,257 logits (docs/run.md).
  "run gpt:1:64:4:16:4:bf16 on the CPU|$(((runs + 4) / 5))|run --model gpt:1:64:4:16:4:bf16 --strategy store-all,sqrt --repeat 1 --backend cpu"
)

# Wall-clock medians depend on how busy the machine is; the CPU time (user +
# system, hyperfine's mean) much less so: both are shown.
printf '| command | median | min | max | CPU (user+sys) | max RSS |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r name n args <<<"$c"
  # shellcheck disable=SC2086
  # -N: no intermediate shell, whose start-up would count in the short commands.
  hyperfine --style none --warmup 1 --runs "$n" --export-json "$tmp/t.json" -N "$remat $args" >/dev/null
  read -r median min max cpu < <(jq -r '.results[0] | "\(.median) \(.min) \(.max) \(.user + .system)"' "$tmp/t.json")
  # shellcheck disable=SC2086
  /usr/bin/time -f '%M' -o "$tmp/rss" "$remat" $args >/dev/null 2>&1
  rss_kb=$(tail -n 1 "$tmp/rss")
  awk -v name="$name" -v med="$median" -v lo="$min" -v hi="$max" -v cpu="$cpu" -v kb="$rss_kb" 'BEGIN {
    printf "| `%s` | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f MB |\n", name, med * 1000, lo * 1000, hi * 1000, cpu * 1000, kb / 1024 }'
  if [[ $name == *recompute-all ]]; then
    echo "$median $cpu" >"$tmp/recompute"
  fi
done
instr=$(recompute_all_instructions 3000)
read -r median cpu <"$tmp/recompute"
awk -v i="$instr" -v s="$median" -v c="$cpu" 'BEGIN {
  printf "\nrecompute-all on chain:3000: %d instructions, end to end %.1f M/s (median wall), %.1f M/s (CPU)\n", i, i / s / 1e6, i / c / 1e6 }
'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
