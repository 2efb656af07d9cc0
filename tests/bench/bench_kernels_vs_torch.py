#!/usr/bin/env python3
"""The CPU kernels (bench_kernels) against PyTorch CPU, both on one thread.

Runs the Google Benchmark program bench_kernels and the same ops in PyTorch
(torch.set_num_threads(1)), shape by shape: each benchmark's name carries its
shape (BM_Conv2dFwd/n:8/c:64/hw:56/k:64/r:3/stride:1), from which the PyTorch
call is built. Times are CPU time of the process (Google Benchmark's cpu_time,
time.process_time() for PyTorch), which a machine shared with other work
inflates far less than wall time; both sides run one thread. The two alternate
for --rounds rounds; each round times an op for at least --min-time seconds
(mean per call, as Google Benchmark does), and the table gives the median of
the rounds and the ratio remat / PyTorch (below 1: remat is faster).

Usage: tests/with_torch_python.sh tests/bench/bench_kernels_vs_torch.py \
           --bench build/tests/bench/bench_kernels [--rounds 5] [--filter REGEX]
A measurement, never a test: it always exits 0 unless something fails to run.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def parse(name):
    """'BM_Conv2dFwd/n:8/c:64' -> ('Conv2dFwd', {'n': 8, 'c': 64})."""
    parts = name.split("/")
    return parts[0].removeprefix("BM_"), {k: int(v) for k, v in (p.split(":") for p in parts[1:])}


def rand(*shape):
    return torch.rand(*shape) * 2 - 1


def torch_op(kind, a):
    """A no-argument callable running in PyTorch what benchmark `kind` runs."""
    aten = torch.ops.aten
    if kind in ("Conv2dFwd", "Conv2dBwd"):
        x, W = rand(a["n"], a["c"], a["hw"], a["hw"]), rand(a["k"], a["c"], a["r"], a["r"])
        stride, pad = [a["stride"]] * 2, [a["r"] // 2] * 2
        if kind == "Conv2dFwd":
            return lambda: F.conv2d(x, W, None, stride, pad)
        dy = torch.rand_like(F.conv2d(x, W, None, stride, pad))
        # dx and dW, no bias: what conv2d_bwd computes with db == nullptr.
        return lambda: aten.convolution_backward(dy, x, W, None, stride, pad, [1, 1], False, [0, 0], 1,
                                                 [True, True, False])
    if kind in ("BatchNormFwd", "BatchNormBwd"):
        n, c, hw = a["n"], a["c"], a["hw"]
        x, w, b = rand(n, c, hw, hw), rand(c), rand(c)
        rm, rv = torch.zeros(c), torch.ones(c)
        fwd = lambda: aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        if kind == "BatchNormFwd":
            return fwd
        _, mean, invstd = fwd()
        dy = rand(n, c, hw, hw)
        return lambda: aten.native_batch_norm_backward(dy, x, w, rm, rv, mean, invstd, True, 1e-5,
                                                       [True, True, True])
    if kind in ("MaxPoolFwd", "MaxPoolBwd"):
        x = rand(a["n"], a["c"], a["hw"], a["hw"])
        fwd = lambda: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
        if kind == "MaxPoolFwd":
            return fwd
        y, idx = fwd()
        dy = torch.rand_like(y)
        return lambda: aten.max_pool2d_with_indices_backward(dy, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)
    if kind == "AttentionScores":
        q, k = rand(a["bh"], a["T"], a["d"]), rand(a["bh"], a["T"], a["d"])
        return lambda: torch.bmm(q, k.transpose(1, 2))
    if kind in ("SoftmaxFwd", "SoftmaxBwd"):
        x = rand(a["bh"] * a["T"], a["T"])
        if kind == "SoftmaxFwd":
            return lambda: torch.softmax(x, -1)
        y, dy = torch.softmax(x, -1), rand(a["bh"] * a["T"], a["T"])
        return lambda: aten._softmax_backward_data(dy, y, -1, torch.float32)
    if kind.startswith("SoftmaxCE"):
        # PyTorch's cross-entropy is log_softmax + nll_loss, which keeps the
        # log-probabilities: the counterpart of both remat pairs.
        x = rand(a["rows"], a["classes"])
        labels = torch.full((a["rows"],), 7, dtype=torch.long)
        if kind.startswith("SoftmaxCEFwd"):
            return lambda: F.cross_entropy(x, labels)
        lp = torch.log_softmax(x, 1)
        g = torch.zeros_like(lp)
        g[torch.arange(a["rows"]), labels] = -1.0 / a["rows"]
        return lambda: aten._log_softmax_backward_data(g, lp, 1, torch.float32)
    raise ValueError(f"no PyTorch counterpart for {kind}")


def time_torch(fn, min_time):
    fn()  # warm-up: first-call allocations and oneDNN primitive creation
    calls, start = 0, time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.process_time() - start
        if elapsed >= min_time:
            return elapsed / calls * 1e3


def run_bench(bench, min_time, filt):
    cmd = [bench, "--benchmark_format=json", f"--benchmark_min_time={min_time}"]
    if filt:
        cmd.append(f"--benchmark_filter={filt}")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["benchmarks"]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    return {r["name"]: r["cpu_time"] * scale[r["time_unit"]] for r in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="path of bench_kernels")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per op and round")
    parser.add_argument("--filter", default="", help="benchmark name regex (Google Benchmark's filter)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ours, theirs, ops = {}, {}, {}
    for r in range(args.rounds):
        for name, ms in run_bench(args.bench, args.min_time, args.filter).items():
            ours.setdefault(name, []).append(ms)
            if name not in ops:
                ops[name] = torch_op(*parse(name))
            theirs.setdefault(name, []).append(time_torch(ops[name], args.min_time))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; CPU ms, medians of {args.rounds} alternating rounds")
    print(f"{'benchmark':<56} {'remat ms':>9} {'torch ms':>9} {'ratio':>6}")
    for name in ours:
        a, b = statistics.median(ours[name]), statistics.median(theirs[name])
        print(f"{name.removeprefix('BM_'):<56} {a:9.3f} {b:9.3f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
