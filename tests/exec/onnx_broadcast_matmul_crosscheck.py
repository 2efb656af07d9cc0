#!/usr/bin/python3
"""Attention whose keys and values are shared across the batch, written with
torch.matmul's broadcasting: q (B,H,T,d) @ k (1,H,d,T), then @ v (H,T,d).
Exported to ONNX in training mode, the importer keeps both products as
MatMuls of two activations; `remat run` executes every strategy with
store-all's loss and gradients and a tracked peak equal to the prediction, and
the PyTorch cross-check (torch_crosscheck.py) agrees with autograd on the loss
and every gradient (a broadcast operand's gradient summed over the batch).
Exit 77 (skip) without torch."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch with {sys.executable}: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_gpt_crosscheck import crosscheck, strategy_failures  # noqa: E402

B, T, D, H, C = 2, 4, 6, 2, 5


class SharedKeys(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D)
        # No bias: a bias on the keys adds a constant to each softmax row, so
        # its gradient is zero and both sides would compare rounding noise.
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D)
        self.head = nn.Linear(D, C)

    def forward(self, x):
        q = self.q(x).view(B, T, H, D // H).transpose(1, 2)  # (B, H, T, d)
        k = self.k(x[:1]).view(1, T, H, D // H).permute(0, 2, 3, 1)  # (1, H, d, T): broadcast over B
        v = self.v(x[1:2]).view(T, H, D // H).transpose(0, 1)  # (H, T, d): no batch dimension
        att = F.softmax(q @ k, dim=-1)
        return self.head((att @ v).transpose(1, 2).reshape(B, T, D))


def main():
    remat = sys.argv[1]
    torch.manual_seed(3)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "shared_keys.onnx")
        torch.onnx.export(SharedKeys().train(), torch.randn(B, T, D), path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=13, input_names=["x"], output_names=["y"])
        failures = strategy_failures(remat, path)
        if failures is None:
            return 1
        # The products stay broadcast MatMuls (an importer that expanded the
        # operands first would test nothing here).
        written = os.path.join(tmp, "shared_keys.json")
        subprocess.run([remat, "model", "--model", path, "--write", written], check=True, capture_output=True)
        ops = json.load(open(written))["ops"]
        shapes = [[ops[i]["shape"] for i in op["inputs"]] for op in ops if op["kind"] == "MatMul"]
        want = [[[B, H, T, D // H], [1, H, D // H, T]], [[B, H, T, T], [H, T, D // H]]]
        if shapes != want:
            failures.append(f"MatMul operand shapes {shapes}, expected {want}")
        for f in failures:
            print("FAIL", f)
        return 1 if failures or not crosscheck(remat, path, "recompute-all") else 0


if __name__ == "__main__":
    sys.exit(main())
