"""What the Python checks of the bridge share: one line per check ("ok" or
"FAIL"), the --remat/--out arguments ctest passes, and the exit code ctest
reads (1 when any check failed)."""
import argparse
import os
import shutil

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
