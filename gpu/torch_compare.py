#!/usr/bin/env python3
"""PyTorch vs remat on the same MLP: time and peak memory of one training step.

The model is remat's preset mlp:16:4096:256: input (256, 4096), 16 x (Linear
4096->4096 + ReLU), MSE loss against a target of the same shape, float32, no
TF32. PyTorch runs it plainly and with torch.utils.checkpoint.checkpoint_sequential
in 4 segments (about sqrt of 16 blocks); remat runs store-all and sqrt through
`remat run --backend cuda --json`.

Peaks: PyTorch's torch.cuda.max_memory_allocated over one step (parameters and
their gradients resident, as in remat's baseline), and the part above what was
allocated before the step; remat's device_peak_bytes (baseline + scratch +
cuBLAS workspace + the pool's high-water mark) and measured_peak_bytes (tracked
activations and activation gradients only). Not the same definition: compare
the ratios within each tool first.

Usage: gpu/torch_compare.py PATH/TO/remat [--repeat N]
"""
import argparse
import json
import statistics
import subprocess
import sys

SPEC = "mlp:16:4096:256"
LAYERS, WIDTH, BATCH = 16, 4096, 256
SEGMENTS = 4
MIB = 1 << 20


def torch_rows(repeat):
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev)
    x = torch.rand(BATCH, WIDTH, device=dev) * 2 - 1
    target = torch.rand(BATCH, WIDTH, device=dev) * 2 - 1
    loss_fn = torch.nn.MSELoss()

    def step(checkpointed):
        if checkpointed:
            y = checkpoint_sequential(model, SEGMENTS, x, use_reentrant=False)
        else:
            y = model(x)
        loss = loss_fn(y, target)
        loss.backward()
        return loss

    rows = []
    for name, ck in (("torch plain", False), (f"torch checkpoint_sequential({SEGMENTS})", True)):
        for _ in range(3):  # warm-up; also makes every .grad resident
            model.zero_grad(set_to_none=False)
            step(ck)
        torch.cuda.synchronize()
        times = []
        peak = above = 0
        for _ in range(repeat):
            model.zero_grad(set_to_none=False)
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step(ck)
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop))
            peak = max(peak, torch.cuda.max_memory_allocated())
            above = max(above, torch.cuda.max_memory_allocated() - before)
            del loss
        rows.append((name, statistics.median(times), peak, above))
    return rows, torch.cuda.get_device_name()


def remat_rows(remat, repeat):
    cmd = [remat, "run", "-m", SPEC, "-s", "store-all,sqrt", "--backend", "cuda", "--json",
           "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    rows = []
    for s in d["strategies"]:
        if s.get("status") != "ok":
            raise RuntimeError(f"remat {s.get('name')}: {s.get('status')} {s.get('message', '')}")
        rows.append((f"remat {s['name']}", s["time_ms"], s["device_peak_bytes"], s["measured_peak_bytes"]))
    return rows, d.get("backend", "?")


def print_table(title, rows):
    print(title)
    print(f"{'run':40s} {'time ms':>9s} {'peak MiB':>10s} {'above MiB':>10s} {'time x':>7s} {'peak x':>7s} {'above x':>8s}")
    t0, p0, a0 = rows[0][1], rows[0][2], rows[0][3]
    for name, t, p, a in rows:
        print(f"{name:40s} {t:9.3f} {p / MIB:10.1f} {a / MIB:10.1f} {t / t0:7.3f} {p / p0:7.3f} {a / a0 if a0 else 0:8.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("remat", help="path to the remat CLI (built with the CUDA backend)")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()

    rc = 0
    try:
        trows, name = torch_rows(args.repeat)
    except Exception as e:  # no torch, no GPU: say so, still try remat
        print(f"torch_compare: PyTorch part skipped: {e}")
        trows, name = [], "?"
    try:
        rrows, backend = remat_rows(args.remat, args.repeat)
    except Exception as e:
        print(f"torch_compare: remat part failed: {e}")
        rrows, backend, rc = [], "?", 1

    print(f"\n{SPEC}: {LAYERS} x (Linear {WIDTH}x{WIDTH} + ReLU), batch {BATCH}, MSE; float32, no TF32")
    print(f"PyTorch on {name}; remat backend: {backend}; medians of {args.repeat} steps")
    if trows:
        print_table("PyTorch (peak: max_memory_allocated; above: peak minus what was allocated before the step)", trows)
    if rrows:
        print_table("remat (peak: device_peak_bytes; above: measured_peak_bytes, tracked activations + gradients)", rrows)
    if trows and rrows:
        print("\nratios checkpointed / plain:")
        print(f"  time: torch {trows[1][1] / trows[0][1]:.3f}, remat {rrows[1][1] / rrows[0][1]:.3f}")
        print(f"  peak: torch {trows[1][2] / trows[0][2]:.3f}, remat {rrows[1][2] / rrows[0][2]:.3f}")
        print(f"  above baseline: torch {trows[1][3] / trows[0][3]:.3f}, remat {rrows[1][3] / rrows[0][3]:.3f}")
        print("remat vs torch (plain, checkpointed):")
        print(f"  time: {rrows[0][1] / trows[0][1]:.3f}, {rrows[1][1] / trows[1][1]:.3f}")
        print(f"  peak: {rrows[0][2] / trows[0][2]:.3f}, {rrows[1][2] / trows[1][2]:.3f}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
