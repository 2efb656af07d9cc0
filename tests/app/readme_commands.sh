#!/usr/bin/env bash
# Every `build/app/remat …` example of README.md runs and exits 0, so the
# README cannot drift from the CLI (a preset spec the parser came to refuse
# did once). Lines that need a file of the user's (model.json, my_model.py,
# resnet18.onnx, plan.json, step.pickle) are left out, and so is the one that
# draws the README's own figure into resources/; with --no-render, so are the
# exports (a build without the GUI has no pictures).
# Usage: readme_commands.sh REMAT REPO [--no-render]
set -uo pipefail
remat=$(realpath "$1") repo=$(realpath "$2") render=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The examples name repository files from its root (tests/…, resources/…) and
# write theirs (timelines.csv, t.svg, …) to the working folder: a scratch one.
ln -s "$repo/tests" "$work/tests"
ln -s "$repo/resources" "$work/resources"
cd "$work" || exit 1
# One line per example: a line ending in a backslash goes on with the next.
mapfile -t lines < <(awk '/^```/{inside=!inside; next}
  inside && (cont || /^build\/app\/remat /) {
    line = line (cont ? " " : "") $0; cont = sub(/[ ]*\\$/, "", line)
    if (!cont) { print line; line = "" }
  }' "$repo/README.md")
((${#lines[@]} >= 20)) || { echo "found only ${#lines[@]} examples in README.md: has its layout changed?"; exit 1; }
failed=0 ran=0
for line in "${lines[@]}"; do
  cmd=${line%%  #*}                           # the comment after two spaces
  case $cmd in *model.json*|*my_model*|*resnet18.onnx*|*plan.json*|*step.pickle*|*" resources/"*.gif*) continue ;; esac
  [[ $render == --no-render && $cmd == *" export "* ]] && continue
  read -ra argv <<<"${cmd#build/app/remat }"  # the examples quote nothing
  if ! "$remat" "${argv[@]}" >out.txt 2>&1; then
    echo "README example failed: $cmd"
    tail -3 out.txt
    failed=1
  fi
  ran=$((ran + 1))
done
echo "$ran README examples ran"
exit "$failed"
