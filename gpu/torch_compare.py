#!/usr/bin/env python3
"""PyTorch against remat on the same models and checkpoint boundaries, on a GPU.

For each case the same network is built twice: in PyTorch (float32, no TF32)
and as remat's preset. Two variants run on each side:

- plain: PyTorch keeps everything autograd saves; remat runs store-all.
- checkpointed: PyTorch wraps the same segments in torch.utils.checkpoint
  (non-reentrant); remat runs `manual:` with a checkpoint at each segment
  boundary, so both recompute exactly the same segments (the last segment of
  checkpoint_sequential is not checkpointed, and neither is remat's segment
  after its last checkpoint).

Memory is compared on one definition: the activation peak, i.e. the allocator's
peak during one training step minus what was resident before it. PyTorch:
max_memory_allocated() minus memory_allocated() before the step (parameters,
their gradients, the input, the target and cuBLAS's workspace, all resident
after the warm-up). remat: allocator_peak_bytes minus the baseline (parameters,
gradients, target, loss), the cuBLAS workspace and the input A(0). Both keep
their own scratch and rounding inside. The whole allocator peaks are printed
too. Time: median over the timed steps of CUDA events around forward + backward.

Usage: gpu/torch_compare.py PATH/TO/remat [--repeat N] [--case NAME ...]
Exit 1 when a side failed; the goal (remat's activation peak <= PyTorch's, its
time <= 1.1x) is reported, not enforced.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

MIB = 1 << 20


# ---- the cases ------------------------------------------------------------------

def mlp_case(layers, width, batch, segments):
    """remat's mlp:L:W:B: input (B, W), L x (Linear W->W + ReLU), MSE loss."""
    per = 2 * layers // segments  # modules per segment
    boundaries = [per * k for k in range(1, segments)]  # op id == module index (op 0 is the input)

    def build(torch):
        layers_ = []
        for _ in range(layers):
            layers_ += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers_)

    def step(torch, model, x, target, checkpointed):
        # checkpoint_sequential's segments, written out with the non-reentrant
        # checkpoint (PyTorch 1.13's checkpoint_sequential has no use_reentrant):
        # every segment but the last is checkpointed.
        from torch.utils.checkpoint import checkpoint
        if checkpointed:
            mods = list(model)
            for k in range(segments):
                seg = torch.nn.Sequential(*mods[k * per:(k + 1) * per])
                x = checkpoint(seg, x, use_reentrant=False) if k < segments - 1 else seg(x)
            y = x
        else:
            y = model(x)
        loss = torch.nn.functional.mse_loss(y, target)
        loss.backward()

    def data(torch, dev):
        x = torch.rand(batch, width, device=dev) * 2 - 1
        return x, torch.rand(batch, width, device=dev) * 2 - 1

    return {
        "name": f"mlp:{layers}:{width}:{batch}",
        "spec": f"mlp:{layers}:{width}:{batch}",
        "what": f"{layers} x (Linear {width}x{width} + ReLU), batch {batch}, MSE",
        "ckpt_torch": f"checkpoint_sequential's {segments} segments (non-reentrant)",
        "ckpt_remat": "manual:" + ",".join(map(str, boundaries)),
        "input_bytes": 4 * batch * width,
        "build": build, "step": step, "data": data,
    }


def transformer_case(blocks, d, seq, batch):
    """remat's transformer:L:D:SEQ:BATCH (no attention: LN, Linear, Tanh, Linear,
    Dropout, residual; LN, Linear 4D, GELU, Linear, Dropout, residual), final
    LN, a D-class head and cross-entropy; checkpointed one block at a time."""
    rows = seq * batch
    boundaries = [12 * (b + 1) for b in range(blocks)]  # each block's output (op ids, 12 ops a block)

    def build(torch):
        nn = torch.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.mix = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d), nn.Dropout(0.1))
                self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

            def forward(self, x):
                x = x + self.mix(self.ln1(x))
                return x + self.mlp(self.ln2(x))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(Block() for _ in range(blocks))
                self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, d)

        return Net()

    def step(torch, model, x, target, checkpointed):
        from torch.utils.checkpoint import checkpoint
        for b in model.blocks:
            x = checkpoint(b, x, use_reentrant=False) if checkpointed else b(x)
        loss = torch.nn.functional.cross_entropy(model.head(model.lnf(x)), target)
        loss.backward()

    def data(torch, dev):
        x = torch.rand(rows, d, device=dev) * 2 - 1
        return x, torch.randint(0, d, (rows,), device=dev)

    return {
        "name": f"transformer:{blocks}:{d}:{seq}:{batch}",
        "spec": f"transformer:{blocks}:{d}:{seq}:{batch}",
        "what": f"{blocks} blocks, width {d}, {rows} rows, cross-entropy over {d} classes",
        "ckpt_torch": "checkpoint(block) for each block",
        "ckpt_remat": "manual:" + ",".join(map(str, boundaries)),
        "input_bytes": 4 * rows * d,
        "build": build, "step": step, "data": data,
    }


def graph_case(spec, what):
    """A preset with convolutions, batch norms, pooling or attention: PyTorch runs
    the graph `remat model --write` gives, op for op (the CPU benchmark's
    tests/bench/bench_run_vs_torch.py, on the GPU), checkpointed with
    torch.utils.checkpoint around every segment between remat's sqrt cuts but the
    last; remat runs sqrt. PyTorch recomputes each segment whole, remat only what
    a backward reads."""
    return {"name": spec, "spec": spec, "graph": True, "what": what,
            "ckpt_torch": "checkpoint() around every segment between sqrt's cuts but the last",
            "ckpt_remat": "sqrt"}


CASES = [
    mlp_case(16, 1024, 64, 4),
    mlp_case(16, 4096, 256, 4),
    transformer_case(4, 512, 128, 8),
    graph_case("resnet:18:64:64:32:10", "torchvision's ResNet-18, 64x64 images, batch 32, 10 classes"),
    graph_case("gpt:4:256:4:256:16:f32:2048", "GPT-2 style, 4 blocks, width 256, 4 heads, 256 tokens, batch 16"),
]

# Models at the size people train (seconds per case; run them by name with --case).
LARGE_CASES = [
    graph_case("resnet:50:64:224:32:1000", "torchvision's ResNet-50, 224x224 images, batch 32, 1000 classes"),
    graph_case("gpt:12:768:12:1024:4:f32:50257", "GPT-2 small, 1024 tokens, batch 4"),
]


def graph_steps(torch, case, remat, dev):
    """{variant: step} for a graph case; sets case["input_bytes"] from the model."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "bench"))
    from bench_run_vs_torch import torch_step_fn
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        subprocess.run([remat, "model", "--model", case["spec"], "--write", path], check=True, capture_output=True)
        with open(path) as f:
            ops = json.load(f)["ops"]
    item = {"i64": 8, "f64": 8, "f16": 2, "bf16": 2}.get(ops[0].get("dtype", "f32"), 4)
    case["input_bytes"] = item * math.prod(ops[0]["shape"])
    return {variant: torch_step_fn(ops, mode, set(), device=dev, keep_grads=True)
            for variant, mode in (("plain", "store-all"), ("checkpointed", "sqrt"))}


# ---- PyTorch ----------------------------------------------------------------------

def module_steps(torch, case, dev):
    """{variant: step} for a case written as a torch.nn module; each step adds
    into the gradients, its zero_grads() zeroes them (untimed)."""
    model = case["build"](torch).to(dev)
    model.train()
    x, target = case["data"](torch, dev)

    def step(ck):
        def run():
            case["step"](torch, model, x, target, ck)
        run.zero_grads = lambda: model.zero_grad(set_to_none=False)
        return run

    return {"plain": step(False), "checkpointed": step(True)}


def measure_steps(torch, step, repeat, warmups=3):
    """[(ms, allocator peak, peak above what was resident)] of `repeat` steps after
    `warmups` (which also make every .grad and the cuBLAS workspace resident):
    CUDA events around the step alone; its gradients are zeroed outside them,
    as remat zeroes its own before a run's marks."""
    for _ in range(warmups):
        step.zero_grads()
        step()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeat):
        step.zero_grads()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        out.append((start.elapsed_time(stop), peak, peak - before))
    return out


def torch_side(case, remat, repeat):
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    steps = graph_steps(torch, case, remat, dev) if case.get("graph") else module_steps(torch, case, dev)
    out = {}
    for variant, step in steps.items():
        times, peaks, above = zip(*measure_steps(torch, step, repeat))
        out[variant] = {"time": statistics.median(times), "peak": max(peaks), "act": max(above)}
    name = torch.cuda.get_device_name()
    del steps
    torch.cuda.empty_cache()
    return out, name


# ---- remat --------------------------------------------------------------------------

def remat_side(remat, case, repeat):
    specs = {"plain": "store-all", "checkpointed": case["ckpt_remat"]}
    cmd = [remat, "run", "-m", case["spec"], "-s", ",".join(specs.values()), "--backend", "cuda", "--json",
           "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    by_name = {s["name"]: s for s in d["strategies"]}
    out = {}
    for variant, spec in specs.items():
        s = by_name.get(spec)
        if s is None or s.get("status") != "ok":
            raise RuntimeError(f"remat {spec}: {s and s.get('status')} {s and s.get('message', '')}")
        parts = s["allocator_parts"]
        act = s["allocator_peak_bytes"] - parts["baseline_bytes"] - parts["workspace_bytes"] - case["input_bytes"]
        out[variant] = {"time": s["time_ms"], "peak": s["allocator_peak_bytes"], "act": act,
                        "same": s.get("matches_store_all")}
    return out, d.get("backend", "?")


# ---- report ---------------------------------------------------------------------------

def report(case, t, r):
    print(f"\n{case['name']}: {case['what']}; float32, no TF32")
    print(f"  checkpointed: PyTorch {case['ckpt_torch']}  |  remat {case['ckpt_remat']}")
    print(f"  {'variant':13s} {'torch ms':>9s} {'remat ms':>9s} {'time x':>7s}   "
          f"{'torch act MiB':>13s} {'remat act MiB':>13s} {'act x':>6s}   {'torch peak':>10s} {'remat peak':>10s}")
    ok = True
    for v in ("plain", "checkpointed"):
        tx, ax = r[v]["time"] / t[v]["time"], r[v]["act"] / t[v]["act"]
        ok = ok and tx <= 1.1 and ax <= 1.0
        print(f"  {v:13s} {t[v]['time']:9.3f} {r[v]['time']:9.3f} {tx:7.3f}   "
              f"{t[v]['act'] / MIB:13.2f} {r[v]['act'] / MIB:13.2f} {ax:6.3f}   "
              f"{t[v]['peak'] / MIB:10.1f} {r[v]['peak'] / MIB:10.1f}")
    print(f"  checkpointed / plain: time torch {t['checkpointed']['time'] / t['plain']['time']:.3f}, "
          f"remat {r['checkpointed']['time'] / r['plain']['time']:.3f}; activations torch "
          f"{t['checkpointed']['act'] / t['plain']['act']:.3f}, remat {r['checkpointed']['act'] / r['plain']['act']:.3f}")
    print(f"  goal (remat act <= torch act, time <= 1.1x): {'met' if ok else 'NOT met'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("remat", help="path to the remat CLI (built with the CUDA backend)")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--case", action="append",
                    help="run only these cases (by name; the large ones: "
                    + ", ".join(c["name"] for c in LARGE_CASES) + "; all: every case)")
    args = ap.parse_args()
    wanted = args.case or [c["name"] for c in CASES]
    if "all" in wanted:
        wanted = [c["name"] for c in CASES + LARGE_CASES]
    cases = [c for c in CASES + LARGE_CASES if c["name"] in wanted]
    unknown = set(wanted) - {c["name"] for c in CASES + LARGE_CASES}
    if unknown:
        ap.error("unknown case(s): " + ", ".join(sorted(unknown)))
    rc = 0
    device = None
    for case in cases:
        try:
            t, device = torch_side(case, args.remat, args.repeat)
            r, backend = remat_side(args.remat, case, args.repeat)
        except Exception as e:  # one case's failure is reported, the others still run
            print(f"\n{case['name']}: failed: {e}")
            rc = 1
            continue
        report(case, t, r)
    if device:
        print(f"\nPyTorch and remat on {device}; medians of {args.repeat} steps after 3 (PyTorch) / 1 (remat) warm-ups")
    return rc


if __name__ == "__main__":
    sys.exit(main())
