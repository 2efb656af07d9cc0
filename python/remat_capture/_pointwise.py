"""The pointwise family and the reductions (remat's Pointwise and Reduce
kinds, core/kernels/pointwise_fns.h): which aten op is which function, and
how its operands become the op's inputs (activations), its constant (a
buffer or a tensor computed from constants: its values; a parameter used as
it is: a learned constant with its current values) and its scalar.

What the op saves is still what autograd saved (_build.py's _attach_saves);
remat's rule for the function says the same for every op here, and `remat
run` refuses an op whose saved set leaves out what its backward reads.
"""
import torch

UNARY = {"neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "reciprocal",
         "abs": "abs", "sin": "sin", "cos": "cos", "erf": "erf", "hardswish": "hardswish",
         "hardsigmoid": "hardsigmoid", "mish": "mish"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum", "minimum": "minimum",
          "pow": "pow"}
REDUCE = {"sum": "sum", "mean": "mean", "amax": "amax"}


def _float(x):
    x = float(x)
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x


def _is_scalar(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class PointwiseMixin:
    """Handlers _op_<aten name> for the family; the Builder (_build.py) mixes them in."""

    def _param_name(self, t):
        """The module parameter `t` is, used as it is (the same elements in the
        same order; autocast's 16-bit copy of it too), or None."""
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            return None
        t = self._uncast(t) if t.is_contiguous() else t
        for name, p in self.params_by_name:
            if p.data_ptr() == t.data_ptr() and p.numel() == t.numel() and t.is_contiguous():
                return name
        return None

    def _constant_operand(self, t, sign=1.0):
        """A non-activation operand as Pointwise attributes, or None when remat
        cannot hold it: a tensor computed from parameters (its gradient would
        flow into them through ops remat does not record)."""
        if _is_scalar(t):
            return {"const_shape": [], "values": _float(sign * t)}
        if not isinstance(t, torch.Tensor) or t.dtype.is_complex:
            return None
        if id(t) in self.zeros:
            # Zero (W_hh·h at a GRU's first step, without biases); read as 0 here,
            # as the cell adds into it in place afterwards.
            return {"const_shape": [], "values": 0.0}
        if id(t) in self.param_pieces:
            # A slice of a parameter, broadcast over rows: a learned constant of
            # its own (its values the slice's); no module parameter is it whole.
            param, start, end = self.param_pieces[id(t)]
            if sign != 1.0:
                return None
            return {"const_shape": [end - start], "learned": True,
                    "values": [_float(x) for x in param.detach()[start:end].tolist()]}
        if t.requires_grad and id(t) in self.param_broadcast:
            t = self.param_broadcast[id(t)]  # a parameter broadcast (_build.py's _zero_product)
        shape = list(t.shape)
        if t.requires_grad:
            name = self._param_name(t)
            if name is None or sign != 1.0:
                return None
            return {"const_shape": shape, "learned": True,
                    "values": [_float(x) for x in t.detach().reshape(-1).tolist()], "_param": name}
        vals = t.detach().to(torch.float64).reshape(-1).tolist()
        return {"const_shape": shape, "values": [_float(sign * x) for x in vals]}

    def _pointwise(self, ev, fn, operands, extra=None):
        """operands: the function's operands in order, each an activation, a
        constant tensor or a Python number. At most one non-activation that is
        not last; a last one that is a number (or a 0-dim constant) is the scalar."""
        out = ev.outputs[0] if ev.outputs else None
        if not isinstance(out, torch.Tensor):
            return False
        op = {"kind": "Pointwise", "fn": fn}
        op.update(extra or {})
        inputs = []
        const = None
        for k, t in enumerate(operands):
            if self._act(t):
                inputs.append(self.rid[id(t)])
                continue
            last = k == len(operands) - 1
            number = _is_scalar(t) or (isinstance(t, torch.Tensor) and t.dim() == 0 and not t.requires_grad)
            if last and number and k > 0:
                op["scalar"] = _float(t.item() if isinstance(t, torch.Tensor) else t)
                continue
            if const is not None:
                return False
            const = self._constant_operand(t)
            if const is None:
                return False
            op["const_at"] = k
        if not inputs:
            return False
        param = None
        if const is not None:
            param = const.pop("_param", None)
            op.update(const)
        self._new(op, inputs, out, view=False, event=ev, label=self._label(ev, fn))
        if param is not None:
            self.ops[-1]["_params"] = [(0, param)]
        return True

    # ---- unary ------------------------------------------------------------------

    def _unary(self, ev):
        if not self._one_act(ev):
            return False
        return self._pointwise(ev, UNARY[ev.name.rstrip("_")], [ev.args[0]])

    _op_neg = _op_exp = _op_log = _op_sqrt = _op_rsqrt = _op_reciprocal = _op_abs = _unary
    _op_sin = _op_cos = _op_erf = _op_hardswish = _op_hardsigmoid = _op_mish = _unary

    def _op_leaky_relu(self, ev):
        if not self._one_act(ev):
            return False
        slope = ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("negative_slope", 0.01)
        return self._pointwise(ev, "leaky_relu", [ev.args[0]], {"alpha": _float(slope)})

    def _op_elu(self, ev):
        a = list(ev.args) + [None] * 3
        alpha, scale, input_scale = (a[1] if a[1] is not None else 1.0), (a[2] if a[2] is not None else 1.0), \
            (a[3] if a[3] is not None else 1.0)
        if not self._one_act(ev) or scale != 1 or input_scale != 1:
            return False
        return self._pointwise(ev, "elu", [ev.args[0]], {"alpha": _float(alpha)})

    def _op_softplus(self, ev):
        a = list(ev.args) + [None] * 2
        beta = a[1] if a[1] is not None else ev.kwargs.get("beta", 1)
        threshold = a[2] if a[2] is not None else ev.kwargs.get("threshold", 20)
        if not self._one_act(ev):
            return False
        return self._pointwise(ev, "softplus", [ev.args[0]], {"alpha": _float(beta), "beta": _float(threshold)})

    def _clamp(self, ev, lo, hi):
        if not self._one_act(ev) or isinstance(lo, torch.Tensor) or isinstance(hi, torch.Tensor):
            return False
        return self._pointwise(ev, "clamp", [ev.args[0]], {"alpha": _float(lo if lo is not None else float("-inf")),
                                                            "beta": _float(hi if hi is not None else float("inf"))})

    def _op_clamp(self, ev):
        a = list(ev.args) + [None] * 2
        return self._clamp(ev, a[1] if a[1] is not None else ev.kwargs.get("min"),
                           a[2] if a[2] is not None else ev.kwargs.get("max"))

    def _op_clamp_min(self, ev):
        return self._clamp(ev, ev.args[1], None)

    def _op_clamp_max(self, ev):
        return self._clamp(ev, None, ev.args[1])

    def _op_hardtanh(self, ev):  # ReLU6 is hardtanh(0, 6)
        a = list(ev.args) + [None] * 2
        return self._clamp(ev, a[1] if a[1] is not None else -1.0, a[2] if a[2] is not None else 1.0)

    def _op__to_copy(self, ev):
        x = ev.args[0]
        if not self._one_act(ev) or not x.dtype.is_floating_point or not ev.outputs[0].dtype.is_floating_point:
            return False
        return self._pointwise(ev, "cast", [x])

    # ---- binary and where --------------------------------------------------------

    def _pointwise_binary(self, ev):
        name = ev.name.rstrip("_")
        if name not in BINARY or len(ev.args) < 2:
            return False
        a, b = ev.args[0], ev.args[1]
        alpha = ev.kwargs.get("alpha", ev.args[2] if len(ev.args) > 2 else 1)
        if alpha != 1:
            return False
        return self._pointwise(ev, BINARY[name], [a, b])

    _op_maximum = _op_minimum = _op_pow = _pointwise_binary

    def _op_rsub(self, ev):  # rsub(x, c) = c - x
        a = list(ev.args) + [None]
        if a[2] not in (None, 1) or not self._act(ev.args[0]):
            return False
        return self._pointwise(ev, "sub", [ev.args[1], ev.args[0]])

    def _op_where(self, ev):
        if len(ev.args) != 3:
            return False
        cond, a, b = ev.args
        if self._act(cond):
            return False
        return self._pointwise(ev, "where", [cond.to(torch.float32) if isinstance(cond, torch.Tensor) else cond, a, b])

    # ---- reductions ----------------------------------------------------------------

    def _reduce(self, ev, fn):
        x = ev.args[0]
        if not self._one_act(ev) or ev.kwargs.get("dtype") is not None:
            return False
        a = list(ev.args) + [None] * 3
        dims = a[1] if a[1] is not None else ev.kwargs.get("dim")
        keepdim = a[2] if a[2] is not None else ev.kwargs.get("keepdim", False)
        if isinstance(dims, int):
            dims = [dims]
        if dims is None or len(dims) == 0:
            dims = list(range(x.dim()))
        return self._pointwise_reduce(ev, fn, [int(d) % max(1, x.dim()) for d in dims], bool(keepdim))

    def _pointwise_reduce(self, ev, fn, axes, keepdim):
        self._new({"kind": "Reduce", "fn": fn, "axes": sorted(set(axes)), "keepdim": keepdim},
                  [self.rid[id(ev.args[0])]], ev.outputs[0], view=False, event=ev, label=self._label(ev, fn))
        return True

    def _op_sum(self, ev):
        return self._reduce(ev, "sum")

    def _op_amax(self, ev):
        return self._reduce(ev, "amax")
