#!/usr/bin/env python3
"""remat's plans applied to PyTorch modules on a GPU (docs/pytorch.md,
"Applying a plan"): the models of tests/python/apply_models.py are captured
(on the CPU, as remat_capture does), each strategy's plan is written by
`remat export --torch-plan`, put on the module with remat_capture.apply, and
one training step runs on the GPU.

Measured from the CUDA caching allocator's own trace
(torch.cuda.memory._record_memory_history; remat_capture._alloc): the bytes
allocated above the step's start (parameters, the target, the loss's seed),
with .grad None at the start and the storages that end as .grad left out (remat
counts every gradient buffer in its baseline and writes each gradient into its
buffer), and the loss left out (the caller's). Its peak is compared with
remat's predicted peak, within 5 % (the allocator may round a block to 512
bytes and kernels take workspace, which remat does not model); the bytes when
the forward pass has returned against remat's resident bytes then
(reported). Gradients are checked allclose to the unwrapped module's.

Also reported, for the loop that zeroes .grad in place (zero_grad(set_to_none=
False)): torch.cuda.max_memory_allocated() above the step's baseline (the
gradients in it), and how much of it is AccumulateGrad's transients: with
.grad defined, autograd makes each parameter's gradient as a new tensor and
adds it into .grad in place (torch/csrc/autograd/functions/accumulate_grad.h,
accumulateGrad: `variable_grad += new_grad`), so one parameter's gradient
(a Linear's weight and bias) is allocated twice for a moment; remat's model
has no such moment. Not compared (the first run, 2026-11-28 on an H100, did
compare it: the MLP's peaks were 132,608 to 133,120 B above remat's).

Usage: gpu/torch_apply.py PATH/TO/remat [--out DIR] [--device cpu] [--models a,b]
--device cpu: the same on the CPU (the profiler's allocation events), for a
dry run (tests/python/test_apply_alloc.py). Exit 1 when a peak is off by more
than 5 % or gradients differ; a plan this PyTorch cannot apply is listed with
the reason and is no failure.
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
from remat_capture._alloc import allocator_step  # noqa: E402


def step(model, module, make_input, loss_fn):
    """One step on the device, .grad None: (peak above its start, forward-end bytes, grads),
    the gradients' storages and the loss left out (remat_capture._alloc)."""
    r = allocator_step(model, make_input, loss_fn, module=module)
    return r["peak"], r["forward_end"], r["grads"]


def zeroed_step(model, module, make_input, loss_fn):
    """One step with .grad zeroed in place: (its peak above the baseline, the
    gradients in it: torch.cuda.max_memory_allocated() on CUDA, the
    allocator's events on the CPU; how much AccumulateGrad's transients raise
    it, from a second such step whose hooks mark them)."""
    cuda = next(module.parameters()).device.type == "cuda"
    r = allocator_step(model, make_input, loss_fn, module=module, grads="zeroed")
    if not cuda:
        return r["peak"], r["transient"]
    for p in module.parameters():
        p.grad.zero_()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss_fn(model(make_input())).backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base, r["transient"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--models", default=",".join(apply_models.MODELS))
    args = ap.parse_args()
    device = args.device
    if device == "cuda":
        if not torch.cuda.is_available():
            print("torch_apply: no CUDA device")
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    out = args.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    where = torch.cuda.get_device_name() if device == "cuda" else "the CPU (dry run)"
    print(f"PyTorch {torch.__version__} on {where}; selective checkpointing: "
          f"{remat_capture.has_selective_checkpointing()}")
    print(f"{'model':12} {'strategy':22} {'peak above base':>16} {'remat peak':>12} {'diff':>8} "
          f"{'fwd-end above base':>19} {'remat fwd-end':>14} {'zeroed .grad: peak':>19} {'of it AccumulateGrad':>21}")
    bad = 0
    for name in args.models.split(","):
        build = apply_models.MODELS[name]
        net, make, loss_fn = build()
        path = os.path.join(out, f"{name}.json")
        remat_capture.save(remat_capture.capture(net, make(), loss_fn, name=name), path)
        net, make_gpu, loss_gpu = build(device)  # the same weights, batch and target, on the device
        step(net, net, make_gpu, loss_gpu)  # warm-up: kernels chosen
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
            zeroed, transient = zeroed_step(applied, net, make_gpu, loss_gpu)
            pred = plan["predicted"]
            diff = (peak - pred["peak_bytes"]) / pred["peak_bytes"]
            same = all(torch.allclose(grads[n], g, rtol=1e-4, atol=1e-5) for n, g in ref.items())
            ok = abs(diff) <= 0.05 and same
            bad += not ok
            print(f"{name:12} {spec:22} {peak:>16,} {pred['peak_bytes']:>12,} {diff * 100:>+7.2f}% "
                  f"{fwd:>19,} {pred['forward_end_bytes']:>14,} {zeroed:>19,} {transient:>21,}  "
                  f"{'ok' if ok else 'FAIL'}"
                  f"{'' if same else ' (gradients differ)'}")
    print("all within 5 %" if not bad else f"{bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
