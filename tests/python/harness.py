"""What the Python checks of the bridge share: one line per check ("ok" or
"FAIL"), the --remat/--out arguments ctest passes, the exit code ctest reads
(1 when any check failed), and remat's CLI as the checks call it: a command,
every strategy run on the CPU, and the step rebuilt in PyTorch from a dump
(tests/exec/torch_crosscheck.py)."""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def parse_args():
    """--remat PATH (the binary under test) and --out DIR (emptied: checks that a
    refused command leaves no file must not see an earlier run's)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    return args


def summary():
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


def remat(args, *cmd, ok=False):
    """args.remat with these arguments, its output captured; with ok=True a
    command that fails raises, naming it and its message."""
    out = subprocess.run([args.remat, *cmd], capture_output=True, text=True)
    if ok and out.returncode != 0:
        raise RuntimeError(f"remat {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def simulated(args, name, path, want, strategies="store-all"):
    """`remat simulate` of the file at `path`: its model fields, None where it
    does not load (a failed check); its saved bytes checked against PyTorch's
    count `want`."""
    sim = remat(args, "simulate", "--model", path, "--strategy", strategies, "--json")
    check(sim.returncode == 0, f"{name}: the file loads and simulates ({sim.stderr.strip()[-300:]})")
    if sim.returncode != 0:
        return None
    model = json.loads(sim.stdout)["model"]
    check(model["saved_bytes"] == want, f"{name}: remat saved_bytes {model['saved_bytes']} == PyTorch's count {want}")
    return model


def run_every_strategy(args, path):
    """`remat run --strategy all` on the CPU, once after a warm-up: the process,
    and its strategies' JSON (None when it failed)."""
    run = remat(args, "run", "--model", path, "--strategy", "all", "--repeat", "1", "--backend", "cpu", "--json")
    return run, json.loads(run.stdout)["strategies"] if run.returncode == 0 else None


def not_bitwise(strategies):
    """The strategies that failed or whose loss and gradients differ from store-all's."""
    return [s["name"] for s in strategies if not (s["status"] == "ok" and s["matches_store_all"])]


def not_exact(strategies):
    """The strategies whose tracked peak is not the predicted one."""
    return [s["name"] for s in strategies if s["tracked_peak_bytes"] != s["predicted_peak_bytes"]]


def crosscheck(args, path, float32="0", strategy="sqrt"):
    """tests/exec/torch_crosscheck.py: the step under `strategy` rebuilt in
    PyTorch from remat's dump, loss and gradients compared (`float32`: the
    tolerance in multiples of PyTorch's own float32 error)."""
    return subprocess.run([sys.executable, os.path.join(HERE, "..", "exec", "torch_crosscheck.py"), "--remat",
                           args.remat, "--model", path, "--strategy", strategy, "--float32", float32],
                          capture_output=True, text=True)
