#!/usr/bin/env python3
"""Where a training step's GPU time goes, remat beside PyTorch, for one preset.

remat: `remat run --backend cuda --trace` (CUDA events after each instruction),
the store-all step's time summed by phase (fwd, bwd) and op kind.
PyTorch: the same graph op for op (tests/bench/bench_run_vs_torch.py's step),
its kernels' device time per step under torch.profiler, by ATen op or autograd
node, the largest first. Then PyTorch's step time with its defaults and with
deterministic algorithms (torch.use_deterministic_algorithms: what remat's
bitwise-reproducible recomputation also rules out), medians of CUDA events.

Usage: gpu/op_times.py PATH/TO/remat SPEC [SPEC ...]   (float32, no TF32)
A measurement to read, never a test.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Deterministic cuBLAS needs a fixed workspace split; set before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def remat_by_kind(remat, spec, tmp, gated=False, backend="cuda"):
    path = os.path.join(tmp, "trace-gated.json" if gated else "trace.json")
    cmd = [remat, "run", "-m", spec, "-s", "store-all", "--backend", backend, "--repeat", "3", "--trace", path]
    env = dict(os.environ, REMAT_CUDA_GATE="1" if gated else "0")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"op_times: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    # (count, ms between the instruction's marks, ms of the host's call): where
    # the two are near, the device waited for the host there. The trace's own
    # bookkeeping (memory statistics at every mark) lies between the calls, so
    # a host-bound step's slices are longer than its untraced run's.
    rows = {}
    for e in events:
        key = (e["cat"], e["args"].get("op_kind", "?"))
        n, t, h = rows.get(key, (0, 0.0, 0.0))
        rows[key] = (n + 1, t + e["dur"] / 1e3, h + e["args"].get("issue_us", 0.0) / 1e3)
    return rows


def remat_gated_by_kind(remat, spec, tmp, backend="cuda"):
    """remat_by_kind, and each kind's device time alone (REMAT_CUDA_GATE=1: each
    instruction's kernels held until all are issued, docs/gpu.md "Is a step
    waiting for the host?"): {(phase, kind): (count, ms, host ms, device ms)}.
    Where a kind's ms is well above its device ms, the device waited for the
    host there; the step's device ms summed is its time were the host never late.
    (The CPU backend has no gate: its two traces time the same calls.)"""
    rows = remat_by_kind(remat, spec, tmp, backend=backend)
    alone = remat_by_kind(remat, spec, tmp, gated=True, backend=backend)
    return {k: (n, t, h, alone.get(k, (0, 0.0, 0.0))[1]) for k, (n, t, h) in rows.items()}


def torch_profile(spec, remat, steps=3):
    import torch
    from torch.profiler import ProfilerActivity, profile
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "bench"))
    from bench_run_vs_torch import torch_step_fn
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        subprocess.run([remat, "model", "--model", spec, "--write", path], check=True, capture_output=True)
        with open(path) as f:
            ops = json.load(f)["ops"]
    step = torch_step_fn(ops, "store-all", set(), device="cuda", keep_grads=True)
    from torch_compare import measure_steps  # beside this file: the comparison's timing loop

    def timed(n=10):
        return statistics.median(ms for ms, _, _ in measure_steps(torch, step, n))

    default_ms = timed()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step.zero_grads()
            step()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        if not str(ev.device_type).endswith("CPU"):  # kernels: counted in the ops that launch them
            continue
        t = getattr(ev, "self_device_time_total", None)
        if t is None:
            t = ev.self_cuda_time_total
        if t > 0:
            rows.append((t / 1e3 / steps, ev.count / steps, ev.key))
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    det_ms = timed()
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False
    return default_ms, det_ms, sorted(rows, reverse=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    remat = sys.argv[1]
    for spec in sys.argv[2:]:
        with tempfile.TemporaryDirectory() as tmp:
            rk = remat_gated_by_kind(remat, spec, tmp)
        total = sum(t for _, t, _, _ in rk.values())
        alone = sum(d for _, _, _, d in rk.values())
        print(f"\n{spec}: remat store-all on CUDA, {total:.2f} ms per step by phase and op kind "
              f"(the host's time in those calls, and the kernels' time alone: {alone:.2f} ms in all)")
        for (cat, kind), (n, t, h, d) in sorted(rk.items(), key=lambda kv: -kv[1][1]):
            print(f"  {cat:10s} {kind:16s} {n:5d} x {t:9.3f} ms  {100 * t / total:5.1f}%  host {h:9.3f} ms  "
                  f"device alone {d:9.3f} ms")
        default_ms, det_ms, rows = torch_profile(spec, remat)
        print(f"{spec}: PyTorch step {default_ms:.2f} ms (defaults), {det_ms:.2f} ms (deterministic algorithms); "
              f"kernels' device time per step by op:")
        for t, n, key in rows[:30]:
            print(f"  {t:9.3f} ms  {n:7.1f} x  {key[:90]}")


if __name__ == "__main__":
    main()
