#!/usr/bin/env python3
"""PyTorch's own memory peak for a training step on the CPU, beside remat's prediction.

Runs remat's graph op by op in PyTorch (tests/bench/bench_run_vs_torch.py's
torch_step_fn, store-all) and counts what PyTorch's CPU allocator holds with
tests/bench/alloc_probe.c under LD_PRELOAD (compiled here with cc into a
temporary folder): the step's peak above what was held when it started
(parameters, their gradients, the input), the CPU's counterpart of
torch.cuda.max_memory_allocated() above memory_allocated(). With --sizes, what
the peak is made of, by tensor size. PyTorch's CPU dropout keeps a four-byte
mask where a GPU step keeps one byte (remat's rule), so models with dropout
differ by that too.

Usage: tests/with_torch_python.sh tests/bench/torch_peak_cpu.py --remat build/app/remat SPEC... [--sizes]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def relaunch_under_probe():
    """Compiles the probe and runs this script again with it preloaded."""
    tmp = tempfile.mkdtemp(prefix="remat-probe-")
    lib = os.path.join(tmp, "libprobe.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, os.path.join(HERE, "alloc_probe.c"), "-ldl", "-lpthread"],
                   check=True)
    env = dict(os.environ, LD_PRELOAD=lib, REMAT_PROBE_LOADED="1")
    sys.exit(subprocess.run([sys.executable] + sys.argv, env=env).returncode)


def measure(remat, spec, sizes):
    import torch
    from bench_run_vs_torch import torch_step_fn
    probe = ctypes.CDLL(None)
    probe.probe_peak.restype = probe.probe_current.restype = ctypes.c_size_t
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        subprocess.run([remat, "model", "--model", spec, "--write", path], check=True, capture_output=True)
        with open(path) as f:
            ops = json.load(f)["ops"]
    step = torch_step_fn(ops, "store-all", set(), keep_grads=True)
    step.zero_grads()
    step()  # every .grad made, the allocator warm
    step.zero_grads()
    before = probe.probe_current()
    probe.probe_reset()
    step()
    peak = probe.probe_peak() - before
    sim = subprocess.run([remat, "simulate", "--model", spec, "--strategy", "store-all", "--json"], check=True,
                         capture_output=True, text=True)
    predicted = json.loads(sim.stdout)["strategies"][0]["peak_bytes"]
    print(f"{spec:40s} {peak / MIB:14.1f} {predicted / MIB:14.1f} {peak / predicted:7.3f}")
    if sizes:
        buf = (ctypes.c_size_t * 4096)()
        n = probe.probe_peak_sizes(buf, 4096)
        counts = Counter(buf[i] for i in range(n))
        print("    live at the peak (the baseline's tensors included), the largest by size:")
        for size, k in sorted(counts.items(), key=lambda kv: -kv[0] * kv[1])[:12]:
            print(f"    {k:5d} x {human(size):>11s} = {human(size * k):>11s}")


def human(n):
    return f"{n / MIB:.2f} MiB" if n >= MIB else f"{n / 1024:.2f} KiB" if n >= 1024 else f"{n} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remat", required=True, help="path to the remat CLI")
    ap.add_argument("specs", nargs="+", help="models: preset specs or model files")
    ap.add_argument("--sizes", action="store_true", help="also list what the peak is made of")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if os.environ.get("REMAT_PROBE_LOADED") != "1":
        relaunch_under_probe()
    import torch
    torch.set_num_threads(args.threads)
    sys.path.insert(0, HERE)
    print(f"{'model':40s} {'PyTorch MiB':>14s} {'remat MiB':>14s} {'ratio':>7s}   (store-all; peak above the step's start)")
    for spec in args.specs:
        measure(args.remat, spec, args.sizes)


if __name__ == "__main__":
    main()
