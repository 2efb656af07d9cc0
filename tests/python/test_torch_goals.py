#!/usr/bin/env python3
"""gpu/torch_goals.py (issue 33's goal table) as a dry run on the CPU: the tiny
cases (a bf16 GPT, the captured Llama-style decoder, a bf16 ResNet-18, an f32
GPT) through every code path the GPU run takes but the CUDA-only calls: the
graphs and the module under torch.autocast("cpu", bfloat16), PyTorch's
deterministic mode and its defaults, the capture, remat's runs, the table, the
peak-gap report (compare-snapshot on remat's predicted snapshot, which stands
in for a recording and so must differ by 0 bytes) and the per-op levels.
The engine-thread marking a GPU recording needs is checked on
test_compare_snapshot.py's snapshot with its backward frames taken away.

  test_torch_goals.py --remat PATH --out DIR"""
import json
import os
import pickle
import subprocess
import sys

from harness import check, parse_args, summary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "gpu", "torch_goals.py")
sys.path.insert(0, os.path.join(REPO, "gpu"))


def remat_json(remat, *args):
    return json.loads(subprocess.run([remat, *args], capture_output=True, text=True, check=True).stdout)


def check_engine_marking(args):
    """A recording with Python stacks only has no frames on the autograd engine's
    thread: marked, compare-snapshot finds the backward where it starts."""
    import goals_gap
    import test_compare_snapshot as tcs
    snap, start, peak_above, first_bwd = tcs.build_snapshot()
    for e in snap["device_traces"][0]:
        if e["frames"] is tcs.BWD:
            e["frames"] = []
    path = os.path.join(args.out, "engine.pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    bare = remat_json(args.remat, "compare-snapshot", "-m", "mlp:4:64:8", path, "--json")
    check(not any("autograd's backward" in line for line in bare["explanation"]),
          "without frames compare-snapshot cannot name the backward's start")
    marked = goals_gap.mark_engine_entries(snap)
    check(marked == len(snap["device_traces"][0]) - 4, f"every entry after the forward's four allocs is marked ({marked})")
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    c = remat_json(args.remat, "compare-snapshot", "-m", "mlp:4:64:8", path, "--json")
    xs = c["measured_x"]
    check(xs[first_bwd] == c["predicted_backward_instruction"] and xs[first_bwd - 1] < xs[first_bwd]
          and any("autograd's backward" in line for line in c["explanation"]),
          "marked, the backward starts on the prediction's first bwd")
    check(c["measured_peak_bytes"] == peak_above, f"the peak above the start is the events' ({c['measured_peak_bytes']})")


def check_record_retry():
    """A recording that fails with PyTorch 2.11's SystemError (a checkpointed
    step's recomputation) is recorded again with checkpoint's early stop off,
    from scratch (the op levels reset); where this PyTorch has no early-stop
    switch, the error stands."""
    import torch
    import torch.utils.checkpoint as ckpt
    import goals_gap
    calls, resets = [], []
    real = goals_gap.record_step

    def failing_once(torch_, dev, step, path, levels):
        calls.append(getattr(ckpt, "_enable_checkpoint_early_stop", None))  # the switch's global in 2.x
        if len(calls) == 1:
            raise SystemError("<built-in method run_backward> returned NULL without setting an exception")
        return "recorded"

    class Dev:
        type = "cuda"
    goals_gap.record_step = failing_once
    try:
        levels = {"read": None, "reset": lambda: resets.append(1)}
        if hasattr(ckpt, "set_checkpoint_early_stop"):
            how = goals_gap.record(torch, Dev(), None, None, "snap", levels, "m", "sqrt")
            check(calls == [True, False], f"recorded twice, the second with early stop off ({calls})")
            check(resets == [1] and how.startswith("recorded; recorded again"), f"levels reset once, said so ({how!r})")
        else:
            try:
                goals_gap.record(torch, Dev(), None, None, "snap", levels, "m", "sqrt")
                check(False, "without set_checkpoint_early_stop the SystemError stands")
            except SystemError:
                check(calls == [None] and resets == [], "without set_checkpoint_early_stop the SystemError stands")
    finally:
        goals_gap.record_step = real


def main():
    import torch_goals
    args = parse_args()
    check_engine_marking(args)
    check_record_retry()
    out = os.path.join(args.out, "goals")
    env = {k: v for k, v in os.environ.items() if k not in ("REMAT_LLAMA_MODEL", "REMAT_LLAMA_GOAL")}
    p = subprocess.run([sys.executable, SCRIPT, args.remat, "--out", out, "--device", "cpu", "--case", "tiny",
                        "--repeat", "2", "--warmups", "1"], capture_output=True, text=True, env=env)
    check(p.returncode == 0, f"the dry run exits 0 ({p.stderr.strip()[-600:]})")
    if p.returncode:
        return summary()
    with open(os.path.join(out, "goals.json")) as f:
        results = json.load(f)
    names = [r["name"] for r in results]
    check(names == ["gpt:2:32:4:16:2:bf16:64", "llama:2:32:4:8:2:64:bf16", "resnet:18:8:32:2:10:bf16",
                    "gpt:1:32:4:16:2:f32:64"], f"the tiny cases in order ({names})")
    for r in results:
        n = r["name"]
        if "error" in r:
            check(False, f"{n}: {r['error']}")
            continue
        check(r["checks"] == {"deterministic": True, "default": False},
              f"{n}: PyTorch ran deterministic, then with its defaults ({r['checks']})")
        if r["bf16"]:
            check("torch.bfloat16" in r["dtypes"], f"{n}: autocast ran ops in bf16 ({r['dtypes']})")
        else:
            check(r["dtypes"] == ["torch.float32"], f"{n}: f32 throughout ({r['dtypes']})")
        check(all(t["act"] is None and t["time"] > 0 for m in r["torch"].values() for t in m.values()),
              f"{n}: PyTorch timed, no memory figure on the CPU")
        source = r["remat_source"] if n.startswith(("gpt", "resnet")) else os.path.join(out, r["remat_source"])
        if n.startswith("gpt:2") or n.startswith("resnet"):
            check(source.endswith("bf16@cpu:64") or source.endswith("bf16@cpu"), f"{n}: remat ran autocast's CPU dtypes ({source})")
        # The Llama's checkpointed row is remat's `blocks` (PyTorch checkpoints each
        # decoder block: the same plan); the presets' is sqrt at PyTorch's sqrt cuts.
        ck = r["remat_ckpt"]
        check(ck == ("blocks" if n.startswith("llama") else "sqrt"), f"{n}: remat's checkpointed strategy is {ck}")
        sim = {s["name"]: s for s in remat_json(args.remat, "simulate", "-m", source, "-s", f"store-all,{ck}", "--json")["strategies"]}
        in_bytes = torch_goals.input_bytes(torch_goals.model_ops(args.remat, source, args.out))
        for strategy in ("store-all", ck):
            m = r["remat"][strategy]
            # The activation peak holds the tracked tensors (the prediction, the input left out) and the scratch.
            check(m["act"] >= sim[strategy]["peak_bytes"] - in_bytes and m["time"] > 0,
                  f"{n} {strategy}: remat's activation peak {m['act']} covers its prediction {sim[strategy]['peak_bytes']} less the input")
        check(r["remat"][ck]["same"] is True, f"{n}: {ck} bitwise equal to store-all")
        # No PyTorch peak on the CPU: every case gets both reports, on remat's own prediction.
        want = ["plain", "checkpointed"]
        check(sorted(r["gaps"]) == sorted(want), f"{n}: peak-gap reports for {want} ({sorted(r['gaps'])})")
        for variant, g in r["gaps"].items():
            snap = os.path.join(out, "snapshots", os.path.basename(g["file"])[:-4] + ".pickle.gz")
            check(g["compare"]["difference_bytes"] == 0 and os.path.isfile(os.path.join(out, g["file"]))
                  and os.path.isfile(snap) and not os.path.exists(snap[:-3]),
                  f"{n} {variant}: compare-snapshot on the prediction differs by 0 bytes, {g['file']} written, "
                  "the snapshot kept gzipped")
            if g["ops"] is not None:
                check(g["fwd_levels"] == g["ops"] - 2 and 0 < g["grad_levels"] <= g["fwd_levels"],
                      f"{n} {variant}: a level after each of the {g['ops'] - 2} ops' forward ({g['fwd_levels']}), "
                      f"{g['grad_levels']} at gradients")
                with open(os.path.join(out, g["file"][:-4] + ".tsv")) as f:
                    rows = f.read().splitlines()
                check(len(rows) == 1 + g["fwd_levels"] + g["grad_levels"], f"{n} {variant}: the .tsv has every level")
    with open(os.path.join(out, "goals.md")) as f:
        md = f.read()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line and "| model |" not in line]
    check(len(rows) == 16, f"goals.md: 4 cases x 2 PyTorch modes x 2 strategies = 16 rows ({len(rows)})")
    check(all(line.count("| n/a |") >= 2 for line in rows), "goals.md: PyTorch's memory n/a on the CPU, in every row")
    # remat failing (a wrapper whose `run` exits 1): PyTorch's figures stay in the
    # table, remat's cells say failed, the note names the error, the exit is 1.
    wrapper = os.path.join(args.out, "remat-run-fails")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\n[ "$1" = run ] && {{ echo "no device here" >&2; exit 1; }}\nexec "{args.remat}" "$@"\n')
    os.chmod(wrapper, 0o755)
    half = os.path.join(args.out, "half")
    p = subprocess.run([sys.executable, SCRIPT, wrapper, "--out", half, "--device", "cpu", "--case", "gpt:1:32:4:16:2:f32:64",
                        "--repeat", "1", "--warmups", "0"], capture_output=True, text=True, env=env)
    with open(os.path.join(half, "goals.md")) as f:
        md = f.read()
    rows = [line.split(" | ") for line in md.splitlines() if line.startswith("| gpt:1")]
    check(p.returncode == 1 and len(rows) == 4 and all(r[5] == "failed" and float(r[4]) > 0 for r in rows)
          and "failed: remat: RuntimeError" in md and "no device here" in md,
          f"remat failing: exit 1, PyTorch's 4 rows kept, remat's cells 'failed', the error noted ({p.returncode})")
    # A case name that is neither a group nor a case: exit 2, one line naming it.
    bad = subprocess.run([sys.executable, SCRIPT, args.remat, "--out", out, "--device", "cpu", "--case", "gpt:9"],
                         capture_output=True, text=True)
    check(bad.returncode == 2 and "--case gpt:9" in bad.stderr, f"--case gpt:9: exit 2 naming it ({bad.stderr.strip()[-200:]})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
