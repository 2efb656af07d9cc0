#!/usr/bin/env python3
"""`remat run --trace` validated against the Trace Event Format (the JSON
object form Chrome's about:tracing and Perfetto load): required keys per
phase, one complete slice per instruction laid end to end, the recompute flags
counted against remat simulate's recompute steps, the predicted counter equal
to the simulated timeline, the measured counter never below it (it is the
allocator's bytes in use less the baseline: the tensors, their rounding, the
scratch), and --trace leaving the run's own figures unchanged.

  test_run_trace.py --remat PATH --out DIR"""
import json
import numbers
import os
import subprocess
import sys

from harness import check, parse_args, summary  # noqa: E402


REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "C": ("name", "ph", "ts", "pid", "args"),
            "M": ("name", "ph", "pid", "args")}


def validate(doc):
    check(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "a JSON object with a traceEvents list")
    bad = []
    for e in doc["traceEvents"]:
        keys = REQUIRED.get(e.get("ph"))
        if keys is None or any(k not in e for k in keys):
            bad.append(e)
            continue
        if e["ph"] in ("X", "C") and not (isinstance(e["ts"], numbers.Number) and e["ts"] >= 0):
            bad.append(e)
        if e["ph"] == "X" and not (isinstance(e["dur"], numbers.Number) and e["dur"] >= 0):
            bad.append(e)
        if e["ph"] == "C" and not all(isinstance(v, numbers.Number) for v in e["args"].values()):
            bad.append(e)
        if not isinstance(e["pid"], int) or not isinstance(e.get("tid", 0), int):
            bad.append(e)
    check(not bad, f"every event has its phase's required keys and types ({bad[:1]})")


def main():
    args = parse_args()
    model, strategies = "mlp:4:64:8", "store-all,sqrt,recompute-all"
    path = os.path.join(args.out, "trace.json")
    run = subprocess.run([args.remat, "run", "--model", model, "--strategy", strategies, "--repeat", "2",
                          "--backend", "cpu", "--json", "--trace", path], capture_output=True, text=True)
    check(run.returncode == 0, f"remat run --trace exits 0 ({run.stderr.strip()})")
    plain = subprocess.run([args.remat, "run", "--model", model, "--strategy", strategies, "--repeat", "2",
                            "--backend", "cpu", "--json"], capture_output=True, text=True, check=True)
    sims = json.loads(subprocess.run([args.remat, "simulate", "--model", model, "--strategy", strategies, "--json"],
                                     capture_output=True, text=True, check=True).stdout)["strategies"]
    with open(path) as f:
        doc = json.load(f)
    validate(doc)
    runs = json.loads(run.stdout)["strategies"]
    for a, b in zip(runs, json.loads(plain.stdout)["strategies"]):
        check(a["allocator_peak_bytes"] == b["allocator_peak_bytes"] and a["tracked_peak_bytes"] == b["tracked_peak_bytes"],
              f"{a['name']}: --trace leaves the measured peaks as they are ({a['allocator_peak_bytes']})")
    events = doc["traceEvents"]
    for pid, sim in enumerate(sims, start=1):
        name = sim["name"]
        xs = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
        check(len(xs) == sim["instructions"], f"{name}: one slice per instruction ({len(xs)} == {sim['instructions']})")
        ends = [e["ts"] + e["dur"] for e in xs[:-1]]
        check(all(abs(e["ts"] - end) <= 1e-6 * max(1.0, end) for e, end in zip(xs[1:], ends)),
              f"{name}: slices laid end to end")
        check(all({"op", "op_kind", "kind", "recompute"} <= set(e["args"]) for e in xs), f"{name}: slices carry op, kinds, recompute")
        # The host's time in each instruction's call, within its slice (the marks
        # are taken around the call; --trace's own bookkeeping falls outside it).
        issue = [e["args"].get("issue_us") for e in xs]
        check(all(isinstance(u, numbers.Number) and 0 <= u <= e["dur"] * (1 + 1e-9) + 1.0 for u, e in zip(issue, xs)),
              f"{name}: each slice carries its host issue time, within the slice")
        rec = sum(1 for e in xs if e["args"]["recompute"])
        check(rec == sim["recompute_steps"], f"{name}: {rec} recompute slices == recompute steps {sim['recompute_steps']}")
        pred = [e["args"]["bytes"] for e in events if e["ph"] == "C" and e["pid"] == pid and e["name"] == "resident bytes (predicted)"]
        check(pred == sim["timeline"], f"{name}: the predicted counter is the simulated timeline")
        meas = [e["args"]["bytes"] for e in events if e["ph"] == "C" and e["pid"] == pid and e["name"] == "resident bytes (measured)"]
        check(len(meas) == len(pred) and all(m >= p for m, p in zip(meas, pred)),
              f"{name}: a measured counter per instruction, never below the prediction")
        names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["pid"] == pid and e["name"] == "process_name"]
        check(len(names) == 1 and name in names[0], f"{name}: the process is named after the strategy")

    for bad in (os.path.join(args.out, "trace.txt"), os.path.join(args.out, "no", "such", "dir", "t.json")):
        out = subprocess.run([args.remat, "run", "--model", model, "--strategy", "sqrt", "--trace", bad],
                             capture_output=True, text=True)
        check(out.returncode == 2 and out.stderr.count("\n") == 1 and "--trace" in out.stderr and not out.stdout
              and not os.path.exists(bad),
              f"--trace {os.path.basename(bad)}: exit 2 before running ({out.stderr.strip()})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
