#!/usr/bin/python3
"""`remat run --backend cpu` on captured zoo models (tests/python/zoo_models.py's
Llama-style decoder and torchvision's EfficientNet-B0) against PyTorch CPU
running the user's original nn.Module, store-all and sqrt, one thread each.

Each model is built at a training-step size (below), captured with
remat_capture, and run by remat once with `--dump` to get its parameters,
input and labels: the module is loaded with exactly those (the capture's
parameter map), so both sides run the same weights on the same batch.

remat: `remat run --model FILE --strategy store-all,sqrt --backend cpu
--repeat R --json`: time_ms is the median of R timed steps after a warm-up;
the command's wall time, end to end (start-up, reading the file, parameter
init, warm-up and R steps of each strategy), is printed too.
PyTorch: torch.set_num_threads(1); a step is the module's forward, the cross
entropy and backward with fresh parameter gradients, in train mode (dropout
and stochastic depth on, as remat's Dropout ops are); the median of R steps
after one warm-up. Under sqrt the module runs as its sequence of units (the
decoder: embedding, each block, norm, head; EfficientNet: the stem, each
MBConv block, the last conv, pool, classifier), and every segment but the
last runs inside torch.utils.checkpoint (use_reentrant=False): a segment
ends after the unit that holds remat's sqrt cut op (op ids k, 2k, ...,
k = ceil(sqrt(ops after the input)), by the op's module in the capture). So
PyTorch's cuts are remat's, rounded up to the module that makes them: what a
user gets with checkpoint_sequential-style code around the same modules.

Usage: tests/bench/bench_zoo_vs_torch.py --remat build/app/remat [--model llama|efficientnet ...]
         [--repeat 5] [--rounds 3] [--keep DIR]
Dropout and stochastic depth draw different masks on each side, so the two
losses printed (remat's and PyTorch's on the same weights and batch) agree
only roughly on EfficientNet; the decoder has none, and they agree closely.
A measurement, never a test.
"""
import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# One thread for PyTorch's BLAS too (Debian's torch calls OpenBLAS, whose
# pthread build ignores torch.set_num_threads): set before torch loads it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "exec"))
import remat_capture  # noqa: E402
from family_models import Llama  # noqa: E402
from torch_crosscheck import read_safetensors  # noqa: E402


def llama():
    """Llama-style decoder (RMSNorm, rotary, SwiGLU): 4 layers, dim 256, 8 heads,
    seq 128, batch 4, vocab 512."""
    batch, seq = 4, 128
    torch.manual_seed(0)
    net = Llama(vocab=512, d=256, heads=8, seq=seq, layers=4)
    ids = torch.randint(0, 512, (batch, seq))
    units = ([("tok", net.tok)] + [(f"blocks.{i}", b) for i, b in enumerate(net.blocks)]
             + [("norm", net.norm), ("head", net.head)])
    return net, ids, units, "4 layers, dim 256, 8 heads, seq 128, batch 4, vocab 512"


def efficientnet():
    """torchvision's EfficientNet-B0, 10 classes, 2x3x128x128."""
    torch.manual_seed(0)
    net = torchvision.models.efficientnet_b0(num_classes=10)
    x = torch.randn(2, 3, 128, 128)
    units = [("features.0", net.features[0])]
    for i in range(1, 8):
        units += [(f"features.{i}.{j}", b) for j, b in enumerate(net.features[i])]
    units += [("features.8", net.features[8]), ("avgpool", lambda h: torch.flatten(net.avgpool(h), 1)),
              ("classifier", net.classifier)]
    return net, x, units, "B0, 10 classes, input 2x3x128x128"


MODELS = {"llama": llama, "efficientnet": efficientnet}


def loss_of(out, labels):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels)


def load_dump(net, doc, dump):
    """The module on remat's parameters; remat's input and labels."""
    t, _ = read_safetensors(os.path.join(dump, "tensors.safetensors"))
    params = dict(net.named_parameters())
    with torch.no_grad():
        for e in doc["parameters"]:
            p = params[e["param"]]
            p.copy_(torch.from_numpy(t["param." + e["tensor"]].astype(np.float32)).reshape(p.shape))
    x = t["input"]
    x = torch.from_numpy(x.astype(np.int64)) if x.dtype.kind == "i" else torch.from_numpy(x.astype(np.float32))
    return x, torch.from_numpy(t["labels"].astype(np.int64)), float(t["loss"])


def unit_cuts(ops, units):
    """Indices of the units after which PyTorch's sqrt cuts: the unit holding each
    of remat's sqrt cut ops (an op of the top-level module belongs to the unit of
    the op before it), the last unit left out."""
    n = len(ops) - 1
    k = max(1, math.ceil(math.sqrt(n)))
    names = [name for name, _ in units]

    def unit_of(module):
        for i, name in enumerate(names):
            if module == name or module.startswith(name + "."):
                return i
        return None

    owner, last = [], 0
    for op in ops:
        u = unit_of(op.get("torch", {}).get("module", ""))
        last = last if u is None else u
        owner.append(last)
    return sorted({owner[c] for c in range(k, n - 1, k)} - {len(units) - 1})


def torch_step_fn(net, x, labels, units, cuts):
    """cuts None: the module's own forward (store-all); else its units with every
    segment before the last cut's end inside torch.utils.checkpoint."""
    params = list(net.parameters())
    bounds = [] if cuts is None else [c + 1 for c in cuts]

    def run_units(lo, hi, h):
        for _, f in units[lo:hi]:
            h = f(h)
        return h

    def forward():
        if cuts is None:
            return net(x)
        h, lo = x, 0
        for hi in bounds:
            h = checkpoint(run_units, lo, hi, h, use_reentrant=False)
            lo = hi
        return run_units(lo, len(units), h)

    def step():
        for p in params:
            p.grad = None
        loss = loss_of(forward(), labels)
        loss.backward()
        return loss

    step.forward = forward
    return step


def torch_time(step, repeat):
    """Of repeat steps, ms: the median wall time, the fastest, and the median CPU
    time of this thread (PyTorch runs here, on one thread)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
    return statistics.median(wall), min(wall), statistics.median(cpu)


def remat_run(remat, path, strategy, repeat):
    """`remat run`'s JSON, its wall time and its CPU time (user + system), s."""
    cmd = [remat, "run", "--model", path, "--strategy", strategy, "--backend", "cpu", "--repeat", str(repeat),
           "--json"]
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return json.loads(out), wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def remat_times(remat, path, repeat):
    """{strategy: (median ms, fastest ms)} of one `remat run --strategy store-all,sqrt`, and its wall time."""
    doc, wall, _ = remat_run(remat, path, "store-all,sqrt", repeat)
    return {s["name"].rstrip("*"): (s["time_ms"], min(s["run_ms"])) for s in doc["strategies"]}, wall


def remat_cpu(remat, path, extra):
    """CPU ms of one step, by difference: `remat run` with 1 and 1 + extra repeats
    (start-up, warm-up and the first step cancel). --strategy sqrt runs store-all
    too, so sqrt's is its difference less store-all's."""
    per = {}
    for s in ("store-all", "sqrt"):
        lo, hi = remat_run(remat, path, s, 1)[2], remat_run(remat, path, s, 1 + extra)[2]
        per[s] = (hi - lo) * 1e3 / extra
    per["sqrt"] -= per["store-all"]
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--model", action="append", choices=sorted(MODELS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="also write the captured models there (to profile `remat run`)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in a.model or list(MODELS):
        net, x, units, size = MODELS[name]()
        net.train()
        with tempfile.TemporaryDirectory() as tmp:
            labels0 = torch.zeros(x.numel() if x.dtype == torch.int64 else x.shape[0], dtype=torch.int64)
            doc = remat_capture.capture(net, x, lambda out: loss_of(out, labels0), name=name)
            path = os.path.join(tmp, name + ".json")
            remat_capture.save(doc, path)
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                remat_capture.save(doc, os.path.join(a.keep, name + ".json"))
            dump = os.path.join(tmp, "dump")
            subprocess.run([a.remat, "run", "--model", path, "--strategy", "store-all", "--backend", "cpu",
                            "--repeat", "1", "--dump", dump], check=True, capture_output=True)
            x, labels, remat_loss = load_dump(net, doc, dump)
            ops = doc["ops"]
            cuts = unit_cuts(ops, units)
            steps = {"store-all": torch_step_fn(net, x, labels, units, None),
                     "sqrt": torch_step_fn(net, x, labels, units, cuts)}
            # The units in order are the module's forward: same output, bit for bit.
            torch.manual_seed(1)
            with torch.no_grad():
                net.eval()
                same = torch.equal(steps["store-all"].forward(), steps["sqrt"].forward())
                net.train()
            if not same:
                sys.exit(f"{name}: the units do not compute the module's forward")
            losses = {s: step().item() for s, step in steps.items()}  # warm-up
            rounds, walls = [], []
            for _ in range(a.rounds):
                r, wall = remat_times(a.remat, path, a.repeat)
                t = {s: torch_time(steps[s], a.repeat) for s in steps}
                rc = remat_cpu(a.remat, path, a.repeat)
                for s in steps:
                    r[s] += (rc[s],)
                rounds.append((r, t))
                walls.append(wall)
        med = lambda f: statistics.median(f(r, t) for r, t in rounds)  # noqa: E731
        print(f"{name}: {size}; {len(ops)} remat ops, PyTorch sqrt cuts after "
              f"{[units[c][0] for c in cuts]}; loss on remat's weights: remat {remat_loss:.6g}, "
              f"PyTorch {losses['store-all']:.6g} (sqrt {losses['sqrt']:.6g})")
        for s in ("store-all", "sqrt"):
            rows.append((name, s, med(lambda r, t: t[s][0]), med(lambda r, t: r[s][0]),
                         med(lambda r, t: r[s][0] / t[s][0]), min(t[s][1] for _, t in rounds),
                         min(r[s][1] for r, _ in rounds), med(lambda r, t: t[s][2]), med(lambda r, t: r[s][2]),
                         med(lambda r, t: r[s][2] / t[s][2]), statistics.median(walls)))
    print(f"\nmedians of {a.rounds} rounds; a round: one `remat run --strategy store-all,sqrt --repeat {a.repeat}`, "
          f"PyTorch's store-all and sqrt, {a.repeat} steps each (each the median of its steps), then remat's CPU "
          f"time by difference ({a.repeat} steps); fastest: the fastest step of all rounds; remat run s: the "
          f"command's wall time, end to end; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'':<25}{'----- wall, median -----':>33}{'----- fastest -----':>25}{'------- CPU time -------':>32}")
    print(f"{'model':<14}{'strategy':<11}{'torch ms':>10}{'remat ms':>10}{'remat/torch':>13}"
          f"{'torch':>10}{'remat':>8}{'ratio':>7}{'torch ms':>10}{'remat ms':>10}{'remat/torch':>12}"
          f"{'remat run s':>13}")
    for name, s, tm, rm, ratio, tmin, rmin, tc, rcpu, cratio, wall in rows:
        print(f"{name:<14}{s:<11}{tm:>10.1f}{rm:>10.1f}{ratio:>13.2f}{tmin:>10.1f}{rmin:>8.1f}{rmin / tmin:>7.2f}"
              f"{tc:>10.1f}{rcpu:>10.1f}{cratio:>12.2f}{wall:>13.2f}")

if __name__ == "__main__":
    main()
