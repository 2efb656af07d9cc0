#!/usr/bin/env python3
"""remat's plans applied to PyTorch modules on a GPU (docs/pytorch.md,
"Applying a plan"): the models of tests/python/apply_models.py are captured
(on the CPU, as remat_capture does), each strategy's plan is written by
`remat export --torch-plan`, put on the module with remat_capture.apply, and
one training step runs on the GPU.

Compared: torch.cuda.max_memory_allocated() above the step's baseline
(memory_allocated() before it: parameters, their gradients, allocated by a
warm-up step and zeroed in place, the target; the input is made inside the
step, as remat counts it) against remat's predicted peak, within 5 % (the
allocator rounds every block to 512 bytes and kernels take workspace, which
remat does not model); and the bytes allocated when the forward pass has
returned, above the baseline and less the loss, against remat's resident
bytes then (reported). Gradients are checked allclose to the unwrapped
module's on the GPU.

Usage: gpu/torch_apply.py PATH/TO/remat [--out DIR]
Exit 1 when a peak is off by more than 5 % or gradients differ; a plan this
PyTorch cannot apply is listed with the reason and is no failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import torch  # noqa: E402

import apply_models  # noqa: E402
import remat_capture  # noqa: E402


def step(model, module, make_input, loss_fn):
    """One step on the GPU: (peak above baseline, forward-end bytes above it, grads)."""
    for p in module.parameters():
        if p.grad is not None:
            p.grad.zero_()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = loss_fn(model(make_input()))
    torch.cuda.synchronize()
    held = loss.untyped_storage().nbytes() if hasattr(loss, "untyped_storage") else loss.storage().nbytes()
    forward_end = torch.cuda.memory_allocated() - base - held
    loss.backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    return peak, forward_end, {n: p.grad.detach().clone() for n, p in module.named_parameters()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_apply: no CUDA device")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = args.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}; selective checkpointing: "
          f"{remat_capture.has_selective_checkpointing()}")
    print(f"{'model':12} {'strategy':22} {'peak above base':>16} {'remat peak':>12} {'diff':>8} "
          f"{'fwd-end above base':>19} {'remat fwd-end':>14}")
    bad = 0
    for name, build in apply_models.MODELS.items():
        net, make, loss_fn = build()
        path = os.path.join(out, f"{name}.json")
        remat_capture.save(remat_capture.capture(net, make(), loss_fn, name=name), path)
        net, make_gpu, loss_gpu = build("cuda")  # the same weights, batch and target, on the GPU
        step(net, net, make_gpu, loss_gpu)  # warm-up: gradients allocated, kernels chosen
        _, _, ref = step(net, net, make_gpu, loss_gpu)
        for spec in apply_models.STRATEGIES[name]:
            plan_path = os.path.join(out, f"{name}.{spec.replace(':', '_').replace(',', '-')}.plan.json")
            p = subprocess.run([args.remat, "export", "--model", path, "--strategy", spec, "--torch-plan", plan_path],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{name:12} {spec:22} remat export failed: {p.stderr.strip()}")
                bad += 1
                continue
            plan = remat_capture.load_plan(plan_path)
            try:
                applied = remat_capture.apply(net, plan)
            except remat_capture.PlanError as e:
                print(f"{name:12} {spec:22} not applied: {e}")
                continue
            step(applied, net, make_gpu, loss_gpu)
            peak, fwd, grads = step(applied, net, make_gpu, loss_gpu)
            pred = plan["predicted"]
            diff = (peak - pred["peak_bytes"]) / pred["peak_bytes"]
            same = all(torch.allclose(grads[n], g, rtol=1e-4, atol=1e-5) for n, g in ref.items())
            ok = abs(diff) <= 0.05 and same
            bad += not ok
            print(f"{name:12} {spec:22} {peak:>16,} {pred['peak_bytes']:>12,} {diff * 100:>+7.2f}% "
                  f"{fwd:>19,} {pred['forward_end_bytes']:>14,}  {'ok' if ok else 'FAIL'}"
                  f"{'' if same else ' (gradients differ)'}")
    print("all within 5 %" if not bad else f"{bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
