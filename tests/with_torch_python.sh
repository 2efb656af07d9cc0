#!/usr/bin/env bash
# Runs a Python script of the test suite with the first Python that imports
# torch: $REMAT_PYTHON, python3 on PATH, Debian's /usr/bin/python3, a venv's.
# Without one the test is skipped (exit 77, CTest's SKIP_RETURN_CODE) with the
# reason, except under CI=true, where the PyTorch cross-checks are required and
# their absence is a failure.
# Usage: tests/with_torch_python.sh SCRIPT [ARGS...]
set -u
tried=()
for p in ${REMAT_PYTHON:-} python3 /usr/bin/python3 /opt/torch/.venv/bin/python3 /usr/local/bin/python3; do
  command -v "$p" >/dev/null 2>&1 || continue
  tried+=("$p")
  if "$p" -c "import torch, numpy" >/dev/null 2>&1; then
    exec "$p" "$@"
  fi
done
reason="no Python that imports torch and numpy (tried: ${tried[*]:-none}; set REMAT_PYTHON)"
if [[ ${CI:-} == true ]]; then
  echo "FAIL: CI=true requires the PyTorch cross-checks: $reason" >&2
  exit 1
fi
echo "SKIP: $reason"
exit 77
