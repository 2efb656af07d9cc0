#!/usr/bin/python3
"""`remat run` on the CPU against PyTorch CPU running the same model, store-all
and sqrt (torch.utils.checkpoint at remat's sqrt checkpoints), one thread each.

remat: `remat run --model M --strategy store-all,sqrt --backend cpu --repeat R
--json`: time_ms is the median of R timed training steps (forward and backward
of the whole schedule, after a warm-up); the command's own wall time, end to
end (model build, parameter init, warm-up, R runs), is printed too.
PyTorch: the graph from `remat model --write` rebuilt op for op (the
cross-check's apply_op), float32, torch.set_num_threads(1); a step is forward,
loss and backward with fresh parameter gradients; the median of R steps after
one warm-up. Under sqrt, every segment between remat's sqrt cuts (op ids
k, 2k, ... with k = ceil(sqrt(ops after the input))) but the last runs inside
torch.utils.checkpoint (use_reentrant=False), taking the earlier tensors it
reads as inputs and returning those later ops read: checkpoint_sequential's
segments, and the ones remat's sqrt drops. PyTorch's checkpoint recomputes a
segment whole, its cut op too; remat's schedule recomputes only what a
backward reads. So a third PyTorch row, same-ops, wraps each run of
consecutive ops remat's sqrt recomputes (from `remat run --trace`) in its own
checkpoint: PyTorch then recomputes exactly remat's ops, and the two ratios
over store-all differ only by what each side's recomputation costs.

Usage: tests/with_torch_python.sh tests/bench/bench_run_vs_torch.py --remat build/app/remat
         [--model resnet:18:16:64:8:10 ...] [--repeat 7] [--rounds 5]
GPTs (token ids, learned positions, causal attention) too: dropout in PyTorch
draws its own masks (the time does not depend on which elements are kept).
A measurement, never a test.
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exec"))
from torch_crosscheck import apply_op  # noqa: E402


def remat_times(remat, model, repeat):
    cmd = [remat, "run", "--model", model, "--strategy", "store-all,sqrt", "--backend", "cpu",
           "--repeat", str(repeat), "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    return {s["name"].rstrip("*"): s["time_ms"] for s in json.loads(out)["strategies"]}, wall


def remat_recomputed(remat, model, tmp):
    """The op ids sqrt's schedule recomputes, from `remat run --trace` (one run)."""
    path = os.path.join(tmp, "trace.json")
    subprocess.run([remat, "run", "--model", model, "--strategy", "sqrt", "--backend", "cpu",
                    "--repeat", "1", "--trace", path], check=True, capture_output=True)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return {e["args"]["op_id"] for e in events
            if e.get("ph") == "X" and e.get("args", {}).get("recompute")}


def torch_step_fn(ops, mode, recomputed, device="cpu", keep_grads=False, forward_ctx=None, on_op=None):
    """A training step of the graph (ops, from `remat model --write`) under plan(mode),
    on device. keep_grads: the parameter gradients stay allocated and the step
    adds into them; step.zero_grads() zeroes them, outside what a caller times
    (as remat zeroes its own before a run's marks), and a GPU comparison wants
    them resident. Else each step drops them first. forward_ctx: a context
    manager factory the forward and the loss run in (torch.autocast for mixed
    precision; the backward runs outside it, as PyTorch recommends). on_op(v, y):
    called after op v computed y (again when a checkpoint recomputes it)."""
    params = {}
    shapes = {}

    def param(v, slot):
        key = f"{v}.{slot}"
        if key not in params:
            raise KeyError(key)
        return params[key]

    # Parameters: remat's shapes (ParamSpec), drawn once; values do not change the time.
    n = len(ops) - 1
    for op in ops:
        v, kind = op["id"], op["kind"]
        if kind == "Conv":
            cin = shapes[op["inputs"][0]][1]
            w = [op["channels"], cin // op.get("groups", 1)] + op["kernel"]
            params[f"{v}.weight"] = (torch.rand(w) - 0.5).requires_grad_()
            if op.get("bias", True):
                params[f"{v}.bias"] = (torch.rand(op["channels"]) - 0.5).requires_grad_()
        elif kind in ("Linear", "Dense"):
            params[f"{v}.weight"] = (torch.rand(op["shape"][-1], shapes[op["inputs"][0]][-1]) - 0.5).requires_grad_()
            if op.get("bias", True):
                params[f"{v}.bias"] = (torch.rand(op["shape"][-1]) - 0.5).requires_grad_()
        elif kind == "Embedding":
            params[f"{v}.weight"] = (0.1 * torch.rand(op["vocab"], op["shape"][-1])).requires_grad_()
        elif kind == "AddConst" and op.get("learned"):
            params[f"{v}.weight"] = (0.1 * torch.rand(op["const_shape"])).requires_grad_()
        elif kind in ("BatchNorm", "LayerNorm"):
            c = shapes[op["inputs"][0]][1 if kind == "BatchNorm" else -1]
            params[f"{v}.gamma"] = (1 + 0.1 * torch.rand(c)).requires_grad_()
            params[f"{v}.beta"] = (0.1 * torch.rand(c)).requires_grad_()
        if kind == "Input":
            shapes[v] = op["shape"]
        elif kind not in ("MSELoss", "SoftmaxCELoss"):
            shapes[v] = out_shape(op, shapes, ops, param)
    if ops[0].get("dtype") in ("i64", "i32"):  # token ids
        vocab = min(op["vocab"] for op in ops if op["kind"] == "Embedding")
        x0 = torch.randint(0, vocab, ops[0]["shape"])
    else:
        x0 = torch.rand(ops[0]["shape"]) * 2 - 1
    last = ops[-1]
    logits_shape = shapes[last["inputs"][0]]
    labels = torch.randint(0, logits_shape[-1], (math.prod(logits_shape[:-1]),))
    if device != "cpu":
        params = {k: p.detach().to(device).requires_grad_() for k, p in params.items()}
        x0, labels = x0.to(device), labels.to(device)

    segments = plan(n, mode, recomputed)
    readers = {}
    for op in ops:
        for u in op.get("inputs", []):
            readers.setdefault(u, []).append(op["id"])

    def run_segment(lo, hi, in_ids, out_ids, *xs):
        # Each output is dropped after its last reader in the segment, as a
        # module's forward drops its locals: holding them to the segment's end
        # would keep every tensor autograd does not save (a GPT's attention
        # scores before the softmax) alive through the forward, and PyTorch's
        # peak would measure this loop rather than PyTorch.
        acts = dict(zip(in_ids, xs))
        keep = set(out_ids)
        for v in range(lo, hi + 1):
            y = acts[v] = apply_op(ops[v], acts, param, None)
            for u in set(ops[v].get("inputs", [])) | {v}:
                if u not in keep and last_read(u, hi) <= v:
                    acts.pop(u, None)
            if on_op is not None:  # after the drops: the level a module's forward has here
                on_op(v, y)
            del y
        return tuple(acts[v] for v in out_ids)

    def last_read(u, hi):
        """The last op up to hi that reads u (u itself when none does)."""
        return max([r for r in readers.get(u, []) if r <= hi], default=u)

    def zero_grads():
        for p in params.values():
            if p.grad is not None:
                p.grad.zero_()

    def step():
        if not keep_grads:
            for p in params.values():
                p.grad = None
        with forward_ctx() if forward_ctx is not None else contextlib.nullcontext():
            acts = {0: x0}
            for lo, hi, checkpointed in segments:
                in_ids = sorted({u for v in range(lo, hi + 1) for u in ops[v].get("inputs", []) if u < lo})
                out_ids = [v for v in range(lo, hi + 1) if any(r > hi for r in readers.get(v, []))]
                xs = [acts[u] for u in in_ids]
                if checkpointed:
                    ys = checkpoint(run_segment, lo, hi, in_ids, out_ids, *xs, use_reentrant=False)
                else:
                    ys = run_segment(lo, hi, in_ids, out_ids, *xs)
                acts.update(zip(out_ids, ys))
            logits = acts[last["inputs"][0]]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels,
                                   label_smoothing=float(last.get("label_smoothing", 0.0)))
        loss.backward()

    step.zero_grads = zero_grads
    return step


def out_shape(op, shapes, ops, param):
    """op's output shape: run on meta tensors (no memory, no arithmetic), or, where
    an op has no meta kernel (PyTorch 1.13 lacks some), on zeros on the CPU."""
    for dev in ("meta", "cpu"):
        try:
            with torch.no_grad():
                acts = {u: torch.zeros(shapes[u], device=dev,
                                       dtype=torch.int64 if ops[u].get("dtype") == "i64" else torch.float32)
                        for u in op["inputs"]}
                p = (lambda v, slot: param(v, slot).detach().to("meta")) if dev == "meta" else param
                return list(apply_op(op, acts, p, None).shape)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            if dev == "cpu":
                raise
    raise AssertionError("unreachable")


def plan(n, mode, recomputed):
    """[(first op, last op, checkpointed)] covering ops 1..n-1 (the loss, op n, runs after).
    store-all: one plain segment. sqrt: torch.utils.checkpoint around every segment
    between remat's sqrt cuts (op ids k, 2k, ..., k = ceil(sqrt(n))) but the last, as
    checkpoint_sequential and remat's sqrt do: the last segment's backward comes first.
    same-ops: checkpoint around each run of consecutive ops remat's sqrt recomputes, the
    rest plain. PyTorch then recomputes exactly remat's ops; sqrt's checkpoints
    recompute each segment whole, its cut op too (its output is kept, but the segment's
    graph is rebuilt through it), so they do more work than remat's schedule."""
    if mode == "store-all":
        return [(1, n - 1, False)]
    if mode == "sqrt":
        k = max(1, math.ceil(math.sqrt(n)))
        ends = list(range(k, n - 1, k)) + [n - 1]
        return [(lo, hi, hi != n - 1) for lo, hi in zip([1] + [e + 1 for e in ends[:-1]], ends)]
    segments = []
    for v in range(1, n):
        if segments and (v in recomputed) == segments[-1][2]:
            segments[-1] = (segments[-1][0], v, segments[-1][2])
        else:
            segments.append((v, v, v in recomputed))
    return segments


def torch_time(step, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


MODES = ("store-all", "sqrt", "same-ops")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--model", action="append")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    models = a.model or ["resnet:18:16:64:8:10", "resnet:10:32:64:8:10", "gpt:4:128:4:64:8:f32:512"]
    print(f"medians of {a.rounds} rounds; a round: one `remat run --repeat {a.repeat}`, then PyTorch's "
          f"store-all, sqrt and same-ops, {a.repeat} steps each (each the median of its steps)")
    print(f"{'model':<26}{'strategy':<11}{'remat ms':>10}{'torch ms':>10}{'remat/torch':>13}")
    for m in models:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.json")
            subprocess.run([a.remat, "model", "--model", m, "--write", path], check=True, capture_output=True)
            with open(path) as f:
                ops = json.load(f)["ops"]
            recomputed = remat_recomputed(a.remat, m, tmp)
        steps = {mode: torch_step_fn(ops, mode, recomputed) for mode in MODES}
        for step in steps.values():
            step()  # warm-up
        # Rounds, so that a burst of other work on a shared machine lands in
        # one round of every strategy rather than on one strategy's block;
        # each ratio is taken within a round, then the median over rounds.
        rounds, walls = [], []
        for _ in range(a.rounds):
            r, wall = remat_times(a.remat, m, a.repeat)
            r["same-ops"] = r["sqrt"]  # remat's sqrt is the schedule same-ops reproduces
            t = {mode: torch_time(steps[mode], a.repeat) for mode in MODES}
            rounds.append((r, t))
            walls.append(wall)
        med = lambda f: statistics.median(f(r, t) for r, t in rounds)  # noqa: E731
        for s in MODES:
            rs, ts = med(lambda r, t: r[s]), med(lambda r, t: t[s])
            print(f"{m:<26}{s:<11}{rs:>10.1f}{ts:>10.1f}{med(lambda r, t: r[s] / t[s]):>13.2f}")
        for s in ("sqrt", "same-ops"):
            rr = med(lambda r, t: r[s] / r["store-all"])
            tr = med(lambda r, t: t[s] / t["store-all"])
            print(f"{m:<26}{s + '/st':<11}{rr:>10.3f}{tr:>10.3f}{100 * (rr - tr):>+12.1f} pts")
        print(f"{'':<26}remat recomputes {len(recomputed)} ops; remat run wall, end to end: "
              f"{statistics.median(walls):.2f} s for {a.repeat + 1} steps of each")


if __name__ == "__main__":
    main()
