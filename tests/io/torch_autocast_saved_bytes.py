#!/usr/bin/env python3
"""PyTorch's saved-for-backward bytes under torch.autocast (bfloat16) against
remat's saved_bytes for the same MLP with its ops in bf16
(docs/memory-model.md#mixed-precision-autocast): equal to the byte.

The torch side: N x (Linear, ReLU) and an MSE loss, trained under
torch.autocast(device_type, dtype=torch.bfloat16) (CPU autocast: torch 1.13
has bfloat16 there), counted with saved_tensors_hooks over unique storages.
Left out, as remat keeps them in the baseline: parameters, the bf16 copies
autocast makes of them (remat's bf16 weights) and the target. What remains:
the bf16 cast of the input (the first Linear's), each ReLU's bf16 output, and
the f32 cast of the last one that mse_loss (an autocast f32 op) keeps.

  torch_autocast_saved_bytes.py --remat PATH --out DIR

Exits 77 (CTest: skipped) when torch cannot be imported, unless CI=true."""
import argparse
import json
import os
import subprocess
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001
    print(f"SKIP: torch not importable with {sys.executable}: {e}")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)


def torch_saved_bytes(layers, width, batch):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*mods).train()
    x, target = torch.randn(batch, width), torch.randn(batch, width)
    params = list(model.parameters())
    saved = {}

    def is_weight_or_copy(t):
        # A parameter, or autocast's cast of one (the same values rounded; addmm
        # may save it transposed).
        for p in params:
            if t is p:
                return True
            c = p.detach().to(t.dtype)
            if (t.shape == c.shape and torch.equal(t, c)) or (t.shape == c.t().shape and torch.equal(t, c.t())):
                return True
        return False

    def pack(t):
        if not is_weight_or_copy(t) and t.data_ptr() != target.data_ptr():
            s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            saved[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x), target)
    loss.backward()
    return sum(saved.values())


def remat_model(layers, width, batch):
    ops = [{"id": 0, "name": "x", "kind": "Input", "shape": [batch, width], "dtype": "bf16"}]
    for i in range(layers):
        ops.append({"id": len(ops), "name": f"fc{i}", "kind": "Linear", "inputs": [len(ops) - 1],
                    "shape": [batch, width], "dtype": "bf16"})
        ops.append({"id": len(ops), "name": f"relu{i}", "kind": "ReLU", "inputs": [len(ops) - 1], "dtype": "bf16"})
    ops.append({"id": len(ops), "name": "loss", "kind": "MSELoss", "inputs": [len(ops) - 1]})
    return {"format": "remat-model", "version": 1, "name": f"mlp-bf16-{layers}x{width}x{batch}", "ops": ops}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for layers, width, batch in [(1, 16, 4), (4, 64, 8), (3, 96, 5)]:
        path = os.path.join(a.out, f"mlp_bf16_{layers}_{width}_{batch}.json")
        with open(path, "w") as f:
            json.dump(remat_model(layers, width, batch), f)
        r = subprocess.run([a.remat, "simulate", "-m", path, "-s", "store-all", "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: remat simulate {path}: {r.stderr.strip()}")
            failed += 1
            continue
        ours = json.loads(r.stdout)["model"]["saved_bytes"]
        theirs = torch_saved_bytes(layers, width, batch)
        ok = ours == theirs
        failed += not ok
        print(f"{'ok' if ok else 'FAIL'}: mlp {layers}x{width} batch {batch} under autocast bf16: "
              f"remat {ours} bytes, torch {theirs} bytes")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
