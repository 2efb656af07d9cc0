#!/usr/bin/env bash
# Step 2 on the GPU machine: the GPU test suites (ctest label gpu) with
# REMAT_REQUIRE_CUDA=1, so that a test that would skip for want of a device
# fails instead, then the CPU executor suites and the PyTorch bridge. Usage:
# gpu/device/test.sh [OUTDIR]; log in OUTDIR/test.log. Exit 1 when any test
# failed or was skipped. REMAT_DEVICE_TEST_LABELS=gpu runs the GPU label alone
# (about 30 s: the checks to run before a measurement; the bridge takes minutes).
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}")
unpack_deps
[[ -d $build ]] || { echo "test: no build in $build: run gpu/device/build.sh first"; exit 1; }
log=$out/test.log
export REMAT_REQUIRE_CUDA=1
rc=0
(cd "$build" && ctest -L gpu --output-on-failure --no-tests=error -j 4 --timeout 300) >"$log" 2>&1 || rc=1
if [[ ${REMAT_DEVICE_TEST_LABELS:-all} == gpu ]]; then
  grep -E "tests passed|tests failed|\*\*\*" "$log" | head -40 || true
  echo "test: exit $rc, the gpu label alone (log: $log)"
  exit "$rc"
fi
# Not the ONNX imports' PyTorch cross-checks (exec_torch_crosscheck_onnx_*,
# labels exec;torch): build.sh configures with REMAT_ONNX=OFF (no libonnx on
# that machine), so `remat run` refuses their .onnx files and they would fail.
(cd "$build" && ctest -L exec -E '_onnx_' --output-on-failure -j 8 --timeout 300) \
  >>"$log" 2>&1 || rc=1
# The PyTorch bridge (capture, snapshots, traces) with this machine's PyTorch
# (2.x; Debian 12 ships 1.13, tools/torch2-check.sh brings 2.6 elsewhere).
# Which version ran goes into the log.
py=$(find_torch_python)
if [[ -n $py ]]; then
  # Its own log: a skip there (no torchvision on the machine) is not a GPU test skipped.
  echo "bridge: $("$py" -c 'import torch; print("torch", torch.__version__)')" | tee "$out/bridge.log"
  (cd "$build" && REMAT_PYTHON=$py ctest -L bridge --output-on-failure -j 4 --timeout 300) >>"$out/bridge.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed|Failed|Skipped" "$out/bridge.log" | head -20 || true
fi
grep -E "tests passed|tests failed|Failed|\*\*\*|Skipped|Not Run" "$log" | head -60 || true
# A skip is suspect here: the GPU tests fail rather than skip under
# REMAT_REQUIRE_CUDA=1, and the CPU suites skip nothing on a machine with a GPU
# but the tests that need an AddressSanitizer build (CI's sanitizer pass runs them).
if grep "(Skipped)" "$log" | grep -vq "UnderAddressSanitizer"; then echo "test: some tests were skipped"; rc=1; fi
echo "test: exit $rc (log: $log)"
exit "$rc"
