#!/usr/bin/python3
"""Capture of padding and rolling: every F.pad mode (constant with a fill
value and negative pads that crop, reflect, replicate, circular; 1-, 2- and
3-D) as Pad ops, and torch.roll (one dimension, two with negative shifts, a
whole turn, no dims: the flattened tensor) as Slice views and Concats. For
each model: no Generic op, the kinds and modes expected, reflect and
replicate pads keeping their input as autograd does (their backward takes
`self`), the other pads and the rolls nothing, remat's saved_bytes equal to
PyTorch's count, every strategy
bit-identical to store-all with the tracked peak the predicted one, and the
step rebuilt in PyTorch from remat's dump (torch_crosscheck.py) agreeing on
the loss and every gradient. The goal models (Swin-T, a CycleGAN generator, a
causal TCN, circular convolutions) are in the zoo (test_zoo.py).

  test_capture_pad.py --remat PATH --out DIR

Exit 77 (CTest skip) without torch."""
import json
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import remat_capture  # noqa: E402
from harness import check, crosscheck, not_bitwise, not_exact, parse_args, remat, run_every_strategy, summary  # noqa: E402
from torch_count import torch_count  # noqa: E402


class PadModes(nn.Module):
    def __init__(self):
        super().__init__()
        self.c2 = nn.Conv2d(3, 4, 3)
        self.c3 = nn.Conv2d(5, 4, 2)
        self.c1 = nn.Conv1d(4, 4, 3)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        x = F.pad(x, (1, 2, -1, 3), value=0.5)                       # constant: a fill, a crop
        x = torch.relu(self.c2(F.pad(x, (2, 1, 1, 2), mode="reflect")))
        x = F.pad(x, (0, 0, 0, 0, 1, 0))                              # the channels
        x = F.pad(x, (1, 1, 0, 2), mode="replicate")
        x = F.pad(x.unsqueeze(2), (1, 0, 1, 1, 1, 0), mode="replicate")  # 3-D
        x = torch.relu(self.c3(x.mean(2)))
        x = F.pad(x.mean(2), (2, 2), mode="circular")
        x = torch.tanh(self.c1(F.pad(x, (1, 2), mode="reflect")))
        return self.head(x.mean(2))


class Rolls(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 3)

    def forward(self, x):                          # (N, 5, 4, 6)
        x = self.fc1(x)
        x = torch.roll(x, -2, 1)                   # one dimension
        x = torch.relu(torch.roll(x, (-3, 2), (2, 3)))  # Swin's two, one negative
        x = torch.roll(x, 5, 1)                    # a whole turn: a copy
        x = torch.roll(x, 7)                       # no dims: the flattened tensor
        return self.fc2(x).mean((1, 2))


def models():
    torch.manual_seed(0)
    labels = torch.tensor([1, 4])
    yield "pad_modes", PadModes(), torch.randn(2, 3, 7, 8), (lambda out: F.cross_entropy(out, labels)), labels
    labels3 = torch.tensor([0, 2])
    yield "rolls", Rolls(), torch.randn(2, 5, 4, 6), (lambda out: F.cross_entropy(out, labels3)), labels3


def main():
    args = parse_args()
    want_modes = {"pad_modes": ["constant", "reflect", "constant", "replicate", "replicate", "circular", "reflect"],
                  "rolls": []}
    for name, net, x, loss_fn, target in models():
        net.train()
        want = torch_count(net, x, loss_fn, target)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        kinds = [op["kind"] for op in doc["ops"]]
        check("Generic" not in kinds, f"{name}: every op has a kind ({sorted(set(kinds))})")
        pads = [op for op in doc["ops"] if op["kind"] == "Pad"]
        modes = [op["mode"] for op in pads]
        check(modes == want_modes[name], f"{name}: Pad modes {modes}")
        if name == "pad_modes":
            check(pads[0]["pads"] == [1, 2, -1, 3] and pads[0]["fill"] == 0.5,
                  f"{name}: the first pad's pads and fill ({pads[0]})")
        if name == "rolls":
            rolled = [op for op in doc["ops"] if op.get("torch", {}).get("aten", "").startswith("aten.roll")]
            got = sorted(op["kind"] for op in rolled)
            check(got == ["Concat"] * 4 + ["Reshape"] * 3 + ["Slice"] * 8,
                  f"{name}: the rolls are 4 Concats of 8 Slices, a copy and the flat roll's 2 views ({got})")
            pads = rolled
        # reflection_padNd_backward and replication_padNd_backward take `self`:
        # autograd keeps the input (where it needs a gradient: not before the
        # first convolution); the rest nothing.
        keeps = [op for op in pads if op.get("mode") in ("reflect", "replicate")]
        check(all(op["saved"] in ([], op["inputs"]) for op in keeps) and len([op for op in keeps if op["saved"]]) ==
              {"pad_modes": 3, "rolls": 0}[name] and all(not op["saved"] for op in pads if op not in keeps) and
              all("aux_bytes" not in op for op in pads),
              f"{name}: reflect and replicate pads keep their input, the other pads and the rolls nothing")
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json").stdout)
        check(sim["model"]["saved_bytes"] == want, f"{name}: remat saved_bytes {sim['model']['saved_bytes']} == PyTorch's {want}")
        check(sim["model"]["executable"], f"{name}: executable")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            check(not not_bitwise(res), f"{name}: {len(res)} strategies bit-identical to store-all")
            check(not not_exact(res), f"{name}: tracked peak == predicted under every strategy")
        cross = crosscheck(args, path, "0")
        check(cross.returncode == 0, f"{name}: PyTorch agrees on the loss and gradients "
                                     f"({(cross.stdout + cross.stderr).strip()[-300:]})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
