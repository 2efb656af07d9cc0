#!/usr/bin/python3
"""Capture of the rest of the tail (issue 28): a U-Net (transposed
convolutions, nearest and bilinear upsampling, skip connections by cat), a
GroupNorm network, the three norms without affine parameters and with
epsilons of their own, and a ViT front whose class token is a parameter
concatenated before the tokens (LayerNorm eps 1e-6), and torchvision's
mobilenet_v3_small on 64x64 images, whose hardswish(inplace=True) saves a
clone of the value it overwrites (captured as saving its input: the same
bytes, and what the kernel's backward reads), and an nn.TransformerEncoder
with batch_first and tests/io's ViT, whose Dropout, Concat and Linear read
transposed or sliced views (dense copies, op_exec.h's dense_copy). For each: remat's
saved_bytes equals PyTorch's count exactly, the capture is executable, every
strategy runs bit-identical to store-all with its tracked peak the predicted
one, and the step rebuilt in PyTorch from remat's dump (torch_crosscheck.py)
agrees on the loss and every gradient (mobilenet_v3_small: to the tolerance
plus 4 times PyTorch's own float32 error, as its batch norms over 2x2 pixels
leave gradients float32 cannot pin down; torch_crosscheck.py --float32).

  test_capture_tail.py --remat PATH --out DIR

Exit 77 (CTest skip) without torch."""
import json
import os
import sys

try:
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIP: cannot import torch with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import remat_capture  # noqa: E402
from tail_models import models, rnn_models  # noqa: E402
from harness import check, crosscheck, not_bitwise, not_exact, parse_args, remat, run_every_strategy, summary  # noqa: E402
from torch_count import torch_count  # noqa: E402


def main():
    args = parse_args()
    want_kinds = {"unet": ("ConvTranspose", "Upsample", "Concat"), "groupnorm": ("GroupNorm",),
                  "plain_norms": ("BatchNorm", "GroupNorm", "LayerNorm"),
                  "class_token": ("Concat",), "mobilenet_v3_small": ("Pointwise",),
                  "encoder_batch_first": ("Dropout", "Transpose"), "vit": ("Concat", "Transpose"),
                  "gru_seq_first": ("Linear", "Concat"), "gru_no_bias": ("Linear", "Concat", "Transpose")}
    float32 = {"mobilenet_v3_small": "4"}
    for name, net, x, loss_fn, target in list(models()) + list(rnn_models()):
        net.train()
        want = torch_count(net, x, loss_fn, target)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        kinds = [op["kind"] for op in doc["ops"]]
        inplace = [op for op in doc["ops"] if op.get("torch", {}).get("aten", "").startswith("aten.hardswish_")]
        if name == "mobilenet_v3_small":
            check(len(inplace) == 19 and all(op["saved"] == op["inputs"] and "aux_bytes" not in op for op in inplace),
                  f"{name}: each of {len(inplace)} in-place hardswish saves its input (the value it overwrites)")
        check("Generic" not in kinds, f"{name}: every op has a kind ({sorted(set(kinds))})")
        if name == "plain_norms":
            norms = [(op["kind"], op.get("affine"), op.get("eps")) for op in doc["ops"] if op["kind"].endswith("Norm")]
            check(norms == [("BatchNorm", False, 1e-3), ("GroupNorm", False, 1e-4), ("LayerNorm", False, 1e-6)],
                  f"{name}: each norm without affine parameters, with its epsilon ({norms})")
        for k in want_kinds[name]:
            check(k in kinds, f"{name}: has {k}")
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json").stdout)
        check(sim["model"]["saved_bytes"] == want, f"{name}: remat saved_bytes {sim['model']['saved_bytes']} == PyTorch's {want}")
        check(sim["model"]["executable"], f"{name}: executable")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            check(not not_bitwise(res), f"{name}: {len(res)} strategies bit-identical to store-all")
            check(not not_exact(res), f"{name}: tracked peak == predicted under every strategy")
        cross = crosscheck(args, path, float32.get(name, "0"))
        check(cross.returncode == 0, f"{name}: PyTorch agrees on the loss and gradients "
                                     f"({(cross.stdout + cross.stderr).strip()[-300:]})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
