#!/usr/bin/env python3
"""The aten ops PyTorch 2.x records where 1.13 recorded others, each captured
as ops remat runs (tests/python/torch2_models.py):

- aten._safe_softmax (2.5+, attention's math path): a Softmax where no row of
  its scores can be all -inf (no mask, causal, a float mask leaving each row
  an element); Generic where the mask blanks a row;
- aten.mkldnn_rnn_layer (2.x's fused CPU LSTM layer): 1.13's cell
  decomposition (Linear, the gates' Slices, sigmoid/tanh, the cell's mul and
  Add, a Concat of the steps), no Generic op left.

For each: remat's saved_bytes equals PyTorch's own count (saved_tensors_hooks,
tests/python/torch_count.py) exactly; `remat run` runs every strategy on the
CPU bit for bit as store-all, the tracked peak the predicted one; the step
rebuilt in PyTorch from remat's dump agrees (torch_crosscheck.py: remat's
execution against autograd on the graph); and the graph run by PyTorch in
float64 on the module's own weights and input (each remat parameter filled from
the module parameter the capture maps it to: an LSTM's W_hh fills every
step's Linear) gives the module's loss and, summed over the remat tensors that
share a module parameter, the module's autograd gradients, within 1e-5·max +
1e-4·|ref| per element: the ops written for 2.x's one op compute what it does.

A torch whose step does not record the op (1.13) skips with the reason, exit
77; tools/torch2-check.sh sets REMAT_REQUIRE_TORCH2=1, where that is a failure.

  test_capture_torch2.py --remat PATH --out DIR"""
import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: cannot import torch/numpy with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "exec"))
import remat_capture  # noqa: E402
from remat_capture._trace import record  # noqa: E402
from harness import check, crosscheck, not_bitwise, not_exact, parse_args, remat, run_every_strategy, summary  # noqa: E402
from torch_count import torch_count  # noqa: E402
import torch2_models  # noqa: E402
from torch_crosscheck import rebuild  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
# The aten op each model is here for, and what it must become.
OP = {"attention": "_safe_softmax", "lstm": "mkldnn_rnn_layer"}


def recorded(net, x, loss_fn):
    """The aten op names one training step of the module records, or the
    error that stopped it (1.13 has no F.scaled_dot_product_attention)."""
    try:
        rec, _ = record(net, lambda: loss_fn(net(x)))
    except (ImportError, AttributeError) as e:
        return f"{type(e).__name__}: {e}"
    net.zero_grad()
    return {ev.name for ev in rec.ops}


def check_graph_on_module(name, net, x, labels, doc):
    """The captured graph in PyTorch float64 on the module's weights and input
    against the module's own autograd (float64): loss and every gradient."""
    net = net.double()
    params = dict(net.named_parameters())
    mapped = {e["tensor"]: e["param"] for e in doc["parameters"]}
    t = {"input": x.detach().double().numpy(), "labels": None}
    t.update({"param." + k: params[p].detach().numpy() for k, p in mapped.items()})
    for op in doc["ops"]:
        if "values" in op and not op.get("learned"):  # rebuild reads constants from the dump's names
            vals = op["values"] if isinstance(op["values"], list) else [op["values"]]
            t[f"const.{op['id']}"] = np.array([float(v) for v in vals], dtype=np.float64)
    t["labels"] = labels.numpy()  # every model here ends in cross-entropy (a SoftmaxCELoss)
    graph_loss, leaves = rebuild(doc["ops"], t)
    graph_loss.backward()
    net.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x.double()), labels)
    loss.backward()
    check(abs(graph_loss.item() - loss.item()) <= 1e-10 * abs(loss.item()),
          f"{name}: the graph's loss on the module's weights {graph_loss.item():.12g} == the module's {loss.item():.12g}")
    unmapped = sorted(k for k in leaves if k not in mapped)
    check(not unmapped, f"{name}: each of remat's {len(leaves)} parameter tensors is a module parameter "
                        f"(not: {unmapped})")
    summed = {}
    for k, leaf in leaves.items():
        if k in mapped:
            summed[mapped[k]] = summed.get(mapped[k], 0) + leaf.grad.reshape(params[mapped[k]].shape)
    check(sorted(summed) == sorted(n for n, q in params.items() if q.grad is not None),
          f"{name}: the graph's parameters are the module's ({len(summed)} of {len(params)})")
    worst, where = -1.0, ""
    for p, g in summed.items():
        ref = params[p].grad
        bound = ATOL * ref.abs().max() + RTOL * ref.abs()
        ratio = float(((g - ref).abs() / bound.clamp_min(1e-30)).max())
        if ratio > worst:
            worst, where = ratio, p
    check(worst <= 1.0, f"{name}: the graph's gradients summed per module parameter are the module's autograd ones "
                        f"(worst {worst:.1e} of the tolerance, at {where})")


def main():
    args = parse_args()
    require = os.environ.get("REMAT_REQUIRE_TORCH2") == "1"
    ran = 0
    for build in torch2_models.MODELS:
        name, net, x, loss_fn, labels = build()
        net.train()
        family = name.split("_")[0]
        names = recorded(net, x, loss_fn)
        if isinstance(names, str) or OP[family] not in names:
            why = f"{name}: torch {torch.__version__} does not record aten.{OP[family]} for it" + \
                (f" ({names})" if isinstance(names, str) else "")
            print(("FAIL: " if require else "SKIP: ") + why)
            if require:
                check(False, why)
            continue
        ran += 1
        want = torch_count(net, x, loss_fn, labels)
        net.zero_grad()
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        ops = doc["ops"]
        generic = [op.get("comment") for op in ops if op["kind"] == "Generic"]
        from_op = [op for op in ops if op.get("torch", {}).get("aten", "").startswith(f"aten.{OP[family]}.")]
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json", ok=True).stdout)
        check(sim["model"]["saved_bytes"] == want, f"{name}: remat saved_bytes {sim['model']['saved_bytes']} == "
                                                   f"PyTorch's count {want}")
        if name == "attention_blank_row":
            # A row all -inf: _safe_softmax gives zeros, a softmax NaN. Not mapped.
            check(generic == [f"aten.{OP[family]}"] and not sim["model"]["executable"],
                  f"{name}: the softmax over a blanked row stays Generic ({generic}), simulate-only")
            continue
        check(not generic, f"{name}: every op has a kind remat runs (Generic: {generic})")
        if family == "attention":
            check([op["kind"] for op in from_op] == ["Softmax"] and from_op[0].get("axis") == -1,
                  f"{name}: aten._safe_softmax is one Softmax over the last axis ({[op['kind'] for op in from_op]})")
        else:
            kinds = sorted({op["kind"] for op in from_op})
            layers = net.lstm.num_layers
            steps = x.shape[1] if net.lstm.batch_first else x.shape[0]
            # Per layer: one input Linear, and a Linear of h per step after the
            # first, or per step where the first h is an activation, not zeros.
            linears = layers * (steps + (name == "lstm_given_state"))
            check(kinds == ["Add", "Concat", "Linear", "Pointwise", "Reshape", "Slice", "Tanh"] and
                  sum(op["kind"] == "Linear" for op in from_op) == linears and
                  sum(op["kind"] == "Concat" for op in from_op) == layers,
                  f"{name}: each of {layers} mkldnn_rnn_layer ops is the cell's decomposition over {steps} steps "
                  f"({kinds}, {sum(op['kind'] == 'Linear' for op in from_op)} Linear)")
        check(sim["model"]["executable"], f"{name}: executable")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            check(not not_bitwise(res), f"{name}: {len(res)} strategies bit-identical to store-all "
                                        f"(not: {not_bitwise(res)})")
            check(not not_exact(res), f"{name}: tracked peak == predicted under every strategy (not: {not_exact(res)})")
        cross = crosscheck(args, path)
        check(cross.returncode == 0, f"{name}: PyTorch autograd on remat's dump agrees "
                                     f"({(cross.stdout + cross.stderr).strip()[-300:]})")
        check_graph_on_module(name, net, x, labels, doc)
    if ran == 0 and not require:
        print(f"SKIP: torch {torch.__version__} records neither aten._safe_softmax nor aten.mkldnn_rnn_layer")
        return 77
    return summary()


if __name__ == "__main__":
    sys.exit(main())
