#!/usr/bin/env python3
"""Issue 33's goal table: remat against PyTorch on the same device in one call,
bf16 mixed precision first, then float32.

Cases (--case issue33, the default):
- bf16: gpt:12:768:12:1024:8:bf16 (GPT-2 small, batch 8), gpt:24:1024:16:1024:4:bf16
  (GPT-2 medium, batch 4), resnet:50:64:224:64:1000:bf16 and a captured Llama-style
  decoder (gpu/llama_goal.py, captured with remat_capture under CPU autocast, whose
  dtypes equal CUDA's for that model). PyTorch runs the f32 graph (`remat model
  --write` of the spec with :f32, op for op as tests/bench/bench_run_vs_torch.py
  rebuilds it; the Llama: the module itself) with f32 master weights, its forward
  and loss under torch.autocast(device_type, dtype=torch.bfloat16), the backward
  outside it. remat runs the spec with autocast's dtypes on that device
  (`:bf16@cuda`: the same graph as autocast runs it), or the captured file.
- float32: torch_compare.py's LARGE_CASES (ResNet-50 batch 32, GPT-2 small batch 4), no TF32.

Each case: remat's store-all and a checkpointed strategy (`remat run --json`)
against PyTorch's plain step and its torch.utils.checkpoint step holding the same
plan (graphs: sqrt, and PyTorch's checkpoint around every segment between sqrt's
cuts but the last; the Llama: remat's `blocks`, and PyTorch's checkpoint around
each decoder block), PyTorch twice:
deterministic (torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG
:4096:8, cudnn.deterministic on, cudnn.benchmark off: what remat guarantees,
the goal) and with PyTorch's defaults (reported). remat is deterministic in the
table; beside the defaults' rows it runs once more with --nondeterministic-backward
(cuDNN's fastest convolution backward, atomic embedding gradients: what PyTorch's
defaults allow), reported in the case's note.
Time: medians of CUDA events around forward + backward; activation peak: the
allocator's peak in the step less what was resident before it (torch_compare.py's
definition, the same on both sides). Goals: time <= 1.1x, activation peak <= 1x.

Peak gap: where PyTorch's activation peak (deterministic) and remat's differ by more
than 5 %, one more PyTorch step is recorded (torch.cuda.memory._record_memory_history,
Python stacks; the autograd engine's thread has none, so its entries are marked as the
engine's for compare-snapshot's phase split) and `remat compare-snapshot` holds it
against the prediction; for graph cases each op's memory level (after its forward,
when its gradient is computed) is set beside remat's predicted one. Written to
OUTDIR/peak_gap/CASE-VARIANT.txt (and .tsv, .svg); the snapshot, gzipped, to OUTDIR/snapshots/.

--device cpu: the same code paths at tiny sizes (--case tiny) under CPU autocast:
times by the wall clock, no PyTorch memory figures (CPU keeps no allocator peak),
and in place of a recorded snapshot remat's predicted one (`remat export
--memory-snapshot`), so that the comparison and the op table are exercised.

Usage: gpu/torch_goals.py PATH/TO/remat --out OUTDIR [--case issue33|tiny|NAME ...]
       [--device cuda|cpu] [--repeat N] [--no-default-mode]
Writes OUTDIR/goals.md (rewritten after each case) and prints it; exit 1 when a
case failed. The goals are reported, not enforced.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# goals_common keeps remat's environment as it is now, before the next line:
# deterministic cuBLAS needs a fixed workspace split, set before CUDA starts,
# where remat lends cuBLAS its own workspace.
from goals_common import failure, fmt, free_cached, run  # noqa: E402
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from goals_gap import gap_report  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "bench"))

# op_times.remat_by_kind: the trace of `remat run --repeat 3 --trace` holds one step.
TRACE_NOTE = "one traced step"
GAP = 0.05  # relative difference of the activation peaks that gets a snapshot


# ---- cases ------------------------------------------------------------------------

def graph_case(spec, what, bf16):
    """A preset; bf16: PyTorch runs its f32 graph under autocast, remat spec@device."""
    return {"name": spec, "what": what, "kind": "graph", "bf16": bf16, "remat_ckpt": "sqrt",
            "torch_spec": spec.replace(":bf16", ":f32") if bf16 else spec,
            "remat_spec": (lambda dev: spec.replace(":bf16", f":bf16@{dev}")) if bf16 else (lambda dev: spec)}


def llama_case(size):
    return {"name": f"llama:{size}:bf16", "what": "Llama-style decoder (gpu/llama_goal.py), captured under autocast",
            "kind": "llama", "bf16": True, "size": size,
            # PyTorch checkpoints each decoder block; remat's `blocks` is that schedule
            # (torch.utils.checkpoint around every block), so the two rows hold the same plan.
            "remat_ckpt": "blocks"}


def f32_cases():
    import torch_compare
    return [graph_case(c["spec"], c["what"], False) for c in torch_compare.LARGE_CASES]


GROUPS = {
    "issue33": lambda: [
        graph_case("gpt:12:768:12:1024:8:bf16", "GPT-2 small, 1024 tokens, batch 8", True),
        graph_case("resnet:50:64:224:64:1000:bf16", "ResNet-50, 224x224 images, batch 64, 1000 classes", True),
        # Third: its capture (started first, on the CPU) has the first two cases' time.
        llama_case("8:1024:16:1024:4:32000"),
        graph_case("gpt:24:1024:16:1024:4:bf16", "GPT-2 medium, 1024 tokens, batch 4", True),
    ] + f32_cases(),
    # The CPU dry run: every code path at sizes a test runs in seconds.
    "tiny": lambda: [
        graph_case("gpt:2:32:4:16:2:bf16:64", "tiny GPT", True),
        llama_case("2:32:4:8:2:64"),
        graph_case("resnet:18:8:32:2:10:bf16", "tiny ResNet-18", True),
        graph_case("gpt:1:32:4:16:2:f32:64", "tiny GPT, float32", False),
    ],
}


# ---- remat ------------------------------------------------------------------------

def model_ops(remat, source, out):
    path = os.path.join(out, "model.tmp.json")
    run([remat, "model", "--model", source, "--write", path], "remat model")
    with open(path) as f:
        ops = json.load(f)["ops"]
    os.remove(path)
    return ops


def input_bytes(ops):
    item = {"i64": 8, "f64": 8, "f16": 2, "bf16": 2}.get(ops[0].get("dtype", "f32"), 4)
    return item * math.prod(ops[0]["shape"])


def start_capture(case, out):
    """Starts capturing the decoder (python -m remat_capture gpu/llama_goal.py:build)
    into OUTDIR, in the background while the other cases run on the device, on all
    but 4 of the CPU's cores (the measurements' launches keep theirs); None when
    REMAT_LLAMA_MODEL names a file captured beforehand."""
    if os.environ.get("REMAT_LLAMA_MODEL"):
        return None
    path = os.path.join(out, f"llama-{case['size'].replace(':', '-')}.json")
    threads = str(max(1, (os.cpu_count() or 1) - 4))
    env = dict(os.environ, REMAT_LLAMA_GOAL=case["size"], OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
               PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(path + ".log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "remat_capture", os.path.join(HERE, "llama_goal.py") + ":build",
                             "--name", case["name"], "-o", path], stdout=log, stderr=subprocess.STDOUT, env=env)
    return {"proc": proc, "path": path, "log": log, "t0": time.perf_counter()}


def capture_llama(capture):
    """The captured file and the capture's seconds (waits for it)."""
    if capture is None:
        return os.environ["REMAT_LLAMA_MODEL"], 0.0
    rc = capture["proc"].wait()
    capture["log"].close()
    if rc != 0:
        with open(capture["path"] + ".log") as f:
            raise RuntimeError(f"capturing the Llama exited {rc}: {f.read().strip()[-800:]}")
    return capture["path"], time.perf_counter() - capture["t0"]


def remat_side(remat, source, backend, repeat, in_bytes, ckpt, nondeterministic=False):
    """{store-all, ckpt: {time, peak, act, same, loss_same, grad_error}}, the JSON fields naming a GEMM
    path, if any, and the run's nondeterministic_backward report (docs/run.md)."""
    d = json.loads(run([remat, "run", "-m", source, "-s", f"store-all,{ckpt}", "--backend", backend, "--json",
                        "--repeat", str(repeat)] + (["--nondeterministic-backward"] if nondeterministic else []),
                       "remat run"))
    by_name = {s["name"].rstrip("*"): s for s in d["strategies"]}
    out = {}
    for name in ("store-all", ckpt):
        s = by_name.get(name)
        if s is None or s.get("status") != "ok":
            raise RuntimeError(f"remat {name}: {s and s.get('status')} {s and s.get('message', '')}")
        parts = s["allocator_parts"]
        act = s["allocator_peak_bytes"] - parts["baseline_bytes"] - parts["workspace_bytes"] - in_bytes
        out[name] = {"time": s["time_ms"], "peak": s["allocator_peak_bytes"], "act": act,
                     "same": s.get("matches_store_all"), "issue": s.get("issue_ms"),
                     "loss_same": s.get("loss_matches_store_all"),
                     "grad_error": (s.get("relative_error") or {}).get("grad")}
    gemm = {k: v for k, v in d.items() if "gemm" in k.lower()}
    gemm.update({k: v for k, v in d["strategies"][0].items() if "gemm" in k.lower()})
    return out, gemm, d.get("nondeterministic_backward")


# ---- PyTorch ----------------------------------------------------------------------

def set_algorithms(torch, deterministic):
    """PyTorch's deterministic mode (the goal's) or its defaults."""
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = False


def autocast_ctx(torch, dev, bf16):
    if not bf16:
        return None
    return lambda: torch.autocast(device_type=dev.type, dtype=torch.bfloat16)


def graph_steps(torch, case, ops, dev, seen):
    """{plain, checkpointed: step}; each op's output dtype goes into `seen`."""
    from bench_run_vs_torch import torch_step_fn
    ctx = autocast_ctx(torch, dev, case["bf16"])
    steps = {}
    for variant, mode in (("plain", "store-all"), ("checkpointed", "sqrt")):
        hook = {"f": None}  # the recorded step's per-op hook (gap_report), else None

        def on_op(v, y, hook=hook):
            seen.add(str(y.dtype))
            if hook["f"] is not None:
                hook["f"](v, y)

        step = torch_step_fn(ops, mode, set(), device=dev, keep_grads=True, forward_ctx=ctx, on_op=on_op)
        step.set_on_op = lambda f, hook=hook: hook.__setitem__("f", f)
        steps[variant] = step
    return steps


def llama_steps(torch, case, dev, seen):
    """The decoder itself: plain, and torch.utils.checkpoint around each block."""
    from torch.utils.checkpoint import checkpoint
    os.environ["REMAT_LLAMA_GOAL"] = case["size"]
    import llama_goal
    net, ids, labels = llama_goal.module(dev)
    net.train()
    ctx = autocast_ctx(torch, dev, True)
    net.head.register_forward_hook(lambda m, i, y: seen.add(str(y.dtype)))

    def make(ck):
        def step():
            with ctx():
                x = net.tok(ids)
                for b in net.blocks:
                    x = checkpoint(b, x, use_reentrant=False) if ck else b(x)
                loss = llama_goal.loss(net.head(net.norm(x)), labels)
            loss.backward()
        step.zero_grads = lambda: net.zero_grad(set_to_none=False)
        return step

    return {"plain": make(False), "checkpointed": make(True)}


def measure(torch, dev, step, repeat, warmups):
    """[(ms, allocator peak, peak above what was resident)]: CUDA events and the
    allocator (torch_compare.measure_steps); on the CPU the wall clock, no memory."""
    if dev.type == "cuda":
        import torch_compare
        return torch_compare.measure_steps(torch, step, repeat, warmups)
    for _ in range(warmups):
        step.zero_grads()
        step()
    out = []
    for _ in range(repeat):
        step.zero_grads()
        t0 = time.perf_counter()
        step()
        out.append(((time.perf_counter() - t0) * 1e3, None, None))
    return out


def summarize(samples):
    times, peaks, above = zip(*samples)
    return {"time": statistics.median(times), "peak": None if peaks[0] is None else max(peaks),
            "act": None if above[0] is None else max(above)}


# ---- one case ---------------------------------------------------------------------

def run_case(torch, dev, case, args, result):
    t_start = time.perf_counter()
    backend = dev.type
    ops = None
    if case["kind"] == "llama":
        source, result["capture_s"] = capture_llama(case["capture"])
        with open(source) as f:
            in_bytes = input_bytes(json.load(f)["ops"])
    else:
        source = case["remat_spec"](backend)
        in_bytes = input_bytes(model_ops(args.remat, source, args.out))
        ops = model_ops(args.remat, case["torch_spec"], args.out)
    result["remat_source"] = source if case["kind"] != "llama" else os.path.basename(source)
    # remat first: its process has ended (and freed the device) before PyTorch
    # allocates. A side that fails leaves the other's figures in the table.
    try:
        result["remat"], result["gemm"], _ = remat_side(args.remat, source, "cuda" if backend == "cuda" else "cpu",
                                                        args.repeat, in_bytes, case["remat_ckpt"])
    except Exception as e:  # noqa: BLE001
        result["remat"], result["gemm"], result["failed"] = {"error": failure(e)}, {}, True
    # Beside PyTorch's defaults (which drop determinism): remat with
    # --nondeterministic-backward, the same strategies, in the case's note.
    if not args.no_default_mode:
        try:
            nd, _, report = remat_side(args.remat, source, "cuda" if backend == "cuda" else "cpu", args.repeat,
                                       in_bytes, case["remat_ckpt"], nondeterministic=True)
            result["remat_nondeterministic"] = {"strategies": nd, "report": report}
        except Exception as e:  # noqa: BLE001
            result["remat_nondeterministic"], result["failed"] = {"error": failure(e)}, True
    if "error" not in result["remat"]:  # on the CPU (the test) every path but the gate's effect
        result["remat_kinds"] = time_by_kind(args.remat, source, "cuda" if backend == "cuda" else "cpu")
    torch.manual_seed(1)
    seen = set()
    steps = llama_steps(torch, case, dev, seen) if ops is None else graph_steps(torch, case, ops, dev, seen)
    result["torch"] = {}
    modes = ["deterministic"] + ([] if args.no_default_mode else ["default"])
    for mode in modes:
        set_algorithms(torch, mode == "deterministic")
        result["torch"][mode] = {}
        for variant, step in steps.items():
            try:
                result["torch"][mode][variant] = summarize(measure(torch, dev, step, args.repeat, args.warmups))
            except Exception as e:  # noqa: BLE001 - e.g. an op without a deterministic kernel, out of memory
                result["torch"][mode][variant], result["failed"] = {"error": failure(e)}, True
                free_cached(torch, dev)
        result.setdefault("checks", {})[mode] = torch.are_deterministic_algorithms_enabled()
    result["dtypes"] = sorted(seen)
    # The gap, deterministic (the goal's mode): a recorded step where it exceeds GAP.
    set_algorithms(torch, True)
    result["gaps"] = {}
    for variant, strategy in (("plain", "store-all"), ("checkpointed", case["remat_ckpt"])):
        t, m = result["torch"]["deterministic"][variant], result["remat"].get(strategy)
        if "error" in t or m is None:
            continue
        t_act, r_act = t["act"], m["act"]
        if t_act is not None and abs(t_act - r_act) <= GAP * r_act:
            continue
        try:
            result["gaps"][variant] = gap_report(torch, dev, args.remat, case, variant, strategy, steps[variant],
                                                 ops, source, in_bytes, t_act, r_act, args.out)
        except Exception as e:  # noqa: BLE001 - the measured rows stand without it
            traceback.print_exc(file=sys.stdout)  # into goals.txt: where a recording broke, for the next run
            result["gaps"][variant], result["failed"] = {"error": failure(e)}, True
            free_cached(torch, dev)
    set_algorithms(torch, False)
    del steps
    free_cached(torch, dev)
    result["wall_s"] = time.perf_counter() - t_start


def time_by_kind(remat, source, backend, top=8):
    """Where remat's store-all step spends its GPU time (op_times.py's traces, by
    phase and op kind), the largest first: so that a case that misses its time
    goal says where from the same call, and whether the device waited for the
    host there. {"total": (ms, device ms alone), "rows": [(phase, kind, count,
    ms, host ms, device ms alone)]}, or an error."""
    import op_times  # beside this file
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = op_times.remat_gated_by_kind(remat, source, tmp, backend)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the table stands without it
        return {"error": failure(e)}
    ranked = sorted(rows.items(), key=lambda kv: -kv[1][1])[:top]
    return {"total": (round(sum(r[1] for r in rows.values()), 3), round(sum(r[3] for r in rows.values()), 3)),
            "rows": [(cat, kind, n, round(t, 3), round(h, 3), round(d, 3)) for (cat, kind), (n, t, h, d) in ranked]}


# ---- the table ----------------------------------------------------------------------

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def table(results, header):
    lines = header + ["", "| model | precision | PyTorch algorithms | remat / PyTorch | PyTorch ms | remat ms | time × "
                      "| PyTorch act MiB | remat act MiB | act × | goal (time ≤ 1.1×, act ≤ 1×) |",
                      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | | | failed: {r['error']} | | | | | | | |")
            continue
        for mode in r["torch"]:
            for variant, strategy in (("plain", "store-all"), ("checkpointed", r["remat_ckpt"])):
                t, m = r["torch"][mode][variant], r["remat"].get(strategy, {})
                tx, ax = ratio(m.get("time"), t.get("time")), ratio(m.get("act"), t.get("act"))
                met = "—" if mode != "deterministic" else (
                    "n/a" if ax is None or tx is None else ("met" if tx <= 1.1 and ax <= 1.0 else "NOT met"))
                lines.append(f"| {r['name']} | {'bf16 autocast' if r['bf16'] else 'f32'} | {mode} | "
                             f"{strategy} / {r['ckpt'] if variant == 'checkpointed' else 'plain'} | "
                             f"{cell(t, 'time', '.2f')} | {cell(r['remat'], 'time', '.2f', m)} | {num(tx)} | "
                             f"{cell(t, 'act', 'MiB')} | {cell(r['remat'], 'act', 'MiB', m)} | {num(ax)} | {met} |")
    lines.append("")
    for r in results:
        if "error" in r:
            continue
        gaps = ", ".join(f"{v}: {g.get('file') or 'failed: ' + g['error']}" for v, g in r["gaps"].items()) \
            or "none over 5 %"
        errors = [f"PyTorch {mode} {v}: {t['error']}" for mode, vs in r["torch"].items() for v, t in vs.items()
                  if "error" in t] + ([f"remat: {r['remat']['error']}"] if "error" in r["remat"] else [])
        ck = r["remat_ckpt"]
        same = r["remat"][ck]["same"] if ck in r["remat"] else "n/a"
        lines.append(f"- {r['name']}: remat ran `{r['remat_source']}`; {r['what']}; "
                     f"PyTorch's op dtypes {', '.join(r['dtypes'])}; {ck} bitwise equal to store-all: "
                     f"{same}; peak gaps: {gaps}; wall {r['wall_s']:.0f} s"
                     + (f" (capture {r['capture_s']:.0f} s)" if r.get("capture_s") else "")
                     + (f"; remat's GEMM fields: {r['gemm']}" if r["gemm"] else "")
                     # Near the step's time: the step waits on the host's launches (docs/run.md, issue_ms).
                     + "".join(f"; remat {k} issued its instructions in {m['issue']:.2f} of its {m['time']:.2f} ms"
                               for k, m in r["remat"].items() if isinstance(m, dict) and m.get("issue") is not None)
                     + (f"; remat's store-all time by phase and op kind (ms, {TRACE_NOTE}; host: the calls, "
                        f"alone: the kernels with REMAT_CUDA_GATE=1), {r['remat_kinds']['total'][0]} in all, "
                        f"{r['remat_kinds']['total'][1]} alone: "
                        + ", ".join(f"{c} {k} {n}x {t} (host {h}, alone {d})"
                                    for c, k, n, t, h, d in r["remat_kinds"]["rows"])
                        if "rows" in r.get("remat_kinds", {}) else "")
                     + nondeterministic_note(r)
                     + "".join(f"; failed: {e}" for e in errors))
    return "\n".join(lines) + "\n"


def nondeterministic_note(r):
    """remat with --nondeterministic-backward beside PyTorch's defaults: its times,
    what it ran non-deterministically (or why nothing), the loss's bits and the
    gradients' error against its store-all."""
    nd = r.get("remat_nondeterministic")
    if nd is None:
        return ""
    if "error" in nd:
        return f"; failed: remat --nondeterministic-backward: {nd['error']}"
    rep, ck = nd["report"] or {}, r["remat_ckpt"]
    what = "; ".join(rep.get("algorithms") or []) or rep.get("note") or "no report"
    parts = []
    for variant, strategy in (("plain", "store-all"), ("checkpointed", ck)):
        m, t = nd["strategies"][strategy], r["torch"].get("default", {}).get(variant, {})
        err = "" if m["grad_error"] is None else f", gradients' error {m['grad_error']:.2e}"
        parts.append(f"{strategy} {m['time']:.2f} ms ({num(ratio(m['time'], t.get('time')))}x PyTorch's default "
                     f"{'plain' if variant == 'plain' else r['ckpt']}), loss bitwise store-all's: {m['loss_same']}{err}")
    return f"; remat --nondeterministic-backward beside PyTorch's defaults: {', '.join(parts)}; {what}"


def num(x):
    return "n/a" if x is None else f"{x:.3f}"


def cell(side, key, how, row=None):
    """A figure, 'n/a' where there is none (PyTorch's memory on the CPU), 'failed' where the side failed."""
    row = side if row is None else row
    if "error" in side:
        return "failed"
    v = row.get(key)
    if v is None:
        return "n/a"
    return fmt(v) if how == "MiB" else format(v, how)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("remat", help="path to the remat CLI (with the CUDA backend for --device cuda)")
    ap.add_argument("--out", required=True, help="folder for goals.md, peak_gap/, snapshots/ and the captured Llama")
    ap.add_argument("--case", action="append", help="issue33 (default), tiny, or case names of either")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmups", type=int, default=3)
    ap.add_argument("--no-default-mode", action="store_true", help="PyTorch deterministic only")
    args = ap.parse_args()
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_goals: PyTorch sees no CUDA device (--device cpu runs the dry run)", file=sys.stderr)
        return 2
    wanted = args.case or ["issue33"]
    known = {c["name"]: c for g in GROUPS.values() for c in g()}
    cases = []
    for w in wanted:
        if w in GROUPS:
            cases += GROUPS[w]()
        elif w in known:
            cases.append(known[w])
        else:
            ap.error(f"--case {w}: not a group ({', '.join(GROUPS)}) nor a case ({', '.join(known)})")
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "the CPU (dry run: no PyTorch memory figures)"
    header = ["# Issue 33's goal table", "",
              f"PyTorch {torch.__version__} and remat on {name}, one process after the other per case; "
              f"medians of {args.repeat} steps after {args.warmups} warm-up(s) (remat: 1); no TF32; "
              f"CUBLAS_WORKSPACE_CONFIG={os.environ['CUBLAS_WORKSPACE_CONFIG']}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."]
    for case in cases:
        if case["kind"] == "llama":
            case["capture"] = start_capture(case, args.out)
    results, rc = [], 0
    for case in cases:
        r = {"name": case["name"], "what": case["what"], "bf16": case["bf16"],
             "ckpt": "checkpoint(block)" if case["kind"] == "llama" else "checkpoint at sqrt's cuts",
             "remat_ckpt": case["remat_ckpt"]}
        print(f"== {case['name']}", flush=True)
        try:
            run_case(torch, dev, case, args, r)
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the others still run
            r["error"] = failure(e)
            set_algorithms(torch, False)
            free_cached(torch, dev)
        rc = 1 if "error" in r or r.get("failed") else rc
        results.append(r)
        text = table(results, header)
        with open(os.path.join(args.out, "goals.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "goals.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
