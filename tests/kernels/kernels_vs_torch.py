#!/usr/bin/env python3
"""The CPU kernels against PyTorch, output by output and gradient by gradient.

For each case below this script writes float32 inputs, runs `kernel_probe`
(tests/kernels/kernel_probe.cpp) on them, and computes the same op's forward
and gradients with PyTorch in float64 from the very same float32 values. Every
element must satisfy |got - ref| <= ATOL * max|ref| + RTOL * |ref|; max-pool
indices must be equal, and the pools' outputs and input gradients must equal
PyTorch's own float32 ones bit for bit. Non-finite references (masked -inf, fully masked NaN)
must be matched exactly.
The padding cases (bitwise) are held to PyTorch's own float32 results bit
for bit too: the pads copy, and their backward adds in the order PyTorch's CPU
kernels add.

Usage: tests/with_torch_python.sh tests/kernels/kernels_vs_torch.py --probe PATH
Exit 0 when all agree, 1 otherwise (the table says which tensor and by how much).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

RTOL = 1e-4
ATOL = 1e-5  # relative to the tensor's largest magnitude


def conv_case(name, n, c, h, w, k, r, s, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1, bias=True):
    return dict(name=name, op="conv2d", n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride_h=stride[0],
                stride_w=stride[1], pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1],
                groups=groups, bias=bias)


def pool_case(name, op, n, c, h, w, kernel, stride, pad, ties=False, ceil=False, dil=1, count_pad=True):
    return dict(name=name, op=op, n=n, c=c, h=h, w=w, kh=kernel[0], kw=kernel[1], stride_h=stride[0],
                stride_w=stride[1], pad_h=pad[0], pad_w=pad[1], ties=ties, ceil_mode=ceil, dil_h=dil, dil_w=dil,
                count_include_pad=count_pad, f32_bits=True)


def adaptive_case(name, n, c, h, w, out):
    """PyTorch's adaptive_avg_pool2d to out (h, w): kernel_probe's avgpool2d with out_h, out_w."""
    return dict(name=name, op="avgpool2d", n=n, c=c, h=h, w=w, kh=1, kw=1, stride_h=1, stride_w=1, pad_h=0,
                pad_w=0, ties=False, out_h=out[0], out_w=out[1], f32_bits=True)


def pool_out(case):
    """The pooled (oh, ow): torch's own shape rule, from a float32 run."""
    y = torch_pool(case, torch.zeros(1, 1, case["h"], case["w"]))
    return tuple((y[0] if case["op"] == "maxpool2d" else y).shape[2:])


CASES = [
    conv_case("conv_stem_7x7_s2", 2, 3, 32, 30, 8, 7, 7, stride=(2, 2), pad=(3, 3), bias=False),
    conv_case("conv_3x3", 2, 8, 10, 10, 16, 3, 3, pad=(1, 1)),
    conv_case("conv_3x3_s2", 2, 8, 11, 9, 8, 3, 3, stride=(2, 2), pad=(1, 1)),
    conv_case("conv_1x1", 2, 16, 6, 7, 8, 1, 1),
    conv_case("conv_1x1_s2", 2, 8, 9, 9, 16, 1, 1, stride=(2, 2), bias=False),
    conv_case("conv_groups4", 2, 8, 7, 7, 12, 3, 3, pad=(1, 1), groups=4),
    conv_case("conv_depthwise_s2", 2, 8, 9, 10, 16, 3, 3, stride=(2, 2), pad=(1, 1), groups=8),
    conv_case("conv_dilated", 1, 4, 12, 12, 6, 3, 3, pad=(2, 2), dil=(2, 2)),
    conv_case("conv1d", 3, 4, 1, 30, 5, 1, 5, stride=(1, 2), pad=(0, 2), dil=(1, 2)),
    conv_case("conv_anisotropic", 2, 3, 9, 11, 4, 3, 2, stride=(2, 1), pad=(1, 0), dil=(1, 3)),
    dict(name="bn_4x8x25", op="batchnorm", n=4, c=8, hw=25, eps=1e-5, momentum=0.1, offset=0.0),
    dict(name="bn_hw1", op="batchnorm", n=6, c=3, hw=1, eps=1e-3, momentum=0.3, offset=0.0),
    dict(name="bn_large_mean", op="batchnorm", n=2, c=4, hw=49, eps=1e-5, momentum=0.1, offset=300.0),
    pool_case("maxpool_3x3_s2_p1", "maxpool2d", 2, 4, 15, 16, (3, 3), (2, 2), (1, 1)),
    pool_case("maxpool_2x2", "maxpool2d", 2, 3, 8, 6, (2, 2), (2, 2), (0, 0)),
    pool_case("maxpool_anisotropic", "maxpool2d", 1, 2, 9, 7, (3, 2), (1, 2), (1, 1)),
    pool_case("maxpool_ties", "maxpool2d", 2, 2, 9, 9, (3, 3), (1, 1), (1, 1), ties=True),
    pool_case("avgpool_3x3_p1", "avgpool2d", 2, 3, 7, 8, (3, 3), (1, 1), (1, 1)),
    pool_case("avgpool_2x2", "avgpool2d", 2, 3, 8, 6, (2, 2), (2, 2), (0, 0)),
    pool_case("avgpool_anisotropic", "avgpool2d", 1, 2, 9, 7, (3, 2), (2, 1), (1, 1)),
    pool_case("maxpool_ceil", "maxpool2d", 2, 3, 8, 9, (3, 3), (2, 2), (0, 0), ceil=True),
    pool_case("maxpool_ceil_p1", "maxpool2d", 1, 2, 10, 7, (3, 3), (2, 2), (1, 1), ceil=True),
    pool_case("maxpool_dilated", "maxpool2d", 2, 2, 11, 10, (3, 3), (2, 3), (1, 0), ceil=True, dil=2),
    pool_case("avgpool_ceil", "avgpool2d", 2, 3, 8, 9, (3, 3), (2, 2), (1, 1), ceil=True),
    pool_case("avgpool_pad_left_out", "avgpool2d", 2, 2, 7, 6, (3, 3), (1, 2), (1, 1), count_pad=False),
    pool_case("avgpool_ceil_pad_left_out", "avgpool2d", 1, 3, 8, 9, (3, 3), (2, 2), (1, 1), ceil=True,
              count_pad=False),
    adaptive_case("adaptive_2_to_7", 2, 3, 2, 2, (7, 7)),
    adaptive_case("adaptive_4x5_to_6x3", 2, 2, 4, 5, (6, 3)),
    adaptive_case("adaptive_13_to_6", 1, 4, 13, 13, (6, 6)),
    dict(name="global_avgpool", op="global_avgpool", n=2, c=5, h=7, w=7),
    *[dict(name=f"bmm_{'t' if ta else 'n'}{'t' if tb else 'n'}", op="bmm", batch=6, m=16, n=12, k=8,
           trans_a=ta, trans_b=tb) for ta in (False, True) for tb in (False, True)],
    dict(name="bmm_attention_scores", op="bmm", batch=8, m=32, n=32, k=16, trans_a=False, trans_b=True),
    dict(name="softmax", op="softmax", rows=64, cols=33, causal=False),
    dict(name="softmax_causal", op="softmax", rows=6 * 16, cols=16, causal=True),
    dict(name="masked_fill_causal", op="masked_fill", T=8, reps=6, value="-inf"),
    dict(name="masked_fill_value", op="masked_fill", T=5, reps=3, value=-1e4),
    dict(name="scale", op="scale", numel=300, alpha=0.125),
    *[dict(name=f"act_{a}", op="act", act=a, numel=1000) for a in ("relu", "tanh", "gelu", "sigmoid", "silu")],
    dict(name="concat", op="concat", outer=3, widths=[2, 5, 1], inner=7),
    dict(name="embedding", op="embedding", vocab=11, dim=6, positions=40),
]
PAD_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
for _mode, _shape, _pads in [("reflect", [2, 3, 5, 4], [3, 3, 3, 3]), ("reflect", [2, 3, 7], [3, 6]),
                             ("reflect", [1, 2, 3, 4, 5], [1, 2, 0, 3, 2, 1]), ("replicate", [2, 2, 5], [4, 7]),
                             ("replicate", [1, 2, 1, 6], [2, 3, 3, 2]), ("replicate", [2, 1, 3, 2, 4], [1, 0, 2, 2, 0, 3]),
                             ("circular", [2, 3, 4], [4, 4]), ("circular", [2, 3, 5, 6], [2, 3, 4, 5]),
                             ("circular", [1, 2, 3, 4, 2], [2, 1, 0, 3, 3, 1]), ("constant", [2, 3, 6, 7], [-2, 1, 1, -3]),
                             ("constant", [2, 5, 6, 3], [0, 0, 0, 2, 0, 1])]:
    _before, _after = [0] * len(_shape), [0] * len(_shape)
    for _j in range(len(_pads) // 2):
        _before[-1 - _j], _after[-1 - _j] = _pads[2 * _j], _pads[2 * _j + 1]
    CASES.append(dict(name=f"pad_{_mode}_{len(_pads) // 2}d_{len(CASES)}", op="pad", bitwise=True, pads=_pads,
                      torch_mode=_mode, mode=PAD_MODES[_mode], shape=_shape, before=_before, after=_after, value=0.5))

# The pointwise family (core/kernels/pointwise_fns.h), each function once with
# operand 0 strided (stored transposed) and the others broadcast, and binary
# ones once more with operand 0 broadcast (its gradient sums); the reductions.
FAMILY = {  # name: (arity, p, q, torch function of the operands and p, q)
    "neg": (1, 0, 0, lambda a, p, q: torch.neg(a)),
    "exp": (1, 0, 0, lambda a, p, q: torch.exp(a)),
    "log": (1, 0, 0, lambda a, p, q: torch.log(a)),
    "sqrt": (1, 0, 0, lambda a, p, q: torch.sqrt(a)),
    "rsqrt": (1, 0, 0, lambda a, p, q: torch.rsqrt(a)),
    "reciprocal": (1, 0, 0, lambda a, p, q: torch.reciprocal(a)),
    "abs": (1, 0, 0, lambda a, p, q: torch.abs(a)),
    "sin": (1, 0, 0, lambda a, p, q: torch.sin(a)),
    "cos": (1, 0, 0, lambda a, p, q: torch.cos(a)),
    "erf": (1, 0, 0, lambda a, p, q: torch.erf(a)),
    "hardswish": (1, 0, 0, lambda a, p, q: F.hardswish(a)),
    "hardsigmoid": (1, 0, 0, lambda a, p, q: F.hardsigmoid(a)),
    "leaky_relu": (1, 0.2, 0, lambda a, p, q: F.leaky_relu(a, p)),
    "elu": (1, 0.7, 0, lambda a, p, q: F.elu(a, p)),
    "softplus": (1, 2.0, 3.0, lambda a, p, q: F.softplus(a, p, q)),
    "mish": (1, 0, 0, lambda a, p, q: F.mish(a)),
    "clamp": (1, -0.5, 0.8, lambda a, p, q: torch.clamp(a, p, q)),
    "relu": (1, 0, 0, lambda a, p, q: torch.relu(a)),
    "tanh": (1, 0, 0, lambda a, p, q: torch.tanh(a)),
    "sigmoid": (1, 0, 0, lambda a, p, q: torch.sigmoid(a)),
    "gelu": (1, 0, 0, lambda a, p, q: F.gelu(a)),
    "silu": (1, 0, 0, lambda a, p, q: F.silu(a)),
    "cast": (1, 0, 0, lambda a, p, q: a.to(torch.float64)),
    "add": (2, 0, 0, lambda a, b, p, q: a + b),
    "sub": (2, 0, 0, lambda a, b, p, q: a - b),
    "mul": (2, 0, 0, lambda a, b, p, q: a * b),
    "div": (2, 0, 0, lambda a, b, p, q: a / b),
    "maximum": (2, 0, 0, lambda a, b, p, q: torch.maximum(a, b)),
    "minimum": (2, 0, 0, lambda a, b, p, q: torch.minimum(a, b)),
    "pow": (2, 0, 0, lambda a, b, p, q: torch.pow(a, b)),
    "where": (3, 0, 0, lambda c, a, b, p, q: torch.where(c != 0, a, b)),
}
for _fn, (_arity, _p, _q, _) in FAMILY.items():
    CASES.append(dict(name=f"pw_{_fn}", op="pointwise", fn=_fn, p=_p, q=_q, shape=[2, 3, 4],
                      dims=[[2, 3, 4], [1, 3, 1], [1, 1, 4]][:_arity], transposed=True))
    if _arity > 1:
        CASES.append(dict(name=f"pw_{_fn}_bcast", op="pointwise", fn=_fn, p=_p, q=_q, shape=[2, 3, 4],
                          dims=[[1, 3, 1], [2, 3, 4], [2, 1, 4]][:_arity], transposed=False))
for _fn in ("sum", "mean", "amax"):
    for _axes in ([2], [0, 2], [0, 1, 2]):
        CASES.append(dict(name=f"reduce_{_fn}_{''.join(map(str, _axes))}", op="reduce", fn=_fn, axes=_axes))


def family_operand(case, k, rng):
    """Operand k of a pointwise case in its function's domain, away from kinks
    (as tests/kernels/test_pointwise.cpp), stored transposed when asked."""
    fn, dims = case["fn"], case["dims"][k]
    lo, hi = -2.0, 2.0
    if k == 0 and fn in ("log", "sqrt", "rsqrt", "reciprocal", "pow"):
        lo = 0.5
    if k == 1 and fn == "div":
        lo = 0.5
    if k == 1 and fn == "pow":
        lo, hi = -1.5, 1.5
    if fn in ("hardswish", "hardsigmoid"):
        lo, hi = -5.0, 5.0
    v = rng.uniform(lo, hi, size=dims)
    if fn == "where" and k == 0:
        v = (v > 0).astype(np.float64)
    else:
        for kink in (0.0, 3.0, -3.0, case["p"], case["q"]):
            v = np.where(np.abs(v - kink) < 1e-2, v + 0.05, v)
    return v.astype(np.float32)


def causal_mask(T):
    return np.triu(np.ones((T, T), dtype=np.uint8), k=1)


def make_inputs(case, rng):
    """float32 (and index) inputs of a case; returns {tensor: numpy array} and
    completes the case with the sizes the probe needs."""
    def f32(*shape, lo=-2.0, hi=2.0):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    op = case["op"]
    if op == "conv2d":
        oh = (case["h"] + 2 * case["pad_h"] - case["dil_h"] * (case["r"] - 1) - 1) // case["stride_h"] + 1
        ow = (case["w"] + 2 * case["pad_w"] - case["dil_w"] * (case["s"] - 1) - 1) // case["stride_w"] + 1
        t = dict(x=f32(case["n"], case["c"], case["h"], case["w"]),
                 W=f32(case["k"], case["c"] // case["groups"], case["r"], case["s"], lo=-0.5, hi=0.5),
                 dy=f32(case["n"], case["k"], oh, ow))
        if case["bias"]:
            t["b"] = f32(case["k"])
        return t
    if op == "batchnorm":
        n, c, hw = case["n"], case["c"], case["hw"]
        return dict(x=f32(n, c, hw) + np.float32(case["offset"]), gamma=f32(c, lo=0.5, hi=1.5), beta=f32(c),
                    running_mean=f32(c), running_var=f32(c, lo=0.5, hi=2.0), dy=f32(n, c, hw))
    if op in ("maxpool2d", "avgpool2d"):
        oh, ow = pool_out(case)
        shape = (case["n"], case["c"], case["h"], case["w"])
        x = rng.integers(0, 3, size=shape).astype(np.float32) if case["ties"] else f32(*shape)
        return dict(x=x, dy=f32(case["n"], case["c"], oh, ow))
    if op == "global_avgpool":
        case.update(nc=case["n"] * case["c"], hw=case["h"] * case["w"])
        return dict(x=f32(case["n"], case["c"], case["h"], case["w"]), dy=f32(case["n"], case["c"]))
    if op == "bmm":
        b, m, n, k = case["batch"], case["m"], case["n"], case["k"]
        return dict(a=f32(b, k, m) if case["trans_a"] else f32(b, m, k),
                    b=f32(b, n, k) if case["trans_b"] else f32(b, k, n), dc=f32(b, m, n))
    if op == "softmax":
        x = f32(case["rows"], case["cols"], lo=-6.0, hi=6.0)
        if case["causal"]:
            T = case["cols"]
            x = x.reshape(-1, T, T)
            x[:, causal_mask(T) != 0] = -np.inf
            x = x.reshape(case["rows"], T)
        return dict(x=x, dy=f32(case["rows"], case["cols"]))
    if op == "masked_fill":
        T, reps = case["T"], case["reps"]
        case.update(numel=reps * T * T, mask_n=T * T)
        return dict(x=f32(reps, T, T), mask=causal_mask(T), dy=f32(reps, T, T))
    if op == "scale":
        return dict(x=f32(case["numel"]), dy=f32(case["numel"]))
    if op == "act":
        return dict(x=f32(case["numel"], lo=-6.0, hi=6.0), dy=f32(case["numel"]))
    if op == "concat":
        t = {f"x{i}": f32(case["outer"], wd, case["inner"]) for i, wd in enumerate(case["widths"])}
        t["dy"] = f32(case["outer"], sum(case["widths"]), case["inner"])
        return t
    if op == "pointwise":
        t = {}
        for k in range(len(case["dims"])):
            v = family_operand(case, k, rng)
            t[f"x{k}"] = v
            if k == 0 and case["transposed"]:
                t["x0_stored"] = np.ascontiguousarray(v.transpose(2, 1, 0))
        t["dy"] = f32(*case["shape"])
        return t
    if op == "reduce":
        return dict(x=f32(2, 3, 4), dy=f32(*[1 if d in case["axes"] else n for d, n in enumerate((2, 3, 4))]))
    if op == "embedding":
        idx = rng.integers(0, case["vocab"], size=case["positions"]).astype(np.int32)
        idx[:3] = [0, case["vocab"] - 1, 0]  # both ends of the table and a repeat
        return dict(table=f32(case["vocab"], case["dim"]), idx=idx, dy=f32(case["positions"], case["dim"]))
    if op == "pad":
        y = [n + b + a for n, b, a in zip(case["shape"], case["before"], case["after"])]
        return dict(x=f32(*case["shape"]), dy=f32(*y))
    raise ValueError(op)


def grads(outputs, wrt, grad_outputs):
    return torch.autograd.grad(outputs, wrt, grad_outputs, allow_unused=True)


def torch_pool(case, x):
    """The case's pool in PyTorch: max_pool2d (with indices), avg_pool2d or adaptive_avg_pool2d."""
    if case.get("out_h"):
        return F.adaptive_avg_pool2d(x, (case["out_h"], case["out_w"]))
    k, s, p = (case["kh"], case["kw"]), (case["stride_h"], case["stride_w"]), (case["pad_h"], case["pad_w"])
    if case["op"] == "maxpool2d":
        return F.max_pool2d(x, k, s, p, dilation=(case["dil_h"], case["dil_w"]), ceil_mode=case["ceil_mode"],
                            return_indices=True)
    return F.avg_pool2d(x, k, s, p, ceil_mode=case["ceil_mode"], count_include_pad=case["count_include_pad"])


def torch_float32_bits(case, t):
    """PyTorch's own float32 pool forward and input gradient on the same
    values, which remat's kernels match bit for bit: {tensor: numpy array}."""
    x = torch.from_numpy(t["x"]).requires_grad_(True)
    out = torch_pool(case, x)
    y = out[0] if case["op"] == "maxpool2d" else out
    return dict(y=y, dx=grads(y, [x], torch.from_numpy(t["dy"]))[0])


def reference(case, t):
    """PyTorch's float64 forward and gradients: {tensor: numpy array}."""
    def d(name, grad=False):
        return torch.from_numpy(t[name]).double().requires_grad_(grad)

    op = case["op"]
    if op == "conv2d":
        x, W, dy = d("x", True), d("W", True), d("dy")
        b = d("b", True) if case["bias"] else None
        y = F.conv2d(x, W, b, stride=(case["stride_h"], case["stride_w"]), padding=(case["pad_h"], case["pad_w"]),
                     dilation=(case["dil_h"], case["dil_w"]), groups=case["groups"])
        wrt = [x, W] + ([b] if b is not None else [])
        g = grads(y, wrt, dy)
        out = dict(y=y, dx=g[0], dW=g[1])
        if b is not None:
            out["db"] = g[2]
        return out
    if op == "batchnorm":
        x, gamma, beta, dy = d("x", True), d("gamma", True), d("beta", True), d("dy")
        rmean, rvar = d("running_mean"), d("running_var")
        y, mean, invstd = torch.ops.aten.native_batch_norm(x, gamma, beta, rmean, rvar, True, case["momentum"],
                                                           case["eps"])
        g = grads(y, [x, gamma, beta], dy)
        return dict(y=y, save_mean=mean, save_invstd=invstd, running_mean=rmean, running_var=rvar, dx=g[0],
                    dgamma=g[1], dbeta=g[2])
    if op == "maxpool2d":
        x, dy = d("x", True), d("dy")
        y, idx = torch_pool(case, x)
        return dict(y=y, indices=idx, dx=grads(y, [x], dy)[0])
    if op == "avgpool2d":
        x, dy = d("x", True), d("dy")
        y = torch_pool(case, x)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "global_avgpool":
        x, dy = d("x", True), d("dy")
        y = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "bmm":
        a, b, dc = d("a", True), d("b", True), d("dc")
        opa = a.transpose(-1, -2) if case["trans_a"] else a
        opb = b.transpose(-1, -2) if case["trans_b"] else b
        c = torch.bmm(opa, opb)
        g = grads(c, [a, b], dc)
        return dict(c=c, da=g[0], db=g[1])
    if op == "softmax":
        x, dy = d("x", True), d("dy")
        y = torch.softmax(x, dim=-1)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "masked_fill":
        x, dy = d("x", True), d("dy")
        value = float("-inf") if case["value"] == "-inf" else case["value"]
        y = x.masked_fill(torch.from_numpy(t["mask"]).bool(), value)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "scale":
        x, dy = d("x", True), d("dy")
        y = x * case["alpha"]
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "act":
        x, dy = d("x", True), d("dy")
        fn = dict(relu=torch.relu, tanh=torch.tanh, gelu=F.gelu, sigmoid=torch.sigmoid, silu=F.silu)[case["act"]]
        y = fn(x)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "concat":
        xs = [d(f"x{i}", True) for i in range(len(case["widths"]))]
        y = torch.cat(xs, dim=1)
        g = grads(y, xs, d("dy"))
        return dict(y=y, **{f"dx{i}": gi for i, gi in enumerate(g)})
    if op == "pointwise":
        arity, _, _, fn = FAMILY[case["fn"]]
        xs = [d(f"x{k}", not (case["fn"] == "where" and k == 0)) for k in range(arity)]
        y = fn(*xs, case["p"], case["q"]).expand(*case["shape"])
        first = 1 if case["fn"] == "where" else 0
        g = grads(y, xs[first:], d("dy"))
        return dict(y=y, **{f"dx{k + first}": gk for k, gk in enumerate(g)})
    if op == "reduce":
        x, dy = d("x", True), d("dy")
        fn = dict(sum=torch.sum, mean=torch.mean, amax=torch.amax)[case["fn"]]
        y = fn(x, dim=case["axes"], keepdim=True)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    if op == "embedding":
        table, dy = d("table", True), d("dy")
        y = F.embedding(torch.from_numpy(t["idx"]).long(), table)
        return dict(y=y, dtable=grads(y, [table], dy)[0])
    if op == "pad":  # PyTorch's float32, to be matched bit for bit
        x, dy = torch.from_numpy(t["x"]).requires_grad_(True), torch.from_numpy(t["dy"])
        mode = case["torch_mode"]
        y = F.pad(x, case["pads"], mode=mode, value=case["value"]) if mode == "constant" else F.pad(x, case["pads"], mode=mode)
        return dict(y=y, dx=grads(y, [x], dy)[0])
    raise ValueError(op)


def compare(got, ref):
    """Worst |got − ref| / (ATOL·max|ref| + RTOL·|ref|) over finite references
    (≤ 1 passes); inf when a non-finite reference is not matched exactly."""
    finite = np.isfinite(ref)
    if not np.array_equal(np.isnan(got), np.isnan(ref)) or not np.array_equal(got[np.isinf(ref)], ref[np.isinf(ref)]):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = np.abs(ref[finite]).max()
    bound = ATOL * scale + RTOL * np.abs(ref[finite])
    err = np.abs(got[finite].astype(np.float64) - ref[finite])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / bound)
    return float(ratio.max())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", required=True, help="path of the kernel_probe program")
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(20240611)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kernels_vs_torch_") as tmp:
        tmp = Path(tmp)
        inputs = {}
        for case in CASES:
            inputs[case["name"]] = make_inputs(case, rng)
            for tensor, arr in inputs[case["name"]].items():
                if tensor == "x0" and "x0_stored" in inputs[case["name"]]:
                    continue  # the probe reads operand 0 as stored (transposed)
                name = "x0" if tensor == "x0_stored" else tensor
                np.ascontiguousarray(arr).tofile(tmp / f"{case['name']}.{name}.bin")
        (tmp / "manifest.json").write_text(json.dumps({"cases": CASES}))
        proc = subprocess.run([args.probe, str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"FAIL: kernel_probe exited {proc.returncode}: {proc.stderr.strip()}")
            return 1
        print(f"{'case':<24} {'tensor':<13} {'elements':>8}  worst error / tolerance")
        for case in CASES:
            ref = reference(case, inputs[case["name"]])
            for tensor, value in ref.items():
                path = tmp / f"{case['name']}.out.{tensor}.bin"
                want = value.detach().numpy().reshape(-1)
                if tensor == "indices":
                    got = np.fromfile(path, dtype=np.int64)
                    ok = got.shape == want.shape and np.array_equal(got, want)
                    verdict = "equal" if ok else f"{int((got != want).sum()) if got.shape == want.shape else 'size'} differ"
                elif case.get("bitwise"):
                    got = np.fromfile(path, dtype=np.float32)
                    ok = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
                    verdict = "bitwise" if ok else "not PyTorch's bits"
                else:
                    got = np.fromfile(path, dtype=np.float32)
                    ok = got.shape == want.shape
                    ratio = compare(got, want) if ok else float("inf")
                    ok = ok and ratio <= 1.0
                    verdict = f"{ratio:.3g}"
                failures += 0 if ok else 1
                print(f"{case['name']:<24} {tensor:<13} {want.size:>8}  {verdict}{'' if ok else '   FAIL'}")
            if case.get("f32_bits"):  # the pools: PyTorch's float32 bits as well
                for tensor, value in torch_float32_bits(case, inputs[case["name"]]).items():
                    got = np.fromfile(tmp / f"{case['name']}.out.{tensor}.bin", dtype=np.float32)
                    want = value.detach().numpy().reshape(-1)
                    ok = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
                    failures += 0 if ok else 1
                    print(f"{case['name']:<24} {tensor + ' f32':<13} {want.size:>8}  "
                          f"{'bitwise' if ok else 'bits differ   FAIL'}")
    print(f"{failures} tensor(s) outside |a-b| <= {ATOL}*max|ref| + {RTOL}*|ref|" if failures else
          f"all tensors within |a-b| <= {ATOL}*max|ref| + {RTOL}*|ref|")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
