#!/usr/bin/env bash
# Builds the model-loader fuzz targets with clang-14 (libFuzzer, ASan, UBSan) in
# build-fuzz/ and runs each for SECONDS (default 300) with one job, one after
# the other (CI machines have 2 shared cores). Seeds: resources/models/*.json and
# tests/fuzz/corpus/onnx/ (tiny_mlp.onnx from tests/io/make_onnx_cases.py, the
# others PyTorch exports of tests/io/onnx_export.py). Crash inputs land in
# build-fuzz/crashes/<target>/; keep each, once fixed, in tests/io/fuzz_regressions/.
#   tools/fuzz.sh [SECONDS] [json|onnx|all]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-300}
WHICH=${2:-all}
OUT=build-fuzz
mkdir -p "$OUT"
CXX=${CXX_FUZZ:-clang++-14}
FLAGS=(-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)
CORE=(core/model/op.cpp core/model/op_rules.cpp core/model/model.cpp core/io/atomic_file.cpp core/io/json_model.cpp)

build() {  # name, extra sources and flags...
  local name=$1; shift
  if [[ ! -x $OUT/$name || -n $(find core/model/op.cpp core/model/op_rules.cpp core/model/model.cpp core/io tests/fuzz -newer "$OUT/$name" -print -quit) ]]; then
    echo "building $OUT/$name"
    "$CXX" "${FLAGS[@]}" -o "$OUT/$name" "tests/fuzz/$name.cpp" "${CORE[@]}" "$@"
  fi
}

run() {  # name, seed dirs (relative to the repository)...
  local name=$1; shift
  local root=$PWD seeds=()
  for d in "$@"; do seeds+=("$root/$d"); done
  mkdir -p "$OUT/corpus/$name" "$OUT/crashes/$name"
  echo "running $name for ${SECS}s"
  # From $OUT: with -jobs, libFuzzer writes its fuzz-N.log into the current directory.
  (cd "$OUT" && "./$name" -jobs=1 -workers=1 -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="crashes/$name/" -print_final_stats=1 "corpus/$name" "${seeds[@]}" > "$name.log" 2>&1 || true)
  mv -f "$OUT/fuzz-0.log" "$OUT/$name.run.log" 2>/dev/null || true
  grep -E "^Done|ERROR|SUMMARY|stat::" "$OUT/$name.run.log" || true
  echo "crash/timeout/oom inputs: $(ls "$OUT/crashes/$name" | wc -l) (in $OUT/crashes/$name)"
}

if [[ $WHICH == all || $WHICH == json ]]; then
  build fuzz_json_model
  run fuzz_json_model resources/models
fi
if [[ $WHICH == all || $WHICH == onnx ]]; then
  [[ -f /usr/include/onnx/onnx_pb.h ]] || { echo "no libonnx-dev: skipping fuzz_onnx_model"; exit 0; }
  build fuzz_onnx_model core/io/onnx_model.cpp core/io/onnx_patterns.cpp -DREMAT_HAVE_ONNX -DONNX_NAMESPACE=onnx -DONNX_ML=1 -lonnx -lonnx_proto -lprotobuf
  run fuzz_onnx_model tests/fuzz/corpus/onnx
fi
