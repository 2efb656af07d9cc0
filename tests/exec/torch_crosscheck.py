#!/usr/bin/python3
"""Cross-checks `remat run --dump` against PyTorch autograd (MLPs, transformers without
attention, ResNets: convolution, batch norm, pooling, views; GPTs: token
embedding, learned position table, causal attention with its scale and mask,
dropout with remat's own masks).

Runs remat on a model with a recomputing strategy, reads DIR/model.json (or the
graph in the safetensors metadata when model.json is absent) and
DIR/tensors.safetensors (parsed here with struct/json/numpy), rebuilds the
forward pass in PyTorch float64 from the dumped input, target/labels,
parameters and dropout masks, and compares the loss and every parameter
gradient with remat's float32 ones, element by element: |remat - torch| <=
atol * max|torch| + rtol * |torch| (atol 1e-5, rtol 1e-4).
A network whose gradients float32 cannot pin down that closely (batch norms
over a few elements deep in a MobileNet: PyTorch's own float32 step misses
its float64 one by thousands of tolerances) takes --float32 K: the step is
rebuilt in float32 as well, and each gradient tensor (and the loss) may be
off by K times PyTorch's own float32 error there beyond the tolerance.
The gradient of a parameter an op adds to its output (a bias, a norm's β)
is the sum of the output's gradient over where the parameter repeats; each
of its elements may also be off by float32's epsilon times the sum of the
absolute values of those terms (summation_floor): where the terms cancel to
0 exactly (a β followed by another batch norm), a relative tolerance holds
nothing.
Exit 77 (CTest SKIP_RETURN_CODE) when torch is not importable.
"""
import argparse
import math
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # Debian's /usr/bin/python3 has them; other Pythons may not
    print(f"SKIP: cannot import torch/numpy with {sys.executable}: {e}")
    sys.exit(77)

DTYPES = {"F32": np.float32, "I32": np.int32, "U8": np.uint8, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    order = []
    for name, t in header.items():
        b, e = t["data_offsets"]
        order.append((b, name))
        arr = np.frombuffer(data[base + b:base + e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        out[name] = arr.copy()
    meta["_order"] = [name for _, name in sorted(order)]
    return out, meta


def load_graph(d, meta):
    path = os.path.join(d, "model.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["ops"]
    return json.loads(meta["ops"])


def spatial(op, x):
    """Stride, symmetric padding and dilation of a Conv or pooling op (ONNX pads: begins, then ends)."""
    sp = x.dim() - 2
    stride = op.get("stride") or [1] * sp
    pads = op.get("pads") or [0] * (2 * sp)
    if pads[:sp] != pads[sp:]:
        raise SystemExit(f"op {op['id']}: asymmetric pads {pads}")
    return stride, pads[:sp], op.get("dilation") or [1] * sp


def conv(op, x, w, b):
    stride, pad, dil = spatial(op, x)
    f = F.conv1d if x.dim() == 3 else F.conv2d
    return f(x, w, b, stride=stride, padding=pad, dilation=dil, groups=op.get("groups", 1))


def pool(op, x):
    if op.get("output_size"):  # adaptive average pooling
        f = F.adaptive_avg_pool2d if x.dim() == 4 else F.adaptive_avg_pool1d
        return f(x, op["output_size"])
    stride, pad, dil = spatial(op, x)
    k, ceil = op["kernel"], op.get("ceil_mode", False)
    two = x.dim() == 4
    if op["kind"] == "MaxPool":
        f = F.max_pool2d if two else F.max_pool1d
        return f(x, k, stride, pad, dilation=dil, ceil_mode=ceil)
    f = F.avg_pool2d if two else F.avg_pool1d
    return f(x, k, stride, pad, ceil_mode=ceil, count_include_pad=op.get("count_include_pad", True))


def constant(op, t):
    """An op's constant: from the dump (const.<id>) or, without one, from model.json's values."""
    if t is not None:
        return t[f"const.{op['id']}"]
    vals, shape = op["values"], op.get("const_shape", [])
    if vals == "causal":
        n = shape[-1]
        return np.triu(np.ones((n, n)), 1).reshape(shape)
    return np.array(vals, dtype=np.float64).reshape(shape)


def attention(q, k, v, causal, scale, mask=None):
    """softmax(q·kᵀ·scale + mask)·v written out (PyTorch 1.13 has no
    scaled_dot_product_attention; 2.x's matches it): causal masks key j > query i;
    mask: an additive one (attn_mask), broadcast onto the scores."""
    s = torch.matmul(q, k.transpose(-2, -1)) * (scale if scale else 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(tq, tk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


PW_ARITY = dict(add=2, sub=2, mul=2, div=2, maximum=2, minimum=2, pow=2, where=3)
PW_UNARY = dict(neg=torch.neg, exp=torch.exp, log=torch.log, sqrt=torch.sqrt, rsqrt=torch.rsqrt,
                reciprocal=torch.reciprocal, abs=torch.abs, sin=torch.sin, cos=torch.cos, erf=torch.erf,
                hardswish=F.hardswish, hardsigmoid=F.hardsigmoid, mish=F.mish, relu=torch.relu, tanh=torch.tanh,
                sigmoid=torch.sigmoid, gelu=F.gelu, silu=F.silu, cast=lambda a: a)


def pointwise(op, inputs, param, t):
    """A Pointwise op (docs/model-format.md): its operands are the inputs in
    order, the constant at const_at (a learned one is the op's parameter) and
    the scalar for a last operand neither fills."""
    fn, at = op["fn"], op.get("const_at", -1)
    like = inputs[0]
    ops, rest = [], list(inputs)
    for k in range(PW_ARITY.get(fn, 1)):
        if k == at:
            shape = op.get("const_shape", [])
            if op.get("learned"):
                ops.append(param(op["id"], "weight").reshape(shape))
            else:
                n = int(np.prod(shape)) if shape else 1
                vals = constant(op, t).reshape(-1)[:n] if t is not None else constant(op, None).reshape(-1)
                ops.append(torch.tensor(np.asarray(vals, dtype=np.float64), dtype=like.dtype,
                                        device=like.device).reshape(shape))
        elif rest:
            ops.append(rest.pop(0))
        else:
            s = op["scalar"]
            ops.append(float(s) if not isinstance(s, str) else float(s))
    a = ops[0]
    p, q = op.get("alpha"), op.get("beta")
    if fn in PW_UNARY:
        return PW_UNARY[fn](a)
    if fn == "leaky_relu":
        return F.leaky_relu(a, float(p))
    if fn == "elu":
        return F.elu(a, float(p))
    if fn == "softplus":
        return F.softplus(a, float(p), float(q))
    if fn == "clamp":
        return torch.clamp(a, float(p), float(q))
    if fn == "where":
        cond = ops[0] != 0 if isinstance(ops[0], torch.Tensor) else bool(ops[0])
        return torch.where(cond, ops[1], ops[2] if isinstance(ops[2], torch.Tensor)
                           else torch.tensor(ops[2], dtype=like.dtype))
    b = ops[1]
    return dict(add=lambda: a + b, sub=lambda: a - b, mul=lambda: a * b, div=lambda: a / b,
                maximum=lambda: torch.maximum(*[o if isinstance(o, torch.Tensor) else torch.tensor(o, dtype=like.dtype)
                                                for o in (a, b)]),
                minimum=lambda: torch.minimum(*[o if isinstance(o, torch.Tensor) else torch.tensor(o, dtype=like.dtype)
                                                for o in (a, b)]),
                pow=lambda: torch.pow(a, b))[fn]()


def affine(op, v, param):
    """A norm's (weight, bias): its gamma and beta, or (None, None) without affine parameters."""
    return (param(v, "gamma"), param(v, "beta")) if op.get("affine", True) else (None, None)


def apply_op(op, acts, param, t):
    """The output of a non-loss op from its inputs' outputs (acts), in the inputs'
    dtype; param(v, slot) gives a parameter tensor, t the dump (dropout masks)."""
    v, kind, ins = op["id"], op["kind"], op.get("inputs", [])
    x = acts[ins[0]] if ins else None
    if kind in ("Linear", "Dense"):
        y = F.linear(x, param(v, "weight"), param(v, "bias") if op.get("bias", True) else None)
        a = op.get("activation", "none")
        if kind == "Dense" and a == "relu":
            y = torch.relu(y)
        elif kind == "Dense" and a == "tanh":
            y = torch.tanh(y)
    elif kind == "ReLU":
        y = torch.relu(x)
    elif kind == "Tanh":
        y = torch.tanh(x)
    elif kind == "GELU":
        y = F.gelu(x)  # exact (erf) form
    elif kind == "LayerNorm":
        y = F.layer_norm(x, (x.shape[-1],), *affine(op, v, param), eps=op.get("eps", 1e-5))
    elif kind == "Add":
        y = x + acts[ins[1]]
    elif kind == "Dropout" and t is None:  # timing only (the benchmark): PyTorch's own mask
        y = F.dropout(x, op["p"], training=True)
    elif kind == "Dropout":
        mask = torch.tensor(t[f"mask.{v}"].astype(np.float64), dtype=x.dtype, device=x.device)
        y = x * mask / (1.0 - op["p"])
    elif kind == "Sigmoid":
        y = torch.sigmoid(x)
    elif kind == "SiLU":
        y = F.silu(x)
    elif kind == "Conv":
        y = conv(op, x, param(v, "weight"), param(v, "bias") if op.get("bias", True) else None)
    elif kind == "ConvTranspose":
        stride, pad, dil = spatial(op, x)
        f = F.conv_transpose1d if x.dim() == 3 else F.conv_transpose2d
        y = f(x, param(v, "weight"), param(v, "bias") if op.get("bias", True) else None, stride=stride, padding=pad,
              output_padding=op.get("output_padding") or 0, groups=op.get("groups", 1), dilation=dil)
    elif kind == "Upsample":
        size = op["shape"][2:]
        if op.get("mode", "nearest") == "nearest":
            y = F.interpolate(x, size=size, mode="nearest")
        else:
            y = F.interpolate(x, size=size, mode="bilinear" if x.dim() == 4 else "linear",
                              align_corners=op.get("align_corners", False))
    elif kind == "Pad":
        mode = op.get("mode", "constant")
        fill = op.get("fill", 0)  # as MaskedFill's: an infinity is a string in model.json, null in the dump's metadata
        y = F.pad(x, op["pads"], mode=mode, value=float(fill) if fill is not None else float("-inf")) \
            if mode == "constant" else F.pad(x, op["pads"], mode=mode)
    elif kind == "GroupNorm":
        y = F.group_norm(x, op["groups"], *affine(op, v, param), eps=op.get("eps", 1e-5))
    elif kind == "BatchNorm":
        # Training mode: batch statistics (the running ones are not compared).
        y = F.batch_norm(x, None, None, *affine(op, v, param), training=True, eps=op.get("eps", 1e-5))
    elif kind in ("MaxPool", "AvgPool"):
        y = pool(op, x)
    elif kind == "GlobalAvgPool":
        y = x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
    elif kind == "Softmax":
        y = torch.softmax(x, dim=op.get("axis", -1))
    elif kind == "Concat":
        pieces = [acts[u] for u in ins]
        if op.get("const_at") is not None:  # a learned piece (a class token), broadcast outside the axis
            ax = op.get("axis", -1) % x.dim()
            shape = list(x.shape)
            shape[ax] = op["const_shape"][ax]
            pieces.insert(op["const_at"], param(v, "weight").reshape(op["const_shape"]).expand(shape))
        y = torch.cat(pieces, dim=op.get("axis", -1))
    elif kind == "Reshape":
        y = x.reshape(op["shape"])
    elif kind == "Transpose":
        y = x.permute(*(op.get("perm") or list(reversed(range(x.dim())))))
    elif kind == "Slice":
        idx = [slice(None)] * x.dim()
        idx[op.get("axis", -1) % x.dim()] = slice(op.get("start", 0), op.get("end"), op.get("step", 1))
        y = x[tuple(idx)]
    elif kind == "Expand":
        y = x.expand(op["shape"])
    elif kind == "Embedding":
        y = F.embedding(x, param(v, "weight"))
    elif kind in ("MulConst", "DivConst", "AddConst"):
        shape = op.get("const_shape", [])
        if op.get("learned"):
            c = param(v, "weight")
        else:
            c = torch.tensor(constant(op, t).astype(np.float64), dtype=x.dtype, device=x.device)
        c = c.reshape(shape)
        y = x * c if kind == "MulConst" else x / c if kind == "DivConst" else x + c
    elif kind == "MaskedFill":
        mask = torch.tensor(constant(op, t).astype(bool), device=x.device).reshape(op.get("const_shape", []))
        fill = op.get("fill", "-inf")  # model.json writes infinities as strings, the dump's metadata as null
        y = x.masked_fill(mask, float(fill) if fill is not None else float("-inf"))
    elif kind == "Pointwise":
        y = pointwise(op, [acts[u] for u in ins], param, t)
    elif kind == "Reduce":
        fn = dict(sum=torch.sum, mean=torch.mean, amax=torch.amax)[op["fn"]]
        y = fn(x, dim=op.get("axes") or list(range(x.dim())), keepdim=op.get("keepdim", False))
        if y.dim() == 0:
            y = y.reshape(1)
    elif kind == "TopK":  # the indices (int64); the values are a Gather by them
        y = torch.topk(x, op["k"], dim=op.get("axis", -1)).indices
    elif kind == "Cumsum":
        y = torch.cumsum(x, op.get("axis", -1))
    elif kind == "Gather":
        y = torch.gather(x, op.get("axis", -1), acts[ins[1]])
    elif kind == "MatMul":
        y = torch.matmul(x, acts[ins[1]])
    elif kind == "Attention":
        mask = None
        if op.get("const_shape"):
            mask = torch.tensor(constant(op, t).astype(np.float64), dtype=x.dtype).reshape(op["const_shape"])
        y = attention(x, acts[ins[1]], acts[ins[2]], op.get("causal", False), op.get("scale"), mask)
    else:
        raise SystemExit(f"op {v}: cannot rebuild a {kind}")
    if "shape" in op and op["shape"]:
        y = y.reshape(op["shape"])
    return y


# Parameters added to an op's output, broadcast (dp = dy summed over the
# positions the parameter is repeated at): slot and the output's axes the
# parameter runs along, by kind (None: a learned constant of const_shape,
# right-aligned as numpy broadcasts).
ADDED = {"BatchNorm": ("beta", [1]), "GroupNorm": ("beta", [1]), "LayerNorm": ("beta", [-1]),
         "Linear": ("bias", [-1]), "Dense": ("bias", [-1]), "Conv": ("bias", [1]), "ConvTranspose": ("bias", [1]),
         "AddConst": ("weight", None)}


def added_param(op):
    """(slot, axes) of the parameter `op` adds to its output, or None."""
    kind = op["kind"]
    if kind == "Pointwise" and op.get("fn") in ("add", "sub") and op.get("learned"):
        return ("weight", None)
    if kind == "AddConst" and not op.get("learned"):
        return None
    if kind in ("Linear", "Dense", "Conv", "ConvTranspose") and not op.get("bias", True):
        return None
    if kind in ("BatchNorm", "GroupNorm", "LayerNorm") and not op.get("affine", True):
        return None
    return ADDED.get(kind)


def summation_floor(records, leaves):
    """Per gradient of a parameter an op adds to its output (a bias, a norm's β,
    a learned additive constant): 2⁻²³·Σ|dy| per element, float32's epsilon
    times the sum of the absolute values of the terms that make it (the
    output's gradient over the positions the parameter is broadcast to, in
    float64). A relative tolerance cannot hold such a gradient where its terms
    cancel: a batch norm's β followed, through a convolution, by another batch
    norm has gradient 0 exactly (the second norm removes any shift), and the
    float32 sum of its terms is rounding noise, ~10⁻⁷ of their magnitude
    (tests/exec/summation_floor_check.py). The rounding of a float32 sum of n
    terms is at most (n−1)·2⁻²⁴·Σ|terms| and in practice far less (measured on
    zero_beta.json, n = 144: 0.26 and 0.33 of this floor); the floor is one epsilon of
    Σ|terms|, not the n-fold bound, so that where the terms do not cancel it
    stays below the relative tolerance (it exceeds 1e-4·|ref| only where
    |ref| < 1.2e-3·Σ|terms|)."""
    floor = {}
    for op, y in records:
        slot, axes = added_param(op)
        key = f"{op['id']}.{slot}"
        if key not in leaves or y.grad is None:
            continue
        g = y.grad.detach().abs().double()
        if axes is None:  # a constant of const_shape, right-aligned
            shape = list(op.get("const_shape") or [1])
            shape = [1] * (g.dim() - len(shape)) + shape
            dims = [d for d in range(g.dim()) if shape[d] == 1 and g.shape[d] != 1]
        else:
            keep = {a % g.dim() for a in axes}
            dims = [d for d in range(g.dim()) if d not in keep]
        total = g.sum(dim=dims) if dims else g
        floor[key] = (2.0 ** -23 * total).reshape(-1).numpy()
    return floor


def rebuild(ops, t, dtype=torch.float64, records=None):
    """Loss and {param name: leaf tensor} of the step, in float64 (or dtype).
    records: a list that gets (op, output) of every op adding a parameter to its
    output (added_param), the output's gradient retained (summation_floor)."""
    leaves = {}

    def param(v, slot):
        key = f"{v}.{slot}"
        if key not in leaves:
            leaves[key] = torch.tensor(t["param." + key], dtype=dtype, requires_grad=True)
        return leaves[key]

    acts = {}
    for op in ops:
        v, kind, ins = op["id"], op["kind"], op.get("inputs", [])
        x = acts[ins[0]] if ins else None
        if kind == "Input":
            ids = t["input"].dtype.kind == "i"  # token ids
            acts[v] = torch.tensor(t["input"].astype(np.int64)) if ids else torch.tensor(t["input"], dtype=dtype)
            continue
        if kind == "MSELoss":
            return F.mse_loss(x, torch.tensor(t["target"], dtype=dtype)), leaves
        if kind == "BCEWithLogitsLoss":
            return F.binary_cross_entropy_with_logits(x, torch.tensor(t["target"], dtype=dtype)), leaves
        if kind == "SoftmaxCELoss":
            labels = torch.tensor(t["labels"].astype(np.int64))
            return F.cross_entropy(x.reshape(-1, x.shape[-1]), labels,
                                   label_smoothing=float(op.get("label_smoothing", 0.0))), leaves
        acts[v] = apply_op(op, acts, param, t)
        if records is not None and added_param(op) is not None and acts[v].requires_grad:
            acts[v].retain_grad()
            records.append((op, acts[v]))
    raise SystemExit("the graph has no loss")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True, help="path of the remat binary")
    ap.add_argument("--model", required=True)
    ap.add_argument("--strategy", default="sqrt")
    ap.add_argument("--seed", default="3")
    ap.add_argument("--tol", type=float, default=1e-4, help="relative tolerance, per element and for the loss")
    ap.add_argument("--atol", type=float, default=1e-5,
                    help="absolute tolerance per element, as a fraction of the tensor's largest |element|")
    ap.add_argument("--float32", type=float, default=0.0,
                    help="K: also allow K times PyTorch's own float32 error per gradient tensor (0: not)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "dump")
        cmd = [a.remat, "run", "--model", a.model, "--strategy", a.strategy, "--backend", "cpu",
               "--repeat", "1", "--seed", a.seed, "--dump", d]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(" ".join(cmd), "failed:", r.returncode, r.stdout, r.stderr)
            return 1
        t, meta = read_safetensors(os.path.join(d, "tensors.safetensors"))
        ops = load_graph(d, meta)
    records = []
    loss, leaves = rebuild(ops, t, records=records)
    loss.backward()
    floor = summation_floor(records, leaves)
    worst = 0.0
    ref_loss = loss.item()
    got_loss = float(t["loss"])
    err = abs(got_loss - ref_loss) / max(abs(ref_loss), 1e-12)
    print(f"{a.model} {a.strategy}: loss remat {got_loss:.8g} torch {ref_loss:.8g} rel err {err:.2e}")
    own = {}  # K times PyTorch's own float32 error, per gradient
    if a.float32:
        loss32, leaves32 = rebuild(ops, t, torch.float32)
        loss32.backward()
        err32 = abs(loss32.item() - ref_loss) / max(abs(ref_loss), 1e-12)
        print(f"torch in float32: loss rel err {err32:.2e}; allowed {a.float32:g} times its error beyond the tolerance")
        err = max(0.0, err - a.float32 * err32)
        own = {k: a.float32 * float((leaves32[k].grad.double() - leaves[k].grad).abs().max()) for k in leaves}
    failures = [f"loss: relative error {err:.2e}"] if err >= a.tol else []
    grads = sorted(k for k in t if k.startswith("grad."))
    grad_order = [k for k in meta["_order"] if k.startswith("grad.")]
    if len(grads) != len(leaves):
        failures.append(f"{len(grads)} gradients dumped, {len(leaves)} parameters used by the graph")
    for name in grads:
        key = name[len("grad."):]
        ref = leaves[key].grad.numpy()
        got = t[name].astype(np.float64)
        # Element by element: |got - ref| <= atol + rtol * |ref|. float32 rounding
        # grows with the size of the summands, not of the result, so atol scales
        # with the tensor's largest element (a gradient that cancels to ~0 is
        # still held to the precision of its terms).
        atol = a.atol * max(float(np.abs(ref).max(initial=0.0)), 1e-30)
        # A bias or β whose terms cancel is held to the rounding of their sum
        # (summation_floor), not to a fraction of what is left.
        excess = np.abs(got - ref) / (atol + a.tol * np.abs(ref) + own.get(key, 0.0) +
                                      (floor[key].reshape(ref.shape) if key in floor else 0.0))
        k = int(np.argmax(excess)) if excess.size else 0
        worst = max(worst, float(excess.flat[k]) if excess.size else 0.0)
        bad = int(np.count_nonzero(~(excess <= 1.0)))
        if bad:
            failures.append(f"{name}: {bad} of {excess.size} elements outside atol {atol:.1e} + rtol {a.tol:.0e}*|ref|"
                            f"{' + 2^-23*sum|dy|' if key in floor else ''}; "
                            f"worst at {k}: remat {got.flat[k]:.9g}, torch {ref.flat[k]:.9g}")
    print(f"{len(grads)} parameter gradients, worst element at {worst:.2f} of its tolerance")
    h = 0xcbf29ce484222325  # FNV-1a 64 over the gradients' bytes, in file (parameter) order
    for name in grad_order:
        for byte in t[name].astype("<f4").tobytes():
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    if f"{h:016x}" != meta.get("grad_hash"):
        failures.append(f"grad_hash: remat says {meta.get('grad_hash')}, the dumped gradients hash to {h:016x}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
