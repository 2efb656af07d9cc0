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
# A recording without stacks has no frames at all: record_step writes a
# 'snapshot' entry into the allocator's trace when torch.autograd.backward is
# called, and the entries after it get this frame (compare-snapshot's test for
# the backward: a torch/autograd file, a name with "backward").
BACKWARD_FRAME = {"filename": "torch/autograd/__init__.py", "line": 0,
                  "name": "backward (marked: recorded without stacks, after the 'snapshot' entry "
                          "written when torch.autograd.backward was called)"}
# How record_step records, in the order record tries them. "python": the
# allocator keeps the Python stack of every alloc and free (the engine
# thread's entries have none: marked). "none": no stacks (context=None), the
# one setting under which the allocator calls no Python at all. PyTorch 2.11
# (H100 and H200, 2026-11-28) failed with SystemError ("returned NULL without
# setting an exception") capturing the stacks of a checkpointed step's
# recomputation, which runs Python (a saved-tensor hook) on autograd's engine
# thread; with checkpoint's early stop off it failed the same way.
STACKS = ("python", "none")


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


def mark_backward_after_marker(snap):
    """A recording without stacks: the alloc and free entries after the first
    'snapshot' entry (record_step's, when torch.autograd.backward was called)
    get BACKWARD_FRAME, so compare-snapshot splits the phases there and not at
    the peak. Returns how many were marked (0 without a marker)."""
    n = 0
    for trace in snap.get("device_traces", []):
        after = False
        for e in trace:
            if e.get("action") == "snapshot":
                after = True
            elif after and e.get("action") in ("alloc", "free_requested", "free_completed"):
                e["frames"] = [BACKWARD_FRAME]
                n += 1
    return n


class backward_marker:
    """Within it, the first call of torch.autograd.backward (Tensor.backward
    calls it by that name) first calls mark(); the function is put back on exit."""

    def __init__(self, torch, mark):
        self.torch, self.mark, self.real = torch, mark, None

    def __enter__(self):
        self.real = real = self.torch.autograd.backward
        done = []

        def backward(*args, **kwargs):
            if not done:
                done.append(1)
                self.mark()
            return real(*args, **kwargs)
        self.torch.autograd.backward = backward
        return self

    def __exit__(self, *exc):
        self.torch.autograd.backward = self.real
        return False


def record_step(torch, dev, step, path, levels, stacks="python"):
    """One step recorded (CUDA): the allocator's history into the snapshot `path`,
    and each op's level via levels["read"]. stacks: one of STACKS."""
    mem = torch.cuda.memory
    python = stacks == "python"
    step.zero_grads()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    levels["read"] = lambda: torch.cuda.memory_allocated() - before
    try:
        mem._record_memory_history(enabled="all", context="all" if python else None, stacks="python", max_entries=1000000)
    except TypeError:  # PyTorch 2.0's signature
        mem._record_memory_history(True, record_context=python, trace_alloc_max_entries=1000000,
                                   trace_alloc_record_context=python)
    try:
        if python:
            step()
        else:
            # _snapshot() writes a 'snapshot' entry into the trace: where the backward starts.
            with backward_marker(torch, mem._snapshot):
                step()
        torch.cuda.synchronize()
        mem._dump_snapshot(path)
    finally:
        mem._record_memory_history(enabled=None)
        levels["read"] = None
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if python:
        marked = mark_engine_entries(snap)
    else:
        marked = mark_backward_after_marker(snap)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    if python:
        return f"recorded on the GPU with Python stacks; {marked} entries of autograd's engine thread marked as its"
    how = "recorded on the GPU without stacks (context=None: no entry names its source line)"
    if marked:
        return how + (f"; the {marked} entries after the 'snapshot' entry written when torch.autograd.backward "
                      "was called marked as the backward's")
    return how + ("; no 'snapshot' entry from torch.autograd.backward, so compare-snapshot splits forward and "
                  "backward at the peak")


def record(torch, dev, remat, step, snap, levels, source, strategy):
    """The step recorded into `snap`; returns how, for the report. On the GPU,
    record_step with each of STACKS in turn while it fails with SystemError
    (each failure's traceback printed; the last one raised)."""
    if dev.type == "cuda":
        failed = []
        for i, stacks in enumerate(STACKS):
            if i:
                # The failed try's op levels and cached blocks go: recorded again from scratch.
                levels["reset"]()
                free_cached(torch, dev)
            try:
                how = record_step(torch, dev, step, snap, levels, stacks)
            except SystemError as e:
                if i + 1 == len(STACKS):
                    raise
                traceback.print_exc(file=sys.stdout)
                failed.append(f"; the recording with {stacks} stacks failed (SystemError: {e})")
                continue
            return how + "".join(failed)
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
