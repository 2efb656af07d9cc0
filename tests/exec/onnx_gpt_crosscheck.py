#!/usr/bin/python3
"""A 2-block GPT written as nanoGPT writes it (token embedding, a learned
position table, causal self-attention with the mask buffer sliced and compared,
`masked_fill(-inf)`, dropout everywhere), exported to ONNX in training mode,
through `remat run`: every strategy executes with the same loss and gradients
as store-all and a tracked peak equal to the prediction, and PyTorch running
the file with its own weights (onnx_file_crosscheck.py) agrees on the loss and
every gradient. Exit 77 (skip) without torch or onnx."""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx  # noqa: F401
except ImportError as e:
    print(f"SKIP: cannot import torch/onnx with {sys.executable}: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_file_crosscheck  # noqa: E402

B, T, D, H, V, L = 2, 8, 32, 4, 40, 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        q, k, v = self.c_attn(x).split(D, dim=2)
        q = q.view(B, T, H, D // H).transpose(1, 2)
        k = k.view(B, T, H, D // H).transpose(1, 2)
        v = v.view(B, T, H, D // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(D)
        self.c_fc = nn.Linear(D, 4 * D)
        self.c_proj = nn.Linear(4 * D, D)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(F.gelu(self.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Parameter(0.02 * torch.randn(T, D))  # the first T rows of a position table
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.drop(self.wte(idx) + self.wpe)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def strategy_failures(remat, path):
    """`remat run --strategy all` on the model file: what differs from
    store-all (loss, gradient hash) or from the prediction (tracked peak), as
    messages; None (said why) when the run itself failed."""
    r = subprocess.run([remat, "run", "--model", path, "--strategy", "all", "--repeat", "1", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("remat run failed:", r.returncode, r.stderr)
        return None
    runs = json.loads(r.stdout)["strategies"]
    failures = []
    base = next(s for s in runs if s["name"] == "store-all")
    for s in runs:
        if s["status"] != "ok":
            failures.append(f"{s['name']}: status {s['status']}")
        elif s["grad_hash"] != base["grad_hash"] or s["loss"] != base["loss"] or not s["matches_store_all"]:
            failures.append(f"{s['name']}: loss {s['loss']} hash {s['grad_hash']}, store-all {base['loss']} {base['grad_hash']}")
        elif s["tracked_peak_bytes"] != s["predicted_peak_bytes"]:
            failures.append(f"{s['name']}: tracked {s['tracked_peak_bytes']} != predicted {s['predicted_peak_bytes']}")
    print(f"{len(runs)} strategies:", ", ".join(s["name"] for s in runs))
    return failures


def crosscheck(remat, path, strategy, float32=0.0):
    """onnx_file_crosscheck.py on the model file: True when PyTorch running the
    file with its own weights agrees."""
    return onnx_file_crosscheck.check(remat, path, strategy, float32=float32)


def export_and_check(remat, module, example, name, input_name, strategy, check_ops, opset=13, float32=0.0):
    """Exports `module` to ONNX in training mode, runs every strategy on the
    file (strategy_failures), hands the imported graph's ops to check_ops (it
    returns failure messages) and cross-checks `strategy` against PyTorch
    running the file with its own weights: the exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name + ".onnx")
        torch.onnx.export(onnx_file_crosscheck.distinct_weights(module), example, path,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=opset,
                          input_names=[input_name], output_names=["logits"])
        failures = strategy_failures(remat, path)
        if failures is None:
            return 1
        written = os.path.join(tmp, name + ".json")
        subprocess.run([remat, "model", "--model", path, "--write", written], check=True, capture_output=True)
        failures += check_ops(json.load(open(written))["ops"])
        for f in failures:
            print("FAIL", f)
        return 1 if failures or not crosscheck(remat, path, strategy, float32) else 0


def check_biases(ops):
    """Each torch Linear has a bias parameter exactly when remat's does
    (lm_head has none: a zero one would still learn)."""
    remat_biases = [op.get("bias", True) for op in ops if op["kind"] == "Linear"]
    torch_biases = [m.bias is not None for m in GPT().modules() if isinstance(m, nn.Linear)]
    if sorted(remat_biases) != sorted(torch_biases):
        return [f"Linear biases: remat {remat_biases}, torch {torch_biases}"]
    return []


def main():
    torch.manual_seed(5)
    return export_and_check(sys.argv[1], GPT().train(), torch.randint(0, V, (B, T)), "gpt2_like", "idx", "sqrt",
                            check_biases)


if __name__ == "__main__":
    sys.exit(main())
