#!/usr/bin/python3
"""torchvision's ResNet-18, exported to ONNX in training mode, through `remat run`
and the PyTorch cross-check (torch_crosscheck.py): the importer's graph executes
under a recomputing strategy and agrees with autograd on the loss and every
gradient. Exit 77 (skip) without torch/torchvision."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torchvision
except ImportError as e:
    print(f"SKIP: cannot import torch/torchvision with {sys.executable}: {e}")
    sys.exit(77)


def main():
    remat = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.onnx")
        m = torchvision.models.resnet18(num_classes=10).train()
        # 128x128 and batch 2: the last stage's batch norms see 32 values per channel
        # (with 8, the full-width net exceeds 1e-4 on a few of its millions of elements:
        # float32 rounding amplified by batch norm's backward over few values).
        torch.onnx.export(m, torch.randn(2, 3, 128, 128), path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=13)
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run([sys.executable, os.path.join(here, "torch_crosscheck.py"), "--remat", remat,
                               "--model", path, "--strategy", "sqrt"]).returncode


if __name__ == "__main__":
    sys.exit(main())
