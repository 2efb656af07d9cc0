#!/usr/bin/python3
"""Capture of cross-entropy with label smoothing (F.cross_entropy(...,
label_smoothing=eps), nn.CrossEntropyLoss(label_smoothing=eps)): ATen's
cross_entropy_loss_label_smoothing, as PyTorch 1.13 or 2.x records it, is one
SoftmaxCELoss whose label_smoothing is eps exactly and whose aux_bytes are
what PyTorch keeps for it: the log-probabilities (4·R·C), nll_loss's total
weight (4), then 1.13's ignore mask, masked smooth loss and kept mask
(R + 4·R + R) or 2.x's ignore mask and int64 row count (R + 8). For each eps:
no Generic op, saved_bytes equal PyTorch's count, every strategy runs
bit-identical to store-all with the tracked peak the predicted one, and the
step rebuilt in PyTorch from remat's dump agrees on the loss and every
gradient. With class weights or another reduction the loss is not remat's
(not fused; the model is not executable), and its saved bytes are still
PyTorch's.

  test_capture_smoothing.py --remat PATH --out DIR

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

ROWS, CLASSES = 6, 7


def mlp():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.Linear(24, CLASSES))
    x = torch.randn(ROWS, 12)
    labels = torch.randint(0, CLASSES, (ROWS,), generator=torch.Generator().manual_seed(1))
    return net, x, labels


def loss_aux_bytes():
    """What PyTorch keeps for the smoothed loss, by version (the module docstring)."""
    logp = 4 * ROWS * CLASSES + 4
    major = int(torch.__version__.split(".")[0])
    return logp + (ROWS + 4 * ROWS + ROWS if major < 2 else ROWS + 8)


def saved_bytes(args, path):
    sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json", ok=True).stdout)
    return sim["model"]["saved_bytes"], sim["model"]["executable"]


def main():
    args = parse_args()
    for eps in (0.1, 0.25, 1 / 3, 1.0):
        net, x, labels = mlp()
        loss_fn = nn.CrossEntropyLoss(label_smoothing=eps) if eps == 0.25 else \
            (lambda out, eps=eps: F.cross_entropy(out, labels, label_smoothing=eps))
        fn = (lambda out: loss_fn(out, labels)) if eps == 0.25 else loss_fn
        name = f"smoothed_{eps:.3f}"
        want = torch_count(net, x, fn, labels)
        doc = remat_capture.capture(net, x, fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        kinds = [op["kind"] for op in doc["ops"]]
        loss = doc["ops"][-1]
        check(kinds == ["Input", "Linear", "GELU", "Linear", "SoftmaxCELoss"], f"{name}: kinds {kinds}")
        check(loss.get("label_smoothing") == eps, f"{name}: label_smoothing {loss.get('label_smoothing')!r} == {eps!r}")
        check(loss["saved"] == [] and loss.get("aux_bytes") == loss_aux_bytes(),
              f"{name}: the loss keeps aux {loss.get('aux_bytes')} == {loss_aux_bytes()} (PyTorch {torch.__version__})")
        got, executable = saved_bytes(args, path)
        check(got == want and executable, f"{name}: saved_bytes {got} == PyTorch's {want}, executable {executable}")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0 and res is not None and not not_bitwise(res) and not not_exact(res),
              f"{name}: every strategy runs bit-identical to store-all, tracked peak == predicted "
              f"({run.stderr.strip()[-200:]})")
        cross = crosscheck(args, path)
        check(cross.returncode == 0, f"{name}: PyTorch agrees ({(cross.stdout + cross.stderr).strip()[-300:]})")
    # Not remat's loss: class weights, a sum. Not fused, so not executable; the
    # bytes are still PyTorch's.
    weight = torch.linspace(0.5, 1.5, CLASSES)
    for name, fn_of in (("weighted", lambda y: (lambda out: F.cross_entropy(out, y, weight=weight, label_smoothing=0.1))),
                        ("summed", lambda y: (lambda out: F.cross_entropy(out, y, reduction="sum", label_smoothing=0.1)))):
        net, x, labels = mlp()
        fn = fn_of(labels)
        want = torch_count(net, x, fn, labels)
        doc = remat_capture.capture(net, x, fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        losses = [op for op in doc["ops"] if op["kind"] == "SoftmaxCELoss"]
        got, executable = saved_bytes(args, path)
        check(not losses and not executable and got == want,
              f"{name}: no SoftmaxCELoss ({len(losses)}), not executable ({executable}), saved_bytes {got} == {want}")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
