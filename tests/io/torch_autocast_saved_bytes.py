#!/usr/bin/env python3
"""PyTorch's saved-for-backward bytes under torch.autocast (bfloat16) against
remat's saved_bytes for the same model (docs/memory-model.md#mixed-precision-autocast):
equal to the byte, for an MLP written with its ops in bf16, and for
torchvision's ResNet-18 and a GPT-2 block stack against the presets under
autocast's dtype policies (resnet:...:bf16@cpu, gpt:...:bf16@cpu, @cuda).

The torch side: N x (Linear, ReLU) and an MSE loss, trained under
torch.autocast(device_type, dtype=torch.bfloat16) (CPU autocast: torch 1.13
has bfloat16 there), counted with saved_tensors_hooks over unique storages.
Left out, as remat keeps them in the baseline: parameters, the bf16 copies
autocast makes of them (remat's bf16 weights) and the target. What remains:
the bf16 cast of the input (the first Linear's), each ReLU's bf16 output, and
the f32 cast of the last one that mse_loss (an autocast f32 op) keeps.

The presets: torch.autocast("cpu") runs torchvision's resnet18 and a
nanoGPT stack (tests/io/torch_saved_bytes.py's modules, position ids a
buffer). What remat charges beyond the f32 figures: the bf16 copy autocast
saves of an f32 input it casts (the image before conv1, each LayerNorm's
output before the Linear that reads it) and the f32 log-probabilities of the
loss. Left out of both counts: parameters, buffers, autocast's casts of the
weights, labels and 0-dim tensors (a Python scalar autograd wraps, nll_loss's
total_weight), which remat keeps in the baseline.

The @cuda policy differs from the CPU's, for these models, only in softmax
(CUDA's fp32 list; layer_norm too, whose input here is f32 anyway). CPU
autocast cannot run CUDA's lists, so the @cuda GPT is compared with the
same module computing its softmax in f32 (F.softmax(..., dtype=float32), the
call CUDA autocast makes): the one cast CUDA's lists add for this block,
done by hand. ResNet-18 runs the same on both devices (batch_norm, pooling,
ReLU and add are on neither list), so @cuda and @cpu must both equal torch's
CPU count.

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
    import torchvision  # noqa: F401  (tests/io/torch_saved_bytes.py's ResNet)
except Exception as e:  # noqa: BLE001
    print(f"SKIP: torch/torchvision not importable with {sys.executable}: {e}")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_saved_bytes as tsb  # noqa: E402  (the f32 check's modules)


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


def autocast_saved_bytes(model, x, loss_kind):
    """Unique storages autograd saves in one autocast (bf16, CPU) training
    step, less the baseline (see the module docstring), and apart from them
    the 0-dim ones."""
    model.train()
    params = list(model.parameters())
    excluded = {tsb.storage_key(t) for t in params + list(model.buffers())}
    by_shape = {}
    for p in params:
        by_shape.setdefault(tuple(p.shape), []).append(p)
        by_shape.setdefault(tuple(p.t().shape) if p.dim() == 2 else None, []).append(p)
    seen = {}
    scalars = {}

    def weight_cast(t):
        # autocast's bf16 copy of a weight (addmm may save it transposed).
        for p in by_shape.get(tuple(t.shape), []):
            c = p.detach().to(t.dtype)
            if (c.shape == t.shape and torch.equal(c, t)) or (c.dim() == 2 and c.t().shape == t.shape and torch.equal(c.t(), t)):
                return True
        return False

    def pack(t):
        key = tsb.storage_key(t)
        if key in excluded or key in seen or (t.is_floating_point() and weight_cast(t)):
            return t
        (scalars if t.dim() == 0 else seen)[key] = t.storage().nbytes()
        return t

    with torch.no_grad():
        out_shape = model(x).shape
    target = torch.randn(out_shape)
    labels = torch.randint(0, out_shape[-1], (out_shape.numel() // out_shape[-1],))
    excluded |= {tsb.storage_key(target), tsb.storage_key(labels)}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(x)
            if loss_kind == "mse":
                loss = F.mse_loss(y, target)
            else:
                loss = F.cross_entropy(y.reshape(-1, y.size(-1)), labels)
    loss.backward()
    return sum(seen.values()), sum(scalars.values())


class Gpt(tsb.Gpt):
    """tests/io/torch_saved_bytes.py's nanoGPT, its position ids a buffer (a
    constant: remat's learned AddConst keeps no ids), its softmax in f32 when
    `f32_softmax` (what CUDA autocast runs)."""

    def __init__(self, layers, d, heads, seq, vocab, f32_softmax):
        super().__init__(layers, d, heads, seq, vocab)
        self.register_buffer("pos", torch.arange(0, seq, dtype=torch.long))
        for block in self.h:
            block.attn.softmax_dtype = torch.float32 if f32_softmax else None

    def forward(self, idx):
        x = self.drop(self.wte(idx) + self.wpe(self.pos[:idx.size(1)]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def remat_saved_bytes(remat, source):
    r = subprocess.run([remat, "simulate", "-m", source, "-s", "store-all", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"remat simulate {source}: {r.stderr.strip()}")
    return json.loads(r.stdout)["model"]["saved_bytes"]


# (label, torch module builder, remat preset)
PRESETS = [
    ("resnet18 autocast cpu", lambda: (tsb.resnet18(2, 32, 10)[0], torch.randn(2, 3, 32, 32), "ce"),
     "resnet:18:64:32:2:10:bf16@cpu"),
    ("resnet18 autocast cuda", lambda: (tsb.resnet18(2, 32, 10)[0], torch.randn(2, 3, 32, 32), "ce"),
     "resnet:18:64:32:2:10:bf16@cuda"),
    ("gpt 2 blocks autocast cpu", lambda: (Gpt(2, 64, 4, 32, 96, False), torch.randint(0, 96, (2, 32)), "ce"),
     "gpt:2:64:4:32:2:bf16@cpu:96"),
    ("gpt 2 blocks autocast cuda", lambda: (Gpt(2, 64, 4, 32, 96, True), torch.randint(0, 96, (2, 32)), "ce"),
     "gpt:2:64:4:32:2:bf16@cuda:96"),
    ("gpt 1 block autocast cuda", lambda: (Gpt(1, 48, 3, 16, 50, True), torch.randint(0, 50, (3, 16)), "ce"),
     "gpt:1:48:3:16:3:bf16@cuda:50"),
]


def check_captures(a):
    """The capture path: remat_capture under torch.autocast (CPU, bf16) writes
    autocast's casts of activations as cast ops and leaves its casts of the
    weights in the baseline; the file's saved bytes equal the capture's own
    count, which is the presets' figure plus the 0-dim scalars the capture
    keeps (aux) and the presets do not; the captured GPT runs on the CPU
    backend, every strategy bit for bit as store-all."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import remat_capture
    failed = 0
    cases = [("gpt", lambda: (Gpt(1, 48, 3, 16, 50, False), torch.randint(0, 50, (3, 16))), "gpt:1:48:3:16:3:bf16@cpu:50"),
             ("resnet18", lambda: (tsb.resnet18(2, 32, 10)[0], torch.randn(2, 3, 32, 32)), "resnet:18:64:32:2:10:bf16@cpu")]
    for name, build, preset in cases:
        torch.manual_seed(0)
        model, x = build()
        labels = None

        def loss_fn(y):
            nonlocal labels
            if labels is None:
                labels = torch.randint(0, y.size(-1), (y.numel() // y.size(-1),))
            return F.cross_entropy(y.reshape(-1, y.size(-1)), labels)

        with torch.autocast("cpu", dtype=torch.bfloat16):
            doc = remat_capture.capture(model, x, loss_fn=loss_fn)
        path = os.path.join(a.out, f"captured_autocast_{name}.json")
        remat_capture.save(doc, path)
        counted = remat_capture.torch_saved_bytes(doc)
        ours = remat_saved_bytes(a.remat, path)
        torch.manual_seed(0)
        model, x = build()
        theirs, scalars = autocast_saved_bytes(model, x, "ce")
        preset_bytes = remat_saved_bytes(a.remat, preset)
        ok = ours == counted == theirs + scalars and preset_bytes == theirs
        failed += not ok
        print(f"{'ok' if ok else 'FAIL'}: captured {name} under autocast: file {ours} bytes, capture's count {counted}, "
              f"torch {theirs} + {scalars} in 0-dim scalars; {preset}: {preset_bytes}")
    path = os.path.join(a.out, "captured_autocast_gpt.json")
    r = subprocess.run([a.remat, "run", "-m", path, "--strategy", "store-all,recompute-all,sqrt", "--backend", "cpu",
                        "--repeat", "1", "--json"], capture_output=True, text=True)
    runs = json.loads(r.stdout)["strategies"] if r.returncode == 0 else []
    ok = len(runs) == 3 and all(s["matches_store_all"] and s["tracked_peak_bytes"] == s["predicted_peak_bytes"] for s in runs)
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: the captured autocast GPT runs on the CPU, every strategy bitwise equal to store-all, "
          f"tracked peaks the predicted ones{'' if r.returncode == 0 else ': ' + r.stderr.strip()}")
    return failed


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
    for label, build, preset in PRESETS:
        torch.manual_seed(0)
        model, x, loss_kind = build()
        theirs, _ = autocast_saved_bytes(model, x, loss_kind)
        try:
            ours = remat_saved_bytes(a.remat, preset)
        except RuntimeError as e:
            print(f"FAIL: {e}")
            failed += 1
            continue
        ok = ours == theirs
        failed += not ok
        print(f"{'ok' if ok else 'FAIL'}: {label} ({preset}): remat {ours} bytes, torch {theirs} bytes")
    failed += check_captures(a)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
