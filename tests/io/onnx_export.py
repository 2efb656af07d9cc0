#!/usr/bin/python3
"""Exports small PyTorch models to ONNX for tests/io/test_onnx_import.cpp, and
computes PyTorch's loss and gradients for the executor cross-check.

  export OUTDIR            write mlp.onnx, block13.onnx, block17.onnx (+ .pt state),
                           dropout_train.onnx and pad_roll.onnx (training mode)
  grads OUTDIR NAME        read NAME.input.f32 and NAME.target.f32 (raw float32),
                           write NAME.torch.f32: [loss, grads of every parameter
                           in the executor's order (per op: weight (out,in), bias;
                           LayerNorm: gamma, beta)]

Exits 77 (CTest: skipped) when torch cannot be imported: run it with Debian's
/usr/bin/python3, which sees python3-torch."""
import os
import sys

try:
    import torch
    import torch.nn as nn
except Exception as e:  # noqa: BLE001
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)

D_IN, HID, D_OUT, BATCH = 8, 16, 4, 6
B, T, D = 2, 5, 16


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HID)
        self.fc2 = nn.Linear(HID, HID)
        self.fc3 = nn.Linear(HID, D_OUT)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))

    def params(self):  # the executor's order
        return [self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, self.fc3.weight, self.fc3.bias]


class Block(nn.Module):
    """A pre-norm transformer MLP block: x + Dropout(fc2(GELU(fc1(LN(x)))))."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(nn.functional.gelu(self.fc1(self.ln(x)))))

    def params(self):
        return [self.ln.weight, self.ln.bias, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias]


MODELS = {"mlp": (Mlp, (BATCH, D_IN), 13), "block13": (Block, (B, T, D), 13), "block17": (Block, (B, T, D), 17)}


class PadRoll(nn.Module):
    """Padding and rolling as torch exports them (opset 13): nn.ReflectionPad2d,
    F.pad replicate (Pad edge) and constant with a crop and a fill, its pads
    computed by shape arithmetic; torch.roll and a circular convolution's
    padding as Slice and Concat."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular")

    def forward(self, x):
        x = self.conv(nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"))
        x = nn.functional.pad(x, (1, 2, 0, 1), mode="replicate")
        x = nn.functional.pad(x, (2, 0, -1, 1), value=0.25)
        x = torch.roll(x, (-2, 1), (2, 3))
        return self.conv2(x)


def build(name):
    cls, shape, _ = MODELS[name]
    torch.manual_seed(1234 + len(name))
    m = cls().eval()
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        for p in m.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return m, shape


def export(outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, (_, _, opset) in MODELS.items():
        m, shape = build(name)
        x = torch.randn(*shape)
        torch.onnx.export(m, (x,), os.path.join(outdir, name + ".onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"], do_constant_folding=True)
        # The weights as the importer must deliver them, for the C++ test.
        with open(os.path.join(outdir, name + ".params.f32"), "wb") as f:
            for p in m.params():
                f.write(p.detach().contiguous().numpy().astype("<f4").tobytes())
    # Dropout survives only a training-mode export (ratio input, unused mask output).
    torch.manual_seed(7)
    d = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.25), nn.ReLU())
    torch.onnx.export(d, (torch.randn(4, 8),), os.path.join(outdir, "dropout_train.onnx"), opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["y"])
    torch.manual_seed(8)
    torch.onnx.export(PadRoll(), (torch.randn(2, 3, 8, 9),), os.path.join(outdir, "pad_roll.onnx"), opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["y"])
    print("exported", ", ".join(MODELS), "dropout_train and pad_roll to", outdir)


def grads(outdir, name):
    import numpy as np
    m, shape = build(name)
    m = m.double()
    x = torch.from_numpy(np.fromfile(os.path.join(outdir, name + ".input.f32"), dtype="<f4").astype("f8")).reshape(shape)
    y = m(x)
    t = torch.from_numpy(np.fromfile(os.path.join(outdir, name + ".target.f32"), dtype="<f4").astype("f8")).reshape(y.shape)
    loss = ((y - t) ** 2).mean()
    loss.backward()
    out = [loss.detach().reshape(1)] + [p.grad.reshape(-1) for p in m.params()]
    torch.cat(out).numpy().astype("<f4").tofile(os.path.join(outdir, name + ".torch.f32"))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "grads":
        grads(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
