#!/usr/bin/env python3
"""Issue 29's front goal, as a user checks it with the CLI: `remat sweep` over
10 budgets, from store-all's peak down to the least peak of the registered
strategies, and at each budget every registered strategy whose peak fits it
(store-all, recompute-all, sqrt, auto, selective, attention-core, blocks,
blocks:2, every-k:2,3,4,8,16,32, each where the model has what it needs).
Counts the budgets where one of them recomputes less than the sweep's point
(the goal: none) and the budgets without a point. Prints a Markdown table.

    tests/bench/sweep_front.py [--remat build/app/remat] [--seconds 5] MODEL...
"""
import argparse
import json
import subprocess
import sys
import time

REGISTERED = ["store-all", "recompute-all", "sqrt", "auto", "selective", "attention-core", "blocks", "blocks:2",
              "every-k:2", "every-k:3", "every-k:4", "every-k:8", "every-k:16", "every-k:32"]


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"sweep_front.py: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def named_points(remat, model):
    # One strategy at a time: one without the structure it needs fails alone.
    points = []
    for spec in REGISTERED:
        out = subprocess.run([remat, "simulate", "-m", model, "--strategy", spec, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            continue
        s = json.loads(out.stdout)["strategies"][0]
        points.append((spec, s["peak_bytes"], s["recompute_flops"]))
    return points


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remat", default="build/app/remat")
    ap.add_argument("--seconds", type=int, default=5, help="optimal's search time per budget (remat sweep --seconds)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print("| model | budgets | sweep wall s | above a registered strategy | without a point | registered points |")
    print("|---|---|---|---|---|---|")
    for model in a.models:
        named = named_points(a.remat, model)
        hi = next(p for s, p, _ in named if s == "store-all")
        lo = min(p for _, p, _ in named)
        budgets = [lo + (hi - lo) * i // 9 for i in range(10)]
        start = time.monotonic()
        sweep = run([a.remat, "sweep", "-m", model, "--budgets", ",".join(map(str, budgets)), "--seconds",
                     str(a.seconds), "--json"])
        wall = time.monotonic() - start
        above = missing = 0
        for point in sweep["budgets"]:
            if not point["feasible"]:
                missing += 1
                continue
            for spec, peak, flops in named:
                if peak <= point["budget_bytes"] and flops < point["recompute_flops"]:
                    above += 1
                    print(f"{model} at {point['budget_bytes']} bytes: {spec} recomputes {flops:.6g} FLOPs, "
                          f"the sweep's {point['spec']} {point['recompute_flops']:.6g}", file=sys.stderr)
        print(f"| {model} | {len(sweep['budgets'])} | {wall:.1f} | {above} | {missing} | {len(named)} |")


if __name__ == "__main__":
    main()
