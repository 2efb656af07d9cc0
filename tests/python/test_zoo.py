#!/usr/bin/python3
"""The zoo (zoo_models.py: the twelve architectures of issue 28, a GRU and the
long tail since), captured with remat_capture and run, with a table of where
each stands:

- every capture's saved_bytes equals PyTorch's own count exactly;
- `remat model` says executable exactly when `remat run` accepts the model;
- the ones in RUNS run under every strategy, bit-identical to store-all with
  the tracked peak the predicted one, and the step rebuilt in PyTorch from the
  dump agrees on the loss and every gradient (torch_crosscheck.py --float32
  4: the tolerance plus 4 times PyTorch's own float32 error per tensor, as
  batch norms over 2x2 pixels leave gradients float32 cannot pin down);
- the others are refused, and the table says by what. A model that starts to
  run fails the test until it joins RUNS, so the table stays true.

  test_zoo.py --remat PATH --out DIR

REMAT_ZOO=name,name runs only those models (while working on one);
REMAT_ZOO_PART=k/n only the k-th of n parts (CTest runs three).

Exit 77 (CTest skip) without torch/torchvision."""
import json
import os
import sys

try:
    import torch
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"SKIP: cannot import torch/torchvision with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import remat_capture  # noqa: E402
from harness import crosscheck, not_bitwise, not_exact, parse_args, remat, run_every_strategy  # noqa: E402
from torch_count import torch_count  # noqa: E402
import zoo_models  # noqa: E402
from zoo_models import MODELS  # noqa: E402

# What runs today: all of them.
RUNS = {"llama", "vit", "convnext", "mobilenet_v3", "efficientnet_b0", "densenet", "unet", "lstm", "gru", "encoder",
        "shufflenet", "groupnorm", "moe",
        "maxvit", "espcn", "unshuffle",
        "mask_bce", "multilabel_bce"}
RUNS |= {"swin_t", "cyclegan", "tcn", "circular_conv"}  # padding and rolling
RUNS |= {"squeezenet", "googlenet", "alexnet", "vgg11_bn", "avg_down"}  # pooling: ceil_mode, adaptive windows
RUNS |= {"cumsum"}  # a running sum
RUNS |= {"vit_smoothed", "convnext_smoothed"}  # cross-entropy with label smoothing


def main():
    args = parse_args()
    failures, rows = [], []
    only = [n for n in os.environ.get("REMAT_ZOO", "").split(",") if n]
    for name, build in MODELS.items():
        if only and name not in only or not zoo_models.in_part(name):
            continue
        torch.manual_seed(0)
        net, x, loss_fn, target = build()
        net.train()
        want = torch_count(net, x, loss_fn, target)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json").stdout)
        got = sim["model"]["saved_bytes"]
        if got != want:
            failures.append(f"{name}: remat saved_bytes {got}, PyTorch's {want}")
        executable = sim["model"]["executable"]
        run, res = run_every_strategy(args, path)
        if executable != (run.returncode == 0):
            failures.append(f"{name}: remat model says executable={executable}, remat run exits {run.returncode}")
        row = {"name": name, "ops": len(doc["ops"]), "torch": want, "remat": got, "runs": run.returncode == 0,
               "strategies": "", "crosscheck": "", "why": ""}
        if res is not None:
            same, exact = not not_bitwise(res), not not_exact(res)
            row["strategies"] = f"{len(res)}, {'bitwise' if same else 'DIFFER'}, peak {'exact' if exact else 'OFF'}"
            if not same or not exact:
                failures.append(f"{name}: strategies bit-identical {same}, tracked peak == predicted {exact}")
            cross = crosscheck(args, path, "4")
            last = [ln for ln in cross.stdout.splitlines() if "worst element" in ln]
            row["crosscheck"] = ("ok: " if cross.returncode == 0 else "FAIL: ") + (last[0] if last else "")
            if cross.returncode != 0:
                failures.append(f"{name}: PyTorch disagrees ({(cross.stdout + cross.stderr).strip()[-400:]})")
        else:
            row["why"] = (run.stderr.strip().splitlines() or [""])[-1][:140]
        if row["runs"] != (name in RUNS):
            failures.append(f"{name}: runs {row['runs']}, expected {name in RUNS} (update RUNS and the table)")
        rows.append(row)
    print(f"{'model':16} {'ops':>4} {'PyTorch saved':>14} {'remat saved':>12}  runs  strategies / cross-check or why not")
    for r in rows:
        tail = f"{r['strategies']}; {r['crosscheck']}" if r["runs"] else r["why"]
        print(f"{r['name']:16} {r['ops']:>4} {r['torch']:>14,} {r['remat']:>12,}  {'yes ' if r['runs'] else 'no  '}  {tail}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
