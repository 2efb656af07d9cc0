"""Issue 33's peak gap (gpu/torch_goals.py): where PyTorch's activation peak
and remat's differ by more than 5 %, one PyTorch step recorded with the CUDA
allocator's history and held against remat's prediction, op by op
(docs/gpu.md#issue-33s-goal-table)."""
import gzip
import json
import os
import pickle
import shutil
import sys
import traceback

from goals_common import fmt, free_cached, run

ENGINE_FRAME = {"filename": "torch/csrc/autograd/engine.cpp", "line": 0,
                "name": "torch::autograd::Engine::evaluate_function (the engine's thread: no Python frames)"}


def mark_engine_entries(snap):
    """Entries without frames come from autograd's engine thread (Python stacks
    only): name it, so compare-snapshot splits the phases where the backward
    starts. Returns how many were marked."""
    n = 0
    for trace in snap.get("device_traces", []):
        for e in trace:
            if e.get("action") in ("alloc", "free_requested", "free_completed") and not e.get("frames"):
                e["frames"] = [ENGINE_FRAME]
                n += 1
    return n


def record_step(torch, dev, step, path, levels):
    """One step recorded (CUDA): the allocator's history into the snapshot `path`,
    and each op's level via levels["read"]."""
    step.zero_grads()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    levels["read"] = lambda: torch.cuda.memory_allocated() - before
    try:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=1000000)
    except TypeError:  # an older 2.x signature
        torch.cuda.memory._record_memory_history(True)
    try:
        step()
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(path)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
        levels["read"] = None
    with open(path, "rb") as f:
        snap = pickle.load(f)
    marked = mark_engine_entries(snap)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return f"recorded on the GPU; {marked} entries of autograd's engine thread marked as its"


def record(torch, dev, remat, step, snap, levels, source, strategy):
    if dev.type == "cuda":
        try:
            return record_step(torch, dev, step, snap, levels)
        except SystemError:
            # PyTorch 2.11 on the H100 (2026-11-28): every checkpointed step
            # recorded with Python stacks failed so ("run_backward returned NULL
            # without setting an exception"). Non-reentrant checkpoint stops a
            # recomputation early by raising inside a saved-tensor hook, which
            # the recorder's stack capture seems to lose; record once more with
            # early stop off (the whole region recomputed: its tail's outputs
            # come and go in the curve) and say so.
            import torch.utils.checkpoint as ckpt
            es = getattr(ckpt, "set_checkpoint_early_stop", None)
            if es is None:
                raise
            traceback.print_exc(file=sys.stdout)
            levels["reset"]()
            free_cached(torch, dev)
            with es(False):
                how = record_step(torch, dev, step, snap, levels)
            return how + "; recorded again with torch.utils.checkpoint's early stop off, the first recording failed"
    # No allocator history on the CPU: remat's own predicted snapshot stands in,
    # and the op levels read 0; the paths run, the figures are not PyTorch's.
    levels["read"] = lambda: 0
    step.zero_grads()
    step()
    levels["read"] = None
    run([remat, "export", "-m", source, "-s", strategy, "--memory-snapshot", snap], "remat export")
    return "CPU dry run: remat's predicted snapshot in place of a recording"


def predicted_levels(remat, source, strategy, in_bytes, path):
    """remat's predicted level (bytes above what was resident before the step, the
    input left out) after each op's first forward and when each gradient is
    allocated, from its predicted snapshot (`remat export --memory-snapshot`)."""
    run([remat, "export", "-m", source, "-s", strategy, "--memory-snapshot", path], "remat export")
    with open(path) as f:
        events = json.load(f)["device_traces"][0]
    os.remove(path)
    level, fwd, grad = 0, {}, {}
    for e in events:
        if e["action"] == "alloc":
            level += e["size"]
        elif e["action"] == "free_completed":
            level -= e["size"]
        else:
            continue
        label = e["frames"][0]["name"] if e.get("frames") else ""
        if label.startswith("fwd ") and "(recompute)" not in label:
            fwd.setdefault(label[4:].split(" (storage of")[0], level - in_bytes)
        elif label.startswith("grad "):
            grad.setdefault(label[5:].split(" (bwd ")[0], level - in_bytes)
    return fwd, grad


def op_table(ops, torch_fwd, torch_grad, remat_fwd, remat_grad, peak):
    """Rows (phase, op, name, kind, torch bytes, remat bytes) in PyTorch's order of
    events, and the rows where the difference moves by 1 % of PyTorch's peak or more."""
    rows = [("fwd", v, ops[v]["name"], ops[v]["kind"], b, remat_fwd.get(ops[v]["name"])) for v, b in torch_fwd]
    rows += [("grad", v, ops[v]["name"], ops[v]["kind"], b, remat_grad.get(ops[v]["name"])) for v, b in torch_grad]
    step = max(1, (peak or 0) // 100)
    moved, last = [], 0
    for r in rows:
        if r[4] is None or r[5] is None:
            continue
        d = r[4] - r[5]
        if abs(d - last) >= step:
            moved.append(r + (d - last,))
            last = d
    return rows, moved


def gap_report(torch, dev, remat, case, variant, strategy, step, ops, source, in_bytes, t_act, r_act, out):
    """The snapshot, compare-snapshot's text and the op table for one case and variant (remat's strategy)."""
    tag = f"{case['name'].replace(':', '-')}-{strategy}"
    os.makedirs(os.path.join(out, "snapshots"), exist_ok=True)
    os.makedirs(os.path.join(out, "peak_gap"), exist_ok=True)
    snap = os.path.join(out, "snapshots", tag + ".pickle")
    torch_fwd, torch_grad, levels = [], [], {"read": None, "reset": lambda: None}
    if ops is not None:
        # Each op's level: after its forward (the first time), and when its
        # gradient is computed (a hook on its output).
        seen_fwd, seen_grad = set(), set()

        def reset():  # a recording that failed is recorded again from scratch
            seen_fwd.clear(), seen_grad.clear(), torch_fwd.clear(), torch_grad.clear()
        levels["reset"] = reset

        def on_op(v, y):
            if levels["read"] is None or v in seen_fwd:
                return
            seen_fwd.add(v)
            torch_fwd.append((v, levels["read"]()))
            if y.requires_grad:
                def hook(g, v=v):
                    if v not in seen_grad and levels["read"] is not None:
                        seen_grad.add(v)
                        torch_grad.append((v, levels["read"]()))
                y.register_hook(hook)
        step.set_on_op(on_op)
    try:
        how = record(torch, dev, remat, step, snap, levels, source, strategy)
    finally:
        if ops is not None:
            step.set_on_op(None)
    svg = os.path.join(out, "peak_gap", tag + ".svg")
    text = run([remat, "compare-snapshot", "-m", source, "-s", strategy, snap, "--svg", svg], "remat compare-snapshot")
    cmp = json.loads(run([remat, "compare-snapshot", "-m", source, "-s", strategy, snap, "--json"],
                         "remat compare-snapshot --json"))
    lines = [f"## {case['name']}, {strategy} (PyTorch: {variant}, deterministic)", "",
             f"Activation peak: PyTorch {fmt(t_act)} MiB, remat {fmt(r_act)} MiB. Snapshot: {how}.", "",
             "`remat compare-snapshot -m " + os.path.basename(source) + f" -s {strategy} {tag}.pickle`:", "", "```",
             text.rstrip(), "```"]
    if ops is not None:
        rf, rg = predicted_levels(remat, source, strategy, in_bytes, os.path.join(out, "peak_gap", tag + ".pred.json"))
        rows, moved = op_table(ops, torch_fwd, torch_grad, rf, rg, cmp.get("measured_peak_bytes"))
        with open(os.path.join(out, "peak_gap", tag + ".tsv"), "w") as f:
            f.write("phase\top\tname\tkind\ttorch_bytes\tremat_bytes\n")
            for r in rows:
                f.write("\t".join("" if x is None else str(x) for x in r) + "\n")
        lines += ["", f"Op by op (MiB above the step's start; remat's predicted level, its input left out): "
                  f"{len(torch_fwd)} forward ops and {len(torch_grad)} gradients recorded, all in {tag}.tsv; "
                  "the ops where PyTorch's excess over remat moves by 1 % of its peak or more:", "",
                  "| phase | op | name | kind | PyTorch | remat | PyTorch − remat | moved by |",
                  "|---|---:|---|---|---:|---:|---:|---:|"]
        lines += [f"| {p} | {v} | {n} | {k} | {fmt(t)} | {fmt(r)} | {fmt(t - r)} | {fmt(m)} |"
                  for p, v, n, k, t, r, m in moved]
    with open(os.path.join(out, "peak_gap", tag + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Kept compressed (Python stacks repeat: a tenth of the size), so that many
    # cases' recordings still fit what a device call brings back.
    with open(snap, "rb") as f, gzip.open(snap + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(snap)
    cmp = {k: v for k, v in cmp.items() if not isinstance(v, list) or k == "explanation"}  # the curves: in the .svg
    return {"file": f"peak_gap/{tag}.txt", "compare": cmp, "fwd_levels": len(torch_fwd),
            "grad_levels": len(torch_grad), "ops": None if ops is None else len(ops)}
