#!/usr/bin/python3
"""Models whose ops go through the pointwise family and the reductions
(tests/python/family_models.py: a Llama-style decoder, squeeze-and-excitation
with layer scale, MobileNetV3-style hardswish, an MLP through the rest of the
family), captured with remat_capture, then:

- remat's saved_bytes equals PyTorch's own count, every op has a kind (no
  Generic) and `remat model` calls the file executable;
- `remat run` runs it under every strategy on the CPU: each ok, tracked peak
  == predicted, loss and gradients bit for bit store-all's;
- the module itself (not a rebuild of remat's graph), given remat's
  parameters, input and labels from `remat run --dump`, gives PyTorch autograd
  gradients (float64) that agree with remat's: |remat − torch| ≤ 1e-5·max|torch|
  + 1e-4·|torch| per element, the loss within 1e-4.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "exec"))

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch/numpy with {sys.executable}: {e}")
    sys.exit(77)

import remat_capture  # noqa: E402
from family_models import MODELS  # noqa: E402
from harness import check, not_bitwise, not_exact, parse_args, remat, run_every_strategy, simulated, summary  # noqa: E402
from torch_count import torch_count  # noqa: E402
from torch_crosscheck import read_safetensors  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def check_against_module(name, net, doc, dump):
    """The module on remat's parameters, input and labels: loss and every gradient."""
    t, _ = read_safetensors(os.path.join(dump, "tensors.safetensors"))
    net = net.double()
    params = dict(net.named_parameters())
    mapped = {e["tensor"]: e["param"] for e in doc["parameters"]}
    dumped = sorted(k[len("param."):] for k in t if k.startswith("param."))
    check(sorted(mapped) == dumped, f"{name}: each of remat's {len(dumped)} parameter tensors is a module parameter "
                                    f"(unmapped: {sorted(set(dumped) - set(mapped))})")
    with torch.no_grad():
        for tensor, pname in mapped.items():
            params[pname].copy_(torch.from_numpy(t["param." + tensor].astype(np.float64)).reshape(params[pname].shape))
    net.zero_grad()
    x = t["input"]
    x = torch.from_numpy(x.astype(np.int64)) if x.dtype.kind == "i" else torch.from_numpy(x.astype(np.float64))
    out = net(x)
    labels = torch.from_numpy(t["labels"].astype(np.int64))
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), labels)
    loss.backward()
    got = float(t["loss"])
    check(abs(got - loss.item()) <= RTOL * abs(loss.item()),
          f"{name}: loss remat {got:.8g}, the module's {loss.item():.8g}")
    worst, where = 0.0, ""
    for tensor, pname in mapped.items():
        ref = params[pname].grad.detach().numpy().reshape(-1)
        mine = t["grad." + tensor].astype(np.float64).reshape(-1)
        bound = ATOL * np.abs(ref).max() + RTOL * np.abs(ref)
        ratio = float(np.max(np.abs(mine - ref) / np.maximum(bound, 1e-30)))
        if ratio > worst:
            worst, where = ratio, f"{tensor} ({pname})"
    check(worst <= 1.0, f"{name}: every gradient agrees with the module's autograd (worst {worst:.3f} of the "
                        f"tolerance, at {where})")


def main():
    args = parse_args()
    for name, builder in MODELS.items():
        net, x, loss_fn, labels = builder()
        want = torch_count(net, x, loss_fn, labels)
        net.zero_grad()
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        kinds = [op["kind"] for op in doc["ops"]]
        generic = [op.get("comment") for op in doc["ops"] if op["kind"] == "Generic"]
        check(not generic, f"{name}: every op has a kind remat runs (Generic: {generic})")
        check("Pointwise" in kinds, f"{name}: goes through the pointwise family "
                                    f"({kinds.count('Pointwise')} Pointwise, {kinds.count('Reduce')} Reduce)")
        model = simulated(args, name, path, want)
        if model is None:
            continue
        listed = remat(args, "model", "--model", path).stdout
        check(model["executable"] and "simulate-only ops: none (executable with remat run)" in listed,
              f"{name}: executable, and `remat model` says so ({[l for l in listed.splitlines() if 'simulate' in l or 'why' in l]})")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            bad = not_bitwise(res)
            check(not bad, f"{name}: all {len(res)} strategies ran and match store-all bit for bit (not: {bad})")
            off = not_exact(res)
            check(not off, f"{name}: tracked peak == predicted peak under every strategy (not: {off})")
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "dump")
            d = remat(args, "run", "--model", path, "--strategy", "sqrt", "--repeat", "1", "--backend", "cpu",
                      "--seed", "3", "--dump", dump)
            check(d.returncode == 0, f"{name}: remat run --dump exits 0 ({d.stderr.strip()[:300]})")
            if d.returncode == 0:
                check_against_module(name, net, doc, dump)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
