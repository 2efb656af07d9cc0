#!/usr/bin/python3
"""Attention whose keys and values are shared across the batch, written with
torch.matmul's broadcasting: q (B,H,T,d) @ k (1,H,d,T), then @ v (H,T,d).
Exported to ONNX in training mode, the importer keeps both products as
MatMuls of two activations; `remat run` executes every strategy with
store-all's loss and gradients and a tracked peak equal to the prediction, and
PyTorch running the file with its own weights (onnx_file_crosscheck.py) agrees
on the loss and every gradient (a broadcast operand's gradient summed over the
batch). Exit 77 (skip) without torch or onnx."""
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx  # noqa: F401
except ImportError as e:
    print(f"SKIP: cannot import torch/onnx with {sys.executable}: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_gpt_crosscheck import export_and_check  # noqa: E402

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


def check_products(ops):
    """The products stay broadcast MatMuls (an importer that expanded the
    operands first would test nothing here)."""
    shapes = [[ops[i]["shape"] for i in op["inputs"]] for op in ops if op["kind"] == "MatMul"]
    want = [[[B, H, T, D // H], [1, H, D // H, T]], [[B, H, T, T], [H, T, D // H]]]
    return [] if shapes == want else [f"MatMul operand shapes {shapes}, expected {want}"]


def main():
    torch.manual_seed(3)
    return export_and_check(sys.argv[1], SharedKeys().train(), torch.randn(B, T, D), "shared_keys", "x",
                            "recompute-all", check_products)


if __name__ == "__main__":
    sys.exit(main())
