"""An ONNX graph run by PyTorch in float64, node by node, with the file's own
initializers as leaf tensors: the reference that onnx_file_crosscheck.py holds
`remat run` to. It reads nothing remat wrote but the step's data (the input,
the labels or target, the dropout masks), so a weight the importer failed to
carry, or carried wrongly, shows as a different loss.

run_graph(model, feeds, masks) -> (values, leaves): every tensor the graph
computes by name, and {initializer name: float64 leaf requiring grad}.
Dropout nodes multiply by masks[node name] / (1 - ratio) (remat's masks);
BatchNormalization in training mode uses the batch statistics, as torch does.
Only the ops torch.onnx.export writes for the tested models are implemented;
another raises NotImplementedError naming it. run_graph(..., dtype=torch.float32)
runs the graph as PyTorch trains it (what float32 rounding alone costs)."""
import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
FLOAT = torch.float64  # what floats are held in during run_graph
INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8,
             onnx.TensorProto.UINT8}


def to_torch(arr):
    """A numpy constant as the reference holds it: floats float64, integers int64."""
    if arr.dtype == np.bool_:
        return torch.tensor(arr)
    if np.issubdtype(arr.dtype, np.floating):
        return torch.tensor(arr.astype(np.float64)).to(FLOAT)
    return torch.tensor(arr.astype(np.int64))


def cast(x, to):
    if to in FLOAT_TYPES:
        return x.to(FLOAT)
    if to == onnx.TensorProto.BOOL:
        return x != 0
    if to in INT_TYPES:
        return x.to(torch.int64)
    raise NotImplementedError(f"Cast to {to}")


def ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def axes_of(node, a, inputs, k):
    """Axes from an attribute (old opsets) or input k (new ones); None: all."""
    if "axes" in a:
        return list(a["axes"])
    if len(inputs) > k and inputs[k] is not None:
        return ints(inputs[k])
    return None


def spatial_pads(a, sp):
    pads = list(a.get("pads", [0] * (2 * sp)))
    return pads[:sp], pads[sp:]


def conv(x, w, b, a):
    sp = x.dim() - 2
    begin, end = spatial_pads(a, sp)
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("Conv auto_pad")
    if begin != end:
        x = F.pad(x, [p for i in reversed(range(sp)) for p in (begin[i], end[i])])
        begin = [0] * sp
    f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[sp]
    return f(x, w, b, stride=a.get("strides", [1] * sp), padding=begin, dilation=a.get("dilations", [1] * sp),
             groups=a.get("group", 1))


def pool(op, x, a):
    sp = x.dim() - 2
    begin, end = spatial_pads(a, sp)
    if begin != end:
        raise NotImplementedError(f"{op} with asymmetric pads")
    k, st, ceil = a["kernel_shape"], a.get("strides", [1] * sp), bool(a.get("ceil_mode", 0))
    if op == "MaxPool":
        f = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[sp]
        return f(x, k, st, begin, dilation=a.get("dilations", [1] * sp), ceil_mode=ceil)
    f = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[sp]
    return f(x, k, st, begin, ceil_mode=ceil, count_include_pad=bool(a.get("count_include_pad", 0)))


def slice_(x, starts, ends, axes, steps):
    """Python's slicing clamps out-of-range bounds (INT64_MAX: to the end) as ONNX does."""
    idx = [slice(None)] * x.dim()
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    reversed_axes = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise NotImplementedError("Slice with step 0")
        if st < 0:  # numpy's clamping, as ONNX's (torch's F.pad export reverses its pads so)
            reversed_axes.append((ax, list(range(*slice(s, e, st).indices(x.shape[ax])))))
            continue
        idx[ax] = slice(s, e, st)
    x = x[tuple(idx)]
    for ax, picks in reversed_axes:
        x = x.index_select(ax, torch.tensor(picks, dtype=torch.long))
    return x


def gather(data, idx, axis):
    axis %= data.dim()
    flat = idx.reshape(-1) % data.shape[axis]
    out = data.index_select(axis, flat)
    return out.reshape(tuple(data.shape[:axis]) + tuple(idx.shape) + tuple(data.shape[axis + 1:]))


def reshape(x, shape, allowzero):
    shape = [x.shape[i] if (s == 0 and not allowzero) else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def run_graph(model, feeds, masks=None, dtype=torch.float64):
    """Runs `model` (an onnx.ModelProto) on feeds {graph input name: tensor}."""
    global FLOAT
    FLOAT, saved = dtype, FLOAT
    try:
        feeds = {k: v.to(dtype) if v.is_floating_point() else v for k, v in feeds.items()}
        return _run_graph(model, feeds, masks)
    finally:
        FLOAT = saved


def _run_graph(model, feeds, masks):
    g = model.graph
    masks = masks or {}
    values, leaves = {}, {}
    for init in g.initializer:
        t = to_torch(numpy_helper.to_array(init))
        if t.is_floating_point():
            t.requires_grad_(True)
            leaves[init.name] = t
        values[init.name] = t
    values.update(feeds)
    for node in g.node:
        a = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
        ins = [values[i] if i else None for i in node.input]
        outs = run_node(node, a, ins, masks)
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        for name, v in zip(node.output, outs):
            if name:
                values[name] = v
    return values, leaves


def run_node(node, a, ins, masks):
    op = node.op_type
    x = ins[0] if ins else None
    if op == "Constant":
        if "value" in a:
            return to_torch(numpy_helper.to_array(a["value"]))
        for k, dt in (("value_float", FLOAT), ("value_int", torch.int64)):
            if k in a:
                return torch.tensor(a[k], dtype=dt)
        for k, dt in (("value_floats", FLOAT), ("value_ints", torch.int64)):
            if k in a:
                return torch.tensor(list(a[k]), dtype=dt)
        raise NotImplementedError("Constant of that kind")
    if op == "Identity":
        return x
    if op == "Conv":
        return conv(x, ins[1], ins[2] if len(ins) > 2 else None, a)
    if op == "ConvTranspose":
        sp = x.dim() - 2
        begin, end = spatial_pads(a, sp)
        if begin != end or "output_shape" in a:
            raise NotImplementedError("ConvTranspose with asymmetric pads or output_shape")
        f = {1: F.conv_transpose1d, 2: F.conv_transpose2d}[sp]
        return f(x, ins[1], ins[2] if len(ins) > 2 else None, stride=a.get("strides", [1] * sp), padding=begin,
                 output_padding=a.get("output_padding", [0] * sp), groups=a.get("group", 1),
                 dilation=a.get("dilations", [1] * sp))
    if op == "Resize":
        mode = a.get("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        ctm = a.get("coordinate_transformation_mode", b"half_pixel")
        ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
        sizes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None and ins[3].numel() else None
        scales = [float(s) for s in ins[2].reshape(-1).tolist()] if sizes is None else None
        out = sizes[2:] if sizes else [int(np.floor(d * s)) for d, s in zip(x.shape[2:], scales[2:])]
        if mode == "nearest":
            return F.interpolate(x, size=out, mode="nearest")
        return F.interpolate(x, size=out, mode="bilinear" if x.dim() == 4 else "linear",
                             align_corners=ctm == "align_corners")
    if op == "BatchNormalization":
        training = a.get("training_mode", 1 if len(node.output) > 1 else 0)
        eps = a.get("epsilon", 1e-5)
        if training:
            return F.batch_norm(x, None, None, ins[1], ins[2], training=True, eps=eps)
        return F.batch_norm(x, ins[3], ins[4], ins[1], ins[2], training=False, eps=eps)
    if op == "InstanceNormalization":  # torch's GroupNorm export normalises (N, G, -1) with it
        return F.instance_norm(x, weight=ins[1], bias=ins[2], eps=a.get("epsilon", 1e-5))
    if op == "TopK":
        k = int(ins[1].reshape(-1)[0])
        r = torch.topk(x, k, dim=a.get("axis", -1), largest=bool(a.get("largest", 1)), sorted=bool(a.get("sorted", 1)))
        return r.values, r.indices
    if op == "GatherElements":
        return torch.gather(x, a.get("axis", 0), ins[1])
    if op in ("DepthToSpace", "SpaceToDepth"):  # ONNX's definitions (DCR the default; CRD is pixel_shuffle)
        r = a["blocksize"]
        b, c, h, w = x.shape
        mode = a.get("mode", b"DCR")
        if op == "SpaceToDepth":
            y = x.reshape(b, c, h // r, r, w // r, r).permute(0, 3, 5, 1, 2, 4)
            return y.reshape(b, c * r * r, h // r, w // r)
        if mode in (b"CRD", "CRD"):
            y = x.reshape(b, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
        else:
            y = x.reshape(b, r, r, c // (r * r), h, w).permute(0, 3, 4, 1, 5, 2)
        return y.reshape(b, c // (r * r), h * r, w * r)
    if op == "CumSum":
        if a.get("exclusive", 0) or a.get("reverse", 0):
            raise NotImplementedError("CumSum exclusive or reverse")
        return torch.cumsum(x, int(ins[1].reshape(-1)[0]))
    if op in ("MaxPool", "AveragePool"):
        return pool(op, x, a)
    if op == "GlobalAveragePool":
        return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
    if op == "Flatten":
        ax = a.get("axis", 1) % max(x.dim(), 1)
        return x.reshape(int(np.prod(x.shape[:ax])), -1)
    if op == "Gemm":
        A = x.t() if a.get("transA", 0) else x
        B = ins[1].t() if a.get("transB", 0) else ins[1]
        y = a.get("alpha", 1.0) * (A @ B)
        if len(ins) > 2 and ins[2] is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return y
    if op == "MatMul":
        return torch.matmul(x, ins[1])
    if op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"):
        y = ins[1]
        if op == "Add":
            return x + y
        if op == "Sub":
            return x - y
        if op == "Mul":
            return x * y
        if op == "Div":
            if not x.is_floating_point() and not y.is_floating_point():
                return torch.div(x, y, rounding_mode="trunc")
            return x / y
        if op == "Pow":
            return torch.pow(x, y)
        return torch.maximum(x, y) if op == "Max" else torch.minimum(x, y)
    unary = {"Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Sqrt": torch.sqrt,
             "Erf": torch.erf, "Neg": torch.neg, "Exp": torch.exp, "Log": torch.log, "Abs": torch.abs,
             "Reciprocal": torch.reciprocal}
    if op in unary:
        return unary[op](x)
    if op == "Gelu":
        return F.gelu(x, approximate="tanh" if a.get("approximate", b"none") in (b"tanh", "tanh") else "none")
    if op == "HardSwish":  # x · max(0, min(1, x/6 + 1/2)), ONNX's definition
        return x * torch.clamp(x / 6 + 0.5, 0, 1)
    if op == "HardSigmoid":
        return torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)
    if op == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min")
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max")
        return torch.clamp(x, None if lo is None else float(lo), None if hi is None else float(hi))
    if op in ("ReduceMean", "ReduceSum", "ReduceMax"):
        axes = axes_of(node, a, ins, 1)
        keep = bool(a.get("keepdims", 1))
        dims = tuple(axes) if axes is not None else tuple(range(x.dim()))
        if op == "ReduceMean":
            return x.mean(dim=dims, keepdim=keep)
        if op == "ReduceSum":
            return x.sum(dim=dims, keepdim=keep)
        return x.amax(dim=dims, keepdim=keep)
    if op == "Softmax":
        return torch.softmax(x, dim=a.get("axis", -1))
    if op == "LogSoftmax":
        return torch.log_softmax(x, dim=a.get("axis", -1))
    if op == "Where":
        return torch.where(x.bool(), ins[1], ins[2])
    if op in ("Equal", "Less", "Greater"):
        return {"Equal": torch.eq, "Less": torch.lt, "Greater": torch.gt}[op](x, ins[1])
    if op == "Not":
        return ~x.bool()
    if op == "Cast":
        return cast(x, a["to"])
    if op == "Slice":
        return slice_(x, ints(ins[1]), ints(ins[2]), ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None,
                      ints(ins[4]) if len(ins) > 4 and ins[4] is not None else None)
    if op == "Reshape":
        return reshape(x, ints(ins[1]), a.get("allowzero", 0))
    if op == "Transpose":
        return x.permute(*(a.get("perm") or list(reversed(range(x.dim())))))
    if op == "Split":
        ax = a.get("axis", 0)
        sizes = list(a["split"]) if "split" in a else ints(ins[1]) if len(ins) > 1 and ins[1] is not None else None
        if sizes is None:
            sizes = [x.shape[ax] // len(node.output)] * len(node.output)
        return list(torch.split(x, sizes, dim=ax))
    if op == "Gather":
        return gather(x, ins[1], a.get("axis", 0))
    if op == "Dropout":
        training = len(ins) > 2 and ins[2] is not None and bool(ins[2].item())
        if not training:
            return [x, torch.ones_like(x, dtype=torch.bool)]
        p = float(ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("ratio", 0.5)
        name = node.name or node.output[0]
        if name not in masks:
            raise KeyError(f"no dropout mask for node {name!r}")
        m = masks[name].to(FLOAT).reshape(x.shape)
        return [x * m / (1.0 - p), masks[name].bool()]
    if op == "Shape":
        s = list(x.shape)
        return torch.tensor(s[a.get("start", 0):a.get("end", len(s))], dtype=torch.int64)
    if op == "Size":
        return torch.tensor(x.numel(), dtype=torch.int64)
    if op == "Unsqueeze":
        axes = sorted(ax % (x.dim() + len(axes_of(node, a, ins, 1))) for ax in axes_of(node, a, ins, 1))
        for ax in axes:
            x = x.unsqueeze(ax)
        return x
    if op == "Squeeze":
        axes = axes_of(node, a, ins, 1)
        if axes is None:
            return x.squeeze()
        for ax in sorted((ax % x.dim() for ax in axes), reverse=True):
            x = x.squeeze(ax)
        return x
    if op == "Concat":
        return torch.cat(ins, dim=a["axis"])
    if op == "Expand":
        shape = torch.broadcast_shapes(tuple(x.shape), tuple(ints(ins[1])))
        return x.expand(shape)
    if op == "LSTM":  # forward, ONNX's gate order (i, o, f, c), default activations
        if a.get("direction", b"forward") not in (b"forward", "forward") or "clip" in a or a.get("layout", 0):
            raise NotImplementedError("LSTM other than forward, unclipped, layout 0")
        w, r = ins[1][0], ins[2][0]
        hidden = int(a["hidden_size"])
        b = ins[3][0] if len(ins) > 3 and ins[3] is not None else torch.zeros(8 * hidden, dtype=x.dtype)
        h = ins[5][0] if len(ins) > 5 and ins[5] is not None else torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        c = ins[6][0] if len(ins) > 6 and ins[6] is not None else torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        ys = []
        for t in range(x.shape[0]):
            gates = x[t] @ w.T + h @ r.T + b[:4 * hidden] + b[4 * hidden:]
            i, o, f, g = gates.split(hidden, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            ys.append(h)
        return torch.stack(ys).unsqueeze(1), h.unsqueeze(0), c.unsqueeze(0)
    if op == "GRU":  # forward, ONNX's gate order (z, r, h), linear_before_reset (as torch exports), default activations
        if a.get("direction", b"forward") not in (b"forward", "forward") or "clip" in a or a.get("layout", 0) or \
                a.get("linear_before_reset", 0) != 1:
            raise NotImplementedError("GRU other than forward, unclipped, layout 0, linear_before_reset")
        w, r = ins[1][0], ins[2][0]
        hidden = int(a["hidden_size"])
        b = ins[3][0] if len(ins) > 3 and ins[3] is not None else torch.zeros(6 * hidden, dtype=x.dtype)
        h = ins[5][0] if len(ins) > 5 and ins[5] is not None else torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        ys = []
        for t in range(x.shape[0]):
            xz, xr, xn = (x[t] @ w.T + b[:3 * hidden]).split(hidden, dim=1)
            hz, hr, hn = (h @ r.T + b[3 * hidden:]).split(hidden, dim=1)
            z, rg = torch.sigmoid(xz + hz), torch.sigmoid(xr + hr)
            n = torch.tanh(xn + rg * hn)
            h = (1 - z) * n + z * h
            ys.append(h)
        return torch.stack(ys).unsqueeze(1), h.unsqueeze(0)
    if op == "Pad":  # ONNX pads: every axis's begin, then every axis's end; F.pad: last axis first
        pads = ints(ins[1]) if len(ins) > 1 and ins[1] is not None else list(a.get("pads", []))
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        value = ins[2].item() if len(ins) > 2 and ins[2] is not None else 0.0
        r = len(pads) // 2
        torch_pads = [p for i in reversed(range(r)) for p in (pads[i], pads[r + i])]
        if mode == "constant":
            return F.pad(x, torch_pads, value=value)
        modes = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}
        if mode not in modes or r < 3 or any(torch_pads[2 * (r - 2):]):
            raise NotImplementedError(f"Pad mode {mode} over {pads}")
        return F.pad(x, torch_pads[:2 * (r - 2)], mode=modes[mode])  # batch and channels unpadded
    if op == "Tile":
        return x.repeat(*ints(ins[1]))
    if op == "ConstantOfShape":
        v = to_torch(numpy_helper.to_array(a["value"])).reshape(()) if "value" in a else torch.tensor(0.0, dtype=FLOAT)
        return torch.full(ints(x), v.item(), dtype=v.dtype)
    if op == "Range":
        return torch.arange(x.item(), ins[1].item(), ins[2].item(), dtype=x.dtype)
    if op == "Trilu":
        k = int(ins[1].item()) if len(ins) > 1 and ins[1] is not None else 0
        return torch.triu(x, k) if a.get("upper", 1) else torch.tril(x, k)
    if op == "LayerNormalization":
        ax = a.get("axis", -1) % x.dim()
        y = F.layer_norm(x, tuple(x.shape[ax:]), ins[1], ins[2] if len(ins) > 2 else None, eps=a.get("epsilon", 1e-5))
        return y
    if op in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"):
        if len(ins) > 2 and ins[2] is not None:
            raise NotImplementedError(f"{op} with class weights")
        reduction = a.get("reduction", b"mean")
        reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
        kw = {"reduction": reduction}
        if "ignore_index" in a:
            kw["ignore_index"] = a["ignore_index"]
        if op == "SoftmaxCrossEntropyLoss":
            logp = torch.log_softmax(x, dim=1)
            return [F.nll_loss(logp, ins[1], **kw), logp]
        return F.nll_loss(x, ins[1], **kw)
    raise NotImplementedError(f"the reference cannot run ONNX {op} (node {node.name!r})")

