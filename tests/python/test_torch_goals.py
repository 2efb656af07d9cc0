#!/usr/bin/env python3
"""gpu/torch_goals.py (issue 33's goal table) as a dry run on the CPU: the tiny
cases (a bf16 GPT, the captured Llama-style decoder, a bf16 ResNet-18, an f32
GPT) through every code path the GPU run takes but the CUDA-only calls: the
graphs and the module under torch.autocast("cpu", bfloat16), PyTorch's
deterministic mode and its defaults, the capture, remat's runs, the table, the
peak-gap report (compare-snapshot on remat's predicted snapshot, which stands
in for a recording and so must differ by 0 bytes) and the per-op levels.
The engine-thread marking a GPU recording needs is checked on
test_compare_snapshot.py's snapshot with its backward frames taken away, the
backward's marker of a recording without stacks on it with every frame taken
away; record_step on a stand-in for torch.cuda, and record's retry without
stacks after a SystemError on a stand-in for record_step.

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


CPU_NOTE = "the CPU backend has no non-deterministic backward; gradients stay bitwise reproducible"


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
    c = compare_marked(args, snap, path, first_bwd)
    check(c["measured_peak_bytes"] == peak_above, f"the peak above the start is the events' ({c['measured_peak_bytes']})")


def compare_marked(args, snap, path, first_bwd):
    """compare-snapshot on `snap` (written to `path`) with its backward's entries
    marked: the backward must start on the prediction's first bwd. Its JSON."""
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    c = remat_json(args.remat, "compare-snapshot", "-m", "mlp:4:64:8", path, "--json")
    xs = c["measured_x"]
    check(xs[first_bwd] == c["predicted_backward_instruction"] and xs[first_bwd - 1] < xs[first_bwd]
          and any("autograd's backward" in line for line in c["explanation"]),
          "marked, the backward starts on the prediction's first bwd")
    return c


def check_backward_marking(args):
    """A recording without stacks has no frames: compare-snapshot splits the
    phases at the peak; marked after the 'snapshot' entry record_step writes
    when torch.autograd.backward is called, it splits them where the backward starts."""
    import goals_gap
    import test_compare_snapshot as tcs
    snap, start, peak_above, first_bwd = tcs.build_snapshot()
    trace = snap["device_traces"][0]
    for e in trace:
        del e["frames"]  # PyTorch 2.x writes no "frames" where it recorded no context
    path = os.path.join(args.out, "nostacks.pickle")
    check(goals_gap.mark_backward_after_marker(snap) == 0 and not any("frames" in e for e in trace),
          "without a 'snapshot' entry nothing is marked")
    trace.insert(first_bwd, {"action": "snapshot", "addr": 0, "size": 0, "stream": 0})
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    bare = remat_json(args.remat, "compare-snapshot", "-m", "mlp:4:64:8", path, "--json")
    check(bare["measured_x"][first_bwd] < bare["predicted_backward_instruction"]
          and any("starts at the peak" in line for line in bare["explanation"]),
          "without frames compare-snapshot splits the phases after the peak, one entry late here")
    marked = goals_gap.mark_backward_after_marker(snap)
    check(marked == len(trace) - first_bwd - 1 and not any("frames" in e for e in trace[:first_bwd + 1])
          and all(e["frames"] == [goals_gap.BACKWARD_FRAME] for e in trace[first_bwd + 1:]),
          f"the {len(trace) - first_bwd - 1} entries after the marker are marked, none before it ({marked})")
    c = compare_marked(args, snap, path, first_bwd)
    check(c["measured_peak_bytes"] == peak_above == bare["measured_peak_bytes"],
          f"the peak is the events' either way ({c['measured_peak_bytes']}, {bare['measured_peak_bytes']})")


def check_backward_marker():
    """backward_marker on PyTorch itself (the CPU): Tensor.backward goes through
    it, mark() runs once, before the first backward, and the function is put
    back, also when the step fails."""
    import torch
    import goals_gap
    real, seen = torch.autograd.backward, []
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with goals_gap.backward_marker(torch, lambda: seen.append(None if x.grad is None else x.grad.tolist())):
        (x * x).sum().backward()
        (3 * x).sum().backward()
    check(seen == [None] and x.grad.tolist() == [5.0, 7.0, 9.0] and torch.autograd.backward is real,
          f"marked once, before the first gradient; both backwards ran; put back ({seen}, {x.grad.tolist()})")
    try:
        with goals_gap.backward_marker(torch, lambda: seen.append("again")):
            raise SystemError("a failed step")
    except SystemError:
        pass
    check(torch.autograd.backward is real and seen == [None], "put back after a failed step, nothing marked")


class FakeCuda:
    """torch.cuda as record_step uses it, on the CPU: the allocator's trace is
    a list the step writes; _snapshot() adds its 'snapshot' entry to it."""

    def __init__(self, legacy=False):
        self.history, self.trace, self.allocated = [], [], 0
        self.memory = self
        if legacy:  # PyTorch 2.0's signature: no context or stacks
            def record(enabled, record_context=True, trace_alloc_max_entries=1, trace_alloc_record_context=False,
                       device=None, record_context_cpp=False):
                self.history.append(dict(enabled=enabled, record_context=record_context,
                                         trace_alloc_max_entries=trace_alloc_max_entries,
                                         trace_alloc_record_context=trace_alloc_record_context))
            self._record_memory_history = record

    def _record_memory_history(self, **kw):
        self.history.append(kw)

    def synchronize(self):
        pass

    def memory_allocated(self):
        return self.allocated

    def event(self, action, size):
        # No "frames": PyTorch 2.x writes none where it recorded no context.
        self.trace.append({"action": action, "addr": 4096 * len(self.trace), "size": size, "stream": 0})
        self.allocated += size if action == "alloc" else -size if action == "free_completed" else 0

    def _snapshot(self):
        self.event("snapshot", 0)
        return {}

    def _dump_snapshot(self, path):
        with open(path, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [self.trace]}, f)


def check_record_step(args):
    """record_step on a stand-in for torch.cuda: the allocator's settings of
    each way to record, the marker at the backward's start without stacks, the
    levels read during the step, and the text."""
    import types
    import goals_gap

    def fake(legacy=False):
        cuda = FakeCuda(legacy)
        torch = types.SimpleNamespace(cuda=cuda, autograd=types.SimpleNamespace())
        torch.autograd.backward = lambda: (cuda.event("alloc", 512), cuda.event("free_completed", 2048))
        return torch, cuda

    class Step:
        def __init__(self, torch, levels):
            self.torch, self.levels, self.read, self.zeroed = torch, levels, [], 0

        def zero_grads(self):
            self.zeroed += 1

        def __call__(self):
            self.torch.cuda.event("alloc", 2048)
            self.read.append(self.levels["read"]())
            self.torch.autograd.backward()

    path = os.path.join(args.out, "record_step.pickle")
    for stacks in goals_gap.STACKS:
        torch, cuda = fake()
        cuda.allocated = 1000  # resident before the step: the levels leave it out
        levels = {"read": None}
        step = Step(torch, levels)
        real_backward = torch.autograd.backward
        how = goals_gap.record_step(torch, None, step, path, levels, stacks)
        with open(path, "rb") as f:
            trace = pickle.load(f)["device_traces"][0]
        context = "all" if stacks == "python" else None
        check(cuda.history == [dict(enabled="all", context=context, stacks="python", max_entries=1000000), dict(enabled=None)],
              f"{stacks} stacks: recorded with context={context}, then recording off ({cuda.history})")
        check(step.zeroed == 1 and step.read == [2048] and levels["read"] is None and torch.autograd.backward is real_backward,
              f"{stacks} stacks: gradients zeroed, the level read above the start ({step.read}), put back")
        if stacks == "python":
            check([e["action"] for e in trace] == ["alloc", "alloc", "free_completed"]
                  and all(e["frames"] == [goals_gap.ENGINE_FRAME] for e in trace)
                  and how == "recorded on the GPU with Python stacks; 3 entries of autograd's engine thread marked as its",
                  f"python stacks: no marker, frameless entries marked as the engine's ({how!r})")
        else:
            check([e["action"] for e in trace] == ["alloc", "snapshot", "alloc", "free_completed"]
                  and "frames" not in trace[0] and "frames" not in trace[1] and trace[2]["frames"] == trace[3]["frames"] == [goals_gap.BACKWARD_FRAME]
                  and how == "recorded on the GPU without stacks (context=None: no entry names its source line); the 2 "
                             "entries after the 'snapshot' entry written when torch.autograd.backward was called marked "
                             "as the backward's",
                  f"no stacks: the marker before the backward's entries, those marked ({how!r})")
    # No backward called: nothing marked, and the text says where compare-snapshot splits.
    torch, cuda = fake()
    levels = {"read": None}
    step = Step(torch, levels)
    step.torch = types.SimpleNamespace(cuda=cuda, autograd=types.SimpleNamespace(backward=lambda: None))  # not torch's
    how = goals_gap.record_step(torch, None, step, path, levels, "none")
    check(how.endswith("no 'snapshot' entry from torch.autograd.backward, so compare-snapshot splits forward and "
                       "backward at the peak"), f"no backward: no marker, said so ({how!r})")
    torch, cuda = fake(legacy=True)
    levels = {"read": None}
    goals_gap.record_step(torch, None, Step(torch, levels), path, levels, "none")
    check(cuda.history == [dict(enabled=True, record_context=False, trace_alloc_max_entries=1000000,
                                trace_alloc_record_context=False),
                           dict(enabled=None, record_context=True, trace_alloc_max_entries=1, trace_alloc_record_context=False)],
          f"PyTorch 2.0's signature: the history recorded without context, then off ({cuda.history})")


def check_record_retry():
    """A recording that fails with SystemError (PyTorch 2.11's, capturing the
    stacks of a checkpointed step's recomputation) is recorded again without
    stacks, from scratch (the op levels reset, the cache emptied), the failure
    named in the text; when every way fails, the last SystemError stands; any
    other error stands at once. Checkpoint's early stop is left as it is."""
    import types
    import torch.utils.checkpoint as ckpt
    import goals_gap
    early = getattr(ckpt, "_enable_checkpoint_early_stop", None)  # the switch's global in 2.x; None in 1.13 and 2.11
    real = goals_gap.record_step
    err = "<built-in method run_backward> returned NULL without setting an exception"

    def attempt(fail):
        calls, resets, emptied = [], [], []
        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: emptied.append(len(calls))))

        def substitute(torch_, dev, step, path, levels, stacks="python"):
            calls.append((stacks, getattr(ckpt, "_enable_checkpoint_early_stop", None)))
            if stacks in fail:
                raise fail[stacks]
            return f"recorded with {stacks} stacks"

        class Dev:
            type = "cuda"
        goals_gap.record_step = substitute
        try:
            levels = {"read": None, "reset": lambda: resets.append(len(calls))}
            how = goals_gap.record(torch, Dev(), None, None, "snap", levels, "m", "sqrt")
        except (SystemError, RuntimeError) as e:
            how = e
        finally:
            goals_gap.record_step = real
        return [s for s, _ in calls], resets, emptied, how, all(e == early for _, e in calls)

    calls, resets, emptied, how, same = attempt({})
    check(calls == ["python"] and resets == emptied == [] and how == "recorded with python stacks" and same,
          f"recorded with Python stacks at the first try ({calls}, {how!r})")
    calls, resets, emptied, how, same = attempt({"python": SystemError(err)})
    check(calls == ["python", "none"] and resets == emptied == [1] and same,
          f"the SystemError: recorded again without stacks, levels reset and cache emptied before it, "
          f"early stop as it was ({calls}, {resets}, {emptied})")
    check(how == f"recorded with none stacks; the recording with python stacks failed (SystemError: {err})",
          f"the text names both ({how!r})")
    calls, resets, emptied, how, same = attempt({"python": SystemError(err), "none": SystemError("again")})
    check(calls == ["python", "none"] and resets == emptied == [1] and isinstance(how, SystemError) and str(how) == "again",
          f"every way failing: the last SystemError stands ({calls}, {how!r})")
    calls, resets, emptied, how, same = attempt({"python": RuntimeError("CUDA out of memory")})
    check(calls == ["python"] and resets == [] and isinstance(how, RuntimeError),
          f"another error stands at once, no retry ({calls}, {how!r})")


def main():
    import torch_goals
    args = parse_args()
    check_engine_marking(args)
    check_backward_marking(args)
    check_backward_marker()
    check_record_step(args)
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
        kinds = r.get("remat_kinds", {})
        check("rows" in kinds and 0 < len(kinds["rows"]) <= 8 and kinds["total"][0] > 0 and kinds["total"][1] > 0
              and all(isinstance(row[0], str) and row[2] > 0 and row[3] >= 0
                      and row[5] >= 0 for row in kinds["rows"]),
              f"{n}: store-all's time by op kind, the gated trace's beside it ({kinds})")
        # Beside PyTorch's defaults, remat with --nondeterministic-backward: on
        # the CPU nothing changes, and the run says so.
        nd = r["remat_nondeterministic"]
        check(nd["report"] == {"requested": True, "algorithms": [], "dropped_guarantees": [], "kept_guarantees": [],
                               "note": CPU_NOTE},
              f"{n}: --nondeterministic-backward on the CPU drops nothing and says so ({nd['report']})")
        check(all(nd["strategies"][s]["time"] > 0 and nd["strategies"][s]["loss_same"] is True
                  and nd["strategies"][s]["same"] is True and nd["strategies"][s]["grad_error"] is None
                  for s in ("store-all", ck)),
              f"{n}: --nondeterministic-backward's store-all and {ck} ran, bitwise equal ({nd['strategies']})")
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
    check(md.count("the kernels with REMAT_CUDA_GATE=1") == 4, "goals.md: each case's time by op kind, gated beside")
    notes = [line for line in md.splitlines() if line.startswith("- ")]
    check(len(notes) == 4 and all("; remat --nondeterministic-backward beside PyTorch's defaults: store-all " in line
                                  and "loss bitwise store-all's: True" in line and line.count(CPU_NOTE) == 1
                                  for line in notes),
          f"goals.md: each case's note gives remat's --nondeterministic-backward run and the CPU's note ({notes})")
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
