#!/usr/bin/python3
"""Cross-checks `remat run` on an ONNX file against PyTorch running the same
file with the file's own weights (onnx_reference.py, float64).

remat runs the model with a strategy and dumps the step (--dump); the
reference runs the ONNX graph node by node from the file's initializers, on
the dumped input and labels (or target) and with remat's dropout masks, and
its loss and the gradient of every initializer are compared with remat's:
|remat - torch| <= atol * max|torch| + rtol * |torch| per element (atol 1e-5,
rtol 1e-4, as torch_crosscheck.py), the loss to rtol.

Each of remat's parameters is paired with the initializer it was imported
from by its dumped initial values (equal, or equal transposed: MatMul and
Gemm transB=0 weights; several may come from one, as an LSTM's per-step
copies of W_hh, and their gradients are summed; a 1-D one may equal a piece
of a 1-D initializer, as the thirds of b_hh at a GRU's first step), so a parameter remat drew from its seed instead of
the file pairs with nothing and fails; so does an initializer the reference
trains (it has a gradient) that no parameter of remat's comes from. Give the
test's model distinct weights (no two initializers with the same values).

The file does not tell a module's buffers from its parameters: both are
initializers. --buffers names those that are buffers (a rotary table, a
mask): PyTorch trains none of them, so none needs a parameter of remat's
(remat may still learn one, as an added mask, and is then checked as any).

A network whose gradients float32 cannot pin down to that tolerance (a deep
MobileNetV2 with batch norms over a few elements: PyTorch's own float32 step
misses its float64 one by up to 1e4 tolerances) is checked with --float32 K:
the reference also runs in float32, and each gradient tensor of remat's may
be off by K times PyTorch's own float32 error on that tensor beyond the
tolerance (the loss as well): remat must be as exact as PyTorch is.

  onnx_file_crosscheck.py --remat PATH --model FILE.onnx [--strategy S] [--seed N] [--atol A] [--float32 K]
                          [--buffers NAME,...]

Exit 0: agrees; 1: disagrees; 77 (CTest skip): torch or onnx not importable."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch/onnx with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from onnx_reference import run_graph  # noqa: E402
from torch_crosscheck import load_graph, read_safetensors  # noqa: E402


def distinct_weights(module, seed=0):
    """Perturbs every 1-D parameter (norm scales and shifts, biases) so that no
    two initializers hold the same values and none is the all-ones or all-zeros
    a seeded run could also produce: the pairing below then names each one."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def check(remat, model, strategy="sqrt", seed="3", atol=1e-5, tol=1e-4, float32=0.0, buffers=()):
    """This script on `model`: True when remat agrees with the file's model."""
    cmd = [sys.executable, os.path.abspath(__file__), "--remat", remat, "--model", model, "--strategy", strategy,
           "--seed", str(seed), "--atol", str(atol), "--tol", str(tol), "--float32", str(float32)]
    if buffers:
        cmd += ["--buffers", ",".join(buffers)]
    return subprocess.run(cmd).returncode == 0


def remat_dump(remat, model, strategy, seed, tmp):
    d = os.path.join(tmp, "dump")
    cmd = [remat, "run", "--model", model, "--strategy", strategy, "--backend", "cpu", "--repeat", "1",
           "--seed", seed, "--dump", d]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    t, meta = read_safetensors(os.path.join(d, "tensors.safetensors"))
    return t, meta, load_graph(d, meta)


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def feeds_of(model, t, ops):
    """The dumped input for the data input, the dumped labels for a labels input."""
    feeds = {}
    data_name = ops[0]["name"]
    for vi in graph_inputs(model):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name == data_name:
            x = t["input"]
            feeds[vi.name] = (torch.tensor(x.astype(np.int64)) if x.dtype.kind == "i"
                              else torch.tensor(x, dtype=torch.float64)).reshape(shape)
        elif "labels" in t:
            feeds[vi.name] = torch.tensor(t["labels"].astype(np.int64)).reshape(shape)
        else:
            raise SystemExit(f"graph input {vi.name!r}: remat dumped neither it nor labels")
    return feeds


def reference_loss(model, values, t, ops):
    """The loss remat trains, as the reference computes it: the file's loss node,
    or the loss remat appends (cross-entropy on a final Softmax's logits, MSE on
    the output)."""
    loss_op = ops[-1]
    producers = {o: n for n in model.graph.node for o in n.output}
    outputs = [o.name for o in model.graph.output]
    for name in outputs:
        n = producers.get(name)
        if n is not None and n.op_type in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"):
            if loss_op["kind"] != "SoftmaxCELoss":
                raise SystemExit(f"the file ends in {n.op_type}, remat's loss is {loss_op['kind']}")
            return values[name]
    if len(outputs) != 1:
        raise SystemExit(f"{len(outputs)} outputs and no loss node: which one remat trains is not checked here")
    out = outputs[0]
    y = values[out]
    if loss_op["kind"] == "SoftmaxCELoss":
        head = producers[out]
        if head.op_type not in ("Softmax", "LogSoftmax"):
            raise SystemExit(f"remat appended a SoftmaxCELoss but the output comes from {head.op_type}")
        logits = values[head.input[0]]
        labels = torch.tensor(t["labels"].astype(np.int64))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
    return F.mse_loss(y, torch.tensor(t["target"], dtype=y.dtype).reshape(y.shape))


def pair_parameters(t, model, leaves, ops):
    """{remat parameter key: (initializer name, transposed, or the offset of a
    piece of a 1-D initializer)} by equal values;
    among several equal initializers (the copies nn.TransformerEncoder makes of
    its layer, one mask per block), the one that the file's node of remat's op
    (by name) reads."""
    inits = {i.name: onnx.numpy_helper.to_array(i).astype(np.float32) for i in model.graph.initializer
             if i.name in leaves}
    # node name -> the initializers it reads, directly or through nodes of
    # constants only (a weight's Transpose before its MatMul)
    consts = {i.name: {i.name} if i.name in inits else set() for i in model.graph.initializer}
    reads = {}
    for n in model.graph.node:
        got = set().union(*(consts.get(i, set()) for i in n.input))
        reads.setdefault(n.name, set()).update(got)
        if all(not i or i in consts for i in n.input):
            for o in n.output:
                consts[o] = got
    op_names = {str(op["id"]): op.get("name", "") for op in ops}
    pairs, failures = {}, []
    for key in sorted(k[len("param."):] for k in t if k.startswith("param.")):
        p = t["param." + key].astype(np.float32)
        found = []
        for name, w in inits.items():
            if w.size != p.size:
                continue
            if np.array_equal(w.reshape(-1), p.reshape(-1)):
                found.append((name, False))
            elif w.ndim == 2 and p.ndim == 2 and w.shape == p.shape[::-1] and np.array_equal(w.T, p):
                found.append((name, True))
        if not found and p.ndim == 1:
            # A piece of a 1-D initializer: an ONNX GRU's first step holds
            # b_hh's thirds as constants of their own (onnx_gru.cpp).
            for name, w in inits.items():
                flat = w.reshape(-1)
                if w.ndim == 1 and flat.size > p.size:
                    found += [(name, start) for start in range(flat.size - p.size + 1)
                              if np.array_equal(flat[start:start + p.size], p)]
        if len(found) > 1:
            by_node = [f for f in found if f[0] in reads.get(op_names.get(key.split(".")[0], ""), ())]
            found = by_node if len(by_node) == 1 else found
        if len(found) != 1:
            failures.append(f"parameter {key} {list(p.shape)}: " +
                            ("equals no initializer of the file (not the file's weights)" if not found else
                             f"equals {len(found)} initializers {[n for n, _ in found]} (give the model distinct weights)"))
        else:
            pairs[key] = found[0]
    return pairs, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--strategy", default="sqrt")
    ap.add_argument("--seed", default="3")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--float32", type=float, default=0.0)
    ap.add_argument("--buffers", default="", help="initializers that are the module's buffers, comma-separated")
    a = ap.parse_args()
    buffers = {b for b in a.buffers.split(",") if b}
    model = onnx.load(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        t, meta, ops = remat_dump(a.remat, a.model, a.strategy, a.seed, tmp)
    masks = {op["name"]: torch.tensor(t[f"mask.{op['id']}"].astype(np.uint8))
             for op in ops if op["kind"] == "Dropout" and f"mask.{op['id']}" in t}
    values, leaves = run_graph(model, feeds_of(model, t, ops), masks)
    loss = reference_loss(model, values, t, ops)
    loss.backward()
    failures = []
    got, ref = float(t["loss"]), loss.item()
    err = abs(got - ref) / max(abs(ref), 1e-12)
    print(f"{os.path.basename(a.model)} {a.strategy}: loss remat {got:.8g}, torch on the file's weights {ref:.8g} "
          f"(rel err {err:.2e})")
    own = {}  # PyTorch's own float32 error per initializer's gradient, times K
    if a.float32:
        values32, leaves32 = run_graph(model, feeds_of(model, t, ops), masks, dtype=torch.float32)
        loss32 = reference_loss(model, values32, t, ops)
        loss32.backward()
        err32 = abs(loss32.item() - ref) / max(abs(ref), 1e-12)
        print(f"torch in float32: loss rel err {err32:.2e}; allowed {a.float32:g} times its error beyond the tolerance")
        err = max(0.0, err - a.float32 * err32)
        for name, leaf in leaves32.items():
            if leaf.grad is not None and leaves[name].grad is not None:
                own[name] = a.float32 * float((leaf.grad.double() - leaves[name].grad).abs().max())
    if not err < a.tol:
        failures.append(f"loss: relative error {err:.2e}")
    pairs, unpaired = pair_parameters(t, model, leaves, ops)
    failures += unpaired
    worst = 0.0
    # Several parameters of remat's from one initializer (an LSTM's W_hh,
    # one copy per step, as a capture's ops hold it; a tied embedding): the
    # initializer's gradient is the sum of theirs.
    groups = {}
    for key, (name, transposed) in sorted(pairs.items()):
        grad = t["grad." + key].astype(np.float64).reshape(t["param." + key].shape)
        if not isinstance(transposed, bool):  # a piece of the initializer, from this offset
            whole = np.zeros(leaves[name].numel())
            whole[transposed:transposed + grad.size] = grad.reshape(-1)
            grad, transposed = whole, False
        groups.setdefault(name, []).append((key, grad.T if transposed else grad))
    for name, parts in sorted(groups.items()):
        g = leaves[name].grad
        ref_g = np.zeros(leaves[name].shape) if g is None else g.numpy()
        got_g = sum(grad for _, grad in parts).reshape(ref_g.shape)
        key = "+".join(k for k, _ in parts)
        atol = a.atol * max(float(np.abs(ref_g).max(initial=0.0)), 1e-30)
        excess = np.abs(got_g - ref_g) / (atol + a.tol * np.abs(ref_g) + own.get(name, 0.0))
        k = int(np.argmax(excess)) if excess.size else 0
        worst = max(worst, float(excess.flat[k]) if excess.size else 0.0)
        bad = int(np.count_nonzero(~(excess <= 1.0)))
        if bad:
            failures.append(f"gradient of {name} (remat {key}): {bad} of {excess.size} elements outside tolerance; "
                            f"worst at {k}: remat {got_g.flat[k]:.9g}, torch {ref_g.flat[k]:.9g}")
    trained = {name for name, leaf in leaves.items() if leaf.grad is not None}
    for name in sorted(trained - {n for n, _ in pairs.values()} - buffers):
        failures.append(f"initializer {name} {list(leaves[name].shape)} has a gradient in torch but is no parameter of remat's")
    print(f"{len(pairs)} parameters from the file's initializers, worst gradient element at {worst:.2f} of its tolerance")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
