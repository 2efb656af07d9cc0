"""From a Recording (_trace.py) to the project's JSON model format
(docs/model-format.md): one op per aten op that computes on activations,
views as views, and per op the tensors its autograd node saved.

An *activation* is the example input or anything an op computes from one.
Parameters, buffers and what is computed from them alone (a transposed
weight, a position embedding, a dropout's random noise) are constants: not
ops, and their bytes are the baseline.

What each op saves is what autograd saved, never a rule: a saved tensor that
is one of the op's (remat-level) inputs or its output goes into `saved`;
anything else that is not a parameter, buffer or loss target (normalisation
statistics, pooling indices, dropout noise, a log-softmax kept inside a fused
cross-entropy, a fused attention's logsumexp, 0-dim scalars, the ids of a
position embedding) is private to
the op and counted in `aux_bytes`. Each storage is counted once, as PyTorch's
own count over unique storages does. So remat's saved_bytes of the file equals
PyTorch's count exactly.
"""
import torch

from ._pad import PadMixin
from ._pointwise import PointwiseMixin
from ._rnn import RnnMixin
from ._trace import storage_key, storage_nbytes

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64"}
# remat has no dtype for these: the nearest is written with the exact bytes.
NEAREST = {torch.float64: "i64", torch.bool: "i32", torch.uint8: "i32", torch.int8: "i32", torch.int16: "i32"}

VIEW_RESHAPES = {"view", "_unsafe_view", "_reshape_alias", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze",
                 "view_as", "reshape_as"}
ALIASES = {"detach", "alias", "lift_fresh", "lift_fresh_copy", "contiguous"}
# Take an activation only for its shape, dtype or device: their results are constants.
FACTORY_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
                "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "empty_strided", "size",
                "sym_size", "stride", "sym_stride", "is_same_size", "_local_scalar_dense"}
LOSS_OPS = {"mse_loss", "nll_loss_forward", "nll_loss2d_forward", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
            "soft_margin_loss", "cross_entropy_loss"}
LOSS_KINDS = ("MSELoss", "SoftmaxCELoss", "BCEWithLogitsLoss")  # remat's losses: the step's last op
# F.cross_entropy with label_smoothing > 0 and no class weights: ATen's
# cross_entropy_loss_label_smoothing, the aten ops recorded after its
# _log_softmax. nll = nll_loss(logp, y); smooth = -logp.sum(1), zero where y
# is ignore_index; loss = (1 - eps)·nll + mean(smooth)·eps/classes.
SMOOTHED_CE = (
    # PyTorch 1.13: smooth.index_put_({y == ignore}, 0); smooth.masked_select(y != ignore).mean()
    ("nll_loss_forward", "sum", "neg", "eq", "index_put_", "bitwise_not", "masked_select", "mean", "mul", "mul", "add"),
    # 2.x: smooth.masked_fill_(y == ignore, 0); smooth.sum() / (y != ignore).sum()
    ("nll_loss_forward", "sum", "neg", "eq", "masked_fill_", "bitwise_not", "sum", "sum", "div", "mul", "mul", "add"),
)
ACTIVATIONS = {"relu": "ReLU", "relu_": "ReLU", "tanh": "Tanh", "tanh_": "Tanh", "sigmoid": "Sigmoid",
               "sigmoid_": "Sigmoid", "silu": "SiLU", "silu_": "SiLU"}
# The names `remat run --dump` gives an op's parameter tensors, slot by slot
# (core/exec/op_exec.cpp's ParamSpecs).
PARAM_NAMES = {"Linear": ["weight", "bias"], "Conv": ["weight", "bias"], "BatchNorm": ["gamma", "beta"],
               "GroupNorm": ["gamma", "beta"],
               "LayerNorm": ["gamma", "beta"], "Embedding": ["weight"], "Pointwise": ["weight"],
               "AddConst": ["weight"], "ConvTranspose": ["weight", "bias"], "Concat": ["weight"]}
CONST_KINDS = {"add": "AddConst", "add_": "AddConst", "sub": "AddConst", "sub_": "AddConst", "mul": "MulConst",
               "mul_": "MulConst", "div": "DivConst", "div_": "DivConst"}


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _eps(eps):
    """A norm's epsilon as the attribute: written only when not PyTorch's default."""
    return {} if float(eps) == 1e-5 else {"eps": float(eps)}


def _affine(weight, bias):
    """A norm's affine attribute from its weight and bias arguments: {} with
    both, affine false with neither (elementwise_affine=False, affine=False),
    None with one alone (remat's norms have both or none)."""
    if (weight is None) != (bias is None):
        return None
    return {} if weight is not None else {"affine": False}


def _ints(v, n):
    """An aten int[] argument (may be a single int or a 1-list) as n ints."""
    if isinstance(v, int):
        return [v] * n
    v = [int(x) for x in v]
    return v * n if len(v) == 1 else v



# What a Generic op carries: a kind's attributes (a Pointwise's fn, a Slice's
# bounds) would not load on it.
GENERIC_KEYS = {"id", "kind", "name", "inputs", "shape", "dtype", "bytes", "saved", "aux_bytes", "fwd_flops",
                "bwd_flops", "simulate_only", "comment", "torch"}


def _as_generic(op):
    """`op` (a Builder op dict) made a simulate-only Generic op, keeping its
    inputs, size, saves and internal fields ('_'-prefixed)."""
    for k in [k for k in op if not k.startswith("_") and k not in GENERIC_KEYS]:
        del op[k]
    op.update({"kind": "Generic", "simulate_only": True})
    op.setdefault("fwd_flops", 1)
    op.setdefault("bwd_flops", 1)


class Builder(PointwiseMixin, RnnMixin, PadMixin):
    def __init__(self, rec, module, example_input, targets):
        self.rec = rec
        self.ops = []             # remat ops (dicts); private keys start with "_"
        self.rid = {}             # id(tensor) -> remat op id of that alias
        self.noise = {}           # id(tensor) -> keep probability of a dropout's noise
        # id(tensor) -> the parameter it is, broadcast: addmm(bias, zeros, W), an
        # LSTM's first step (its zero initial state times W_hh, plus b_hh).
        self.param_broadcast = {}
        self.zeros = set()        # id(tensor) -> zero, and no gradient reaches a parameter through it (_zero_times_weight)
        self.param_pieces = {}    # id(tensor) -> (parameter, start, end): a slice of one of those (_broadcast_pieces)
        self.event_op = {}        # OpEvent index -> remat op id
        self.fused_into = {}      # OpEvent index -> the OpEvent index whose op it is part of
        self.smoothed = {}        # OpEvent index of a smoothed cross-entropy's last add -> (its events, eps)
        self.pad_skip = set()     # OpEvent indices of a composed circular pad but its last (_pad.py)
        self.pad_at = {}          # OpEvent index of that last copy_ -> (x, buffer, pads)
        self.rnn_layers = {}      # OpEvent index of an mkldnn_rnn_layer -> how its saves map (_rnn.py)
        self.rnn_keep = []        # tensors standing for values of those layers' ops (_rnn.py)
        self.owner = {}           # storage key -> remat op id owning it (the latest writer)
        self.op_storage = {}      # remat op id -> storage key of its output (ops that own bytes)
        self.storage_bytes = {}   # storage key -> its bytes
        self.notes = []
        self.excluded = {storage_key(t) for t in list(module.parameters()) + list(module.buffers())}
        self.params_by_name = list(module.named_parameters())
        self.weight_casts = set()  # storages of autocast's casts of weights (_constant)
        # data_ptr of such a cast -> the parameter it is a copy of: an op that
        # reads the cast holds that parameter (its gradient reaches it through
        # the cast), for the parameter map and a bias broadcast (_zero_product).
        self.cast_of = {}
        # Which module parameter fills which remat parameter tensor ("op.slot"),
        # for checks that run the module on remat's weights (filled by _finish).
        self.parameters = []
        self.targets = {storage_key(t) for t in targets}
        # What a loss compares against (its arguments after the first that are
        # not activations): baseline like the parameters, in the file and in
        # PyTorch's count alike. Filled by build().
        self.loss_targets = set()
        self.names = {}
        x = example_input
        self._new({"kind": "Input", "name": "x", "shape": list(x.shape), "dtype": self._dtype(x)}, [], x,
                  view=False)

    # ---- helpers --------------------------------------------------------------

    def _dtype(self, t):
        if t.dtype in DTYPES:
            return DTYPES[t.dtype]
        return NEAREST.get(t.dtype, "f32")

    def _unique_name(self, base):
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}.{n}"

    def _new(self, op, inputs, out, view, event=None, label=None):
        """Appends a remat op producing `out` (a view owns no bytes)."""
        op = dict(op)
        op["id"] = len(self.ops)
        op["inputs"] = inputs
        if label is not None:
            op["name"] = self._unique_name(label)
        op.setdefault("_saved", [])
        op["_aux"] = 0
        op["_view"] = view
        if out is not None and "shape" not in op and op["kind"] not in LOSS_KINDS:
            op["shape"] = list(out.shape) or [1]
        if out is not None and out.dtype not in DTYPES and not view and op["kind"] not in LOSS_KINDS:
            op["bytes"] = max(1, out.numel() * out.element_size())
            op["comment"] = f"{out.dtype} written as {self._dtype(out)} with its exact bytes"
        if out is not None and op["kind"] not in LOSS_KINDS and "dtype" not in op and not view:
            op["dtype"] = self._dtype(out)
        self.ops.append(op)
        if out is not None:
            self.rid[id(out)] = op["id"]
            if not view:
                self.owner[storage_key(out)] = op["id"]
                self.op_storage[op["id"]] = (storage_key(out), (out.storage_offset(), tuple(out.shape),
                                                                tuple(out.stride()), out.element_size()))
                self.storage_bytes[storage_key(out)] = storage_nbytes(out)
        if event is not None:
            self.event_op[event.index] = op["id"]
            op["_event"] = event.index
        return op["id"]

    def _label(self, ev, what):
        return f"{ev.module}.{what}" if ev.module else what

    def _act(self, t):
        return isinstance(t, torch.Tensor) and id(t) in self.rid

    # ---- the pass over the recorded ops ----------------------------------------

    def build(self, loss):
        self._plan_fusions()
        self._plan_circular_pads()
        for ev in self.rec.ops:
            if ev.index in self.fused_into or ev.index in self.pad_skip:
                continue
            if ev.index in self.pad_at and self._pad_composed(ev):
                continue
            acts = [(pos, t) for pos, t in ev.tensor_args() if self._act(t)]
            if ev.name in LOSS_OPS:
                self.loss_targets.update(storage_key(t) for pos, t in ev.tensor_args() if pos >= 1 and not self._act(t))
            if ev.index in self.smoothed and self._op_smoothed_ce(ev):
                continue  # the whole of cross_entropy_loss_label_smoothing, one SoftmaxCELoss
            if ev.index in self.fused_into.values() and ev.index not in self.smoothed and self._op_nll_loss_forward(ev):
                continue  # its input, the log-softmax, was folded into it
            if not acts or ev.name in FACTORY_LIKE:
                self._constant(ev)
                continue
            if ev.name in ALIASES and ev.outputs:
                self.rid[id(ev.outputs[0])] = self.rid[id(acts[0][1])]
                continue
            handler = getattr(self, "_op_" + ev.name.rstrip("_"), None)
            if handler is None or not handler(ev):
                self._generic(ev)
        if not self._act(loss):
            raise ValueError("the loss does not depend on the example input")
        return self._finish(self.rid[id(loss)])

    def _plan_fusions(self):
        """log_softmax whose only reader is nll_loss: one SoftmaxCELoss. With
        label smoothing, the log_softmax and the ops after it that make up
        the smoothed loss (SMOOTHED_CE): one SoftmaxCELoss with its eps."""
        readers = {}
        for ev in self.rec.ops:
            for _, t in ev.tensor_args():
                readers.setdefault(id(t), []).append(ev)
        for ev in self.rec.ops:
            if ev.name != "_log_softmax" or not ev.outputs:
                continue
            r = readers.get(id(ev.outputs[0]), [])
            if not (ev.outputs[0].dim() == 2 and ev.args[1] in (1, -1)):
                continue
            if len(r) == 1 and r[0].name == "nll_loss_forward":
                self.fused_into[ev.index] = r[0].index
                continue
            smoothed = self._smoothed_ce_after(ev, r)
            if smoothed is not None:
                events, eps = smoothed
                last = events[-1].index
                self.smoothed[last] = (events, eps)
                for e in events[:-1]:
                    self.fused_into[e.index] = last

    def _smoothed_ce_after(self, ls, logp_readers):
        """([events from ls to the final add], eps) when the ops after the
        _log_softmax `ls` are one of SMOOTHED_CE's sequences, mean reduction
        and no class weights, with eps read back from the two scalar
        multiplies; else None."""
        logp = ls.outputs[0]
        for names in SMOOTHED_CE:
            events = self.rec.ops[ls.index + 1:ls.index + 1 + len(names)]
            if [e.name for e in events] != list(names):
                continue
            nll, rowsum, add = events[0], events[1], events[-1]
            if nll.args[0] is not logp or rowsum.args[0] is not logp or {id(e) for e in logp_readers} != {id(nll), id(rowsum)}:
                continue
            if len(nll.args) < 4 or nll.args[2] is not None or nll.args[3] != 1 or list(rowsum.args[1]) not in ([1], [-1]):
                continue
            muls = events[-3:-1]
            hit = [m for m in muls if m.args[0] is nll.outputs[0]]
            spread = [m for m in muls if m.args[0] is not nll.outputs[0]]
            if len(hit) != 1 or len(spread) != 1 or not all(isinstance(m.args[1], float) for m in muls):
                continue
            if {id(a) for a in add.args[:2]} != {id(hit[0].outputs[0]), id(spread[0].outputs[0])}:
                continue
            eps = _smoothing(float(hit[0].args[1]), float(spread[0].args[1]), int(logp.shape[1]))
            if eps is not None:
                return [ls] + events, eps
        return None

    def _constant(self, ev):
        if ev.name == "_to_copy" and ev.outputs and ev.args and isinstance(ev.args[0], torch.Tensor) and \
                storage_key(ev.args[0]) in self.excluded:
            # torch.autocast's cast of a weight (or buffer): baseline, as the
            # weight is (remat charges a bf16 op's weights in its dtype).
            self.excluded.add(storage_key(ev.outputs[0]))
            self.weight_casts.add(storage_key(ev.outputs[0]))
            if ev.args[0].requires_grad:
                self.cast_of[ev.outputs[0].data_ptr()] = ev.args[0]
        elif ev.name == "addmm" and ev.outputs and len(ev.args) >= 3 and self._zero_product(ev):
            self.param_broadcast[id(ev.outputs[0])] = self._uncast(ev.args[0])
        elif ev.name == "mm" and ev.outputs and len(ev.args) == 2 and self._zero_times_weight(ev):
            self.zeros.add(id(ev.outputs[0]))
        elif ev.name in ("unsafe_split", "split", "split_with_sizes", "unsafe_split_with_sizes") and ev.args and \
                id(ev.args[0]) in self.zeros:
            self.zeros.update(id(o) for o in ev.outputs)
        elif ev.name in ("unsafe_split", "split", "split_with_sizes", "unsafe_split_with_sizes") and ev.args and \
                id(ev.args[0]) in self.param_broadcast and ev.args[0].dim() == 2:
            self._broadcast_pieces(ev)
        elif ev.name == "bernoulli_" and ev.outputs and isinstance(_keep(ev), float):
            self.noise[id(ev.outputs[0])] = _keep(ev)  # bernoulli_(noise, keep probability)
        elif ev.name == "div_" and ev.outputs and id(ev.args[0]) in self.noise:
            pass  # noise /= keep: still the noise

    def _zero_times_weight(self, ev):
        """mm(m, W) with m all zeros and no gradient, W a parameter (its view): zero,
        and W's gradient from it mᵀ·dy = 0 (a GRU without biases, at its first step)."""
        m, w = ev.args
        return isinstance(m, torch.Tensor) and isinstance(w, torch.Tensor) and not m.requires_grad and \
            w.requires_grad and storage_key(w) in self.excluded and bool((m == 0).all())

    def _broadcast_pieces(self, ev):
        """The pieces along the last axis of a parameter broadcast (1.13's GRU
        splits W_hh·h + b_hh in three before adding the input's gates, and at its
        first step h is zero): each piece is the parameter's slice, broadcast,
        kept as (parameter, start, end) for _constant_operand. Its values are
        read from the parameter, not the piece, as the cell adds into the piece
        in place afterwards."""
        dim = (ev.args[2] if len(ev.args) > 2 else ev.kwargs.get("dim", 0)) % 2
        if dim != 1:
            return
        start = 0
        for out in ev.outputs:
            n = int(out.shape[1])
            self.param_pieces[id(out)] = (self.param_broadcast[id(ev.args[0])], start, start + n)
            start += n

    def _zero_product(self, ev):
        """addmm(bias, m, W) with m all zeros and no gradient, bias a parameter:
        its value is the bias broadcast over m's rows, and its gradient reaches
        the bias alone (W's is mᵀ·dy = 0), so it is that parameter, broadcast."""
        bias, m = ev.args[0], ev.args[1]
        if ev.kwargs.get("beta", 1) != 1 or ev.kwargs.get("alpha", 1) != 1:
            return False
        if not isinstance(m, torch.Tensor) or m.requires_grad or not isinstance(bias, torch.Tensor):
            return False
        return self._param_name(bias) is not None and bias.dim() == 1 and bool((m == 0).all())

    def _uncast(self, t):
        """The parameter t is autocast's 16-bit copy of (or a view of that copy, the
        same elements), else t."""
        if not isinstance(t, torch.Tensor):
            return t
        p = self.cast_of.get(t.data_ptr())
        return p if p is not None and p.numel() == t.numel() else t

    def _generic(self, ev):
        outs = [o for o in ev.outputs if isinstance(o, torch.Tensor)]
        inputs = list(dict.fromkeys(self._inputs(ev)))  # Generic: each input once
        out = outs[0] if outs else None
        if out is None:
            return
        shares = any(storage_key(out) == storage_key(t) for _, t in ev.tensor_args() if self._act(t))
        if shares and ev.name not in VIEW_RESHAPES and not ev.name.endswith("_"):
            self.notes.append(f"{ev.name}: a view remat has no kind for; written as a copy")
        fwd, bwd = _flops(ev, out)
        op = {"kind": "Generic", "fwd_flops": fwd, "bwd_flops": bwd, "simulate_only": True,
              "comment": f"aten.{ev.name}"}
        self._new(op, inputs, out, view=False, event=ev, label=self._label(ev, ev.name.rstrip("_")))
        # Further differentiable outputs read later get ops of their own.
        for extra in outs[1:]:
            if extra.requires_grad:
                self._new({"kind": "Generic", "fwd_flops": 1, "bwd_flops": 1, "simulate_only": True,
                           "comment": f"aten.{ev.name}, another output"}, inputs, extra, view=False,
                          label=self._label(ev, ev.name.rstrip("_")))
                self.ops[-1]["_saved_explicit_empty"] = True

    def _inputs(self, ev):
        ids = []
        for _, t in ev.tensor_args():
            if self._act(t):
                ids.append(self.rid[id(t)])
        return ids

    # ---- kinds -----------------------------------------------------------------

    def _simple(self, ev, kind, extra=None, inputs=None):
        out = ev.outputs[0]
        op = {"kind": kind}
        op.update(extra or {})
        self._new(op, inputs if inputs is not None else self._inputs(ev)[:1], out, view=False, event=ev,
                  label=self._label(ev, kind.lower()))
        return True

    def _note_params(self, *tensors):
        """The module parameters the op just added holds, slot by slot (None: no such slot).
        Under torch.autocast a Linear reads the weight's cast (or a view of it,
        the same elements): the weight it was cast from."""
        slots = []
        for slot, t in enumerate(tensors):
            if t is None:
                continue
            t = self._uncast(t)
            name = next((n for n, p in self.params_by_name
                         if isinstance(t, torch.Tensor) and p.data_ptr() == t.data_ptr() and p.numel() == t.numel()), None)
            if name is not None:
                slots.append((slot, name))
        self.ops[-1]["_params"] = slots

    def _one_act(self, ev, pos=0):
        """The op reads one activation, at argument position `pos`."""
        acts = [(p, t) for p, t in ev.tensor_args() if self._act(t)]
        return len(acts) == 1 and acts[0][0] == pos

    def _op_relu(self, ev):
        # The activation kinds read a dense input; a strided one (a transposed
        # view) goes through the pointwise family, which reads any strides.
        if self._one_act(ev) and not ev.args[0].is_contiguous():
            return self._pointwise(ev, ACTIVATIONS[ev.name].lower(), [ev.args[0]])
        return self._one_act(ev) and self._simple(ev, ACTIVATIONS[ev.name])

    _op_tanh = _op_sigmoid = _op_silu = _op_relu

    def _op_gelu(self, ev):
        if not self._one_act(ev) or ev.kwargs.get("approximate", ev.args[1] if len(ev.args) > 1 else "none") != "none":
            return False
        if not ev.args[0].is_contiguous():
            return self._pointwise(ev, "gelu", [ev.args[0]])
        return self._simple(ev, "GELU")

    def _op_addmm(self, ev):
        # Linear: addmm(bias, x, W^T) with a constant weight, x (rows, in).
        bias, x, w = ev.args[0], ev.args[1], ev.args[2]
        if not (self._one_act(ev, 1) and x.dim() == 2 and ev.kwargs.get("beta", 1) == 1 and ev.kwargs.get("alpha", 1) == 1):
            return False
        if bias.dim() != 1 or bias.shape[0] != w.shape[1]:
            return False
        self._simple(ev, "Linear", inputs=[self.rid[id(x)]])
        self._note_params(w, bias)
        return True

    def _op_mm(self, ev):
        a, b = ev.args[0], ev.args[1]
        if self._act(a) and self._act(b):
            return self._simple(ev, "MatMul", inputs=[self.rid[id(a)], self.rid[id(b)]])
        if self._one_act(ev, 0):
            self._simple(ev, "Linear", {"bias": False}, inputs=[self.rid[id(a)]])
            self._note_params(b)
            return True
        return False

    def _op_bmm(self, ev):
        a, b = ev.args[0], ev.args[1]
        if self._act(a) and self._act(b):
            return self._simple(ev, "MatMul", inputs=[self.rid[id(a)], self.rid[id(b)]])
        return False

    def _op_convolution(self, ev):
        x, w, b, stride, padding, dilation, transposed, output_padding, groups = ev.args[:9]
        if not self._one_act(ev) or x.dim() not in (3, 4):
            return False
        sp = x.dim() - 2
        pads = _ints(padding, sp)
        attrs = {"kernel": [int(k) for k in w.shape[2:]], "stride": _ints(stride, sp), "pads": pads + pads,
                 "dilation": _ints(dilation, sp), "groups": int(groups), "bias": b is not None}
        if transposed:  # nn.ConvTranspose1d/2d: weight (C, out/groups, kernel...)
            attrs.update({"channels": int(w.shape[1]) * int(groups), "output_padding": _ints(output_padding, sp)})
            self._simple(ev, "ConvTranspose", attrs)
        else:
            attrs["channels"] = int(w.shape[0])
            self._simple(ev, "Conv", attrs)
        self._note_params(w, b)
        return True

    def _op_native_group_norm(self, ev):
        # (input, weight, bias, N, C, HxW, group, eps)
        affine = _affine(ev.args[1], ev.args[2])
        if not self._one_act(ev) or affine is None:
            return False
        self._simple(ev, "GroupNorm", dict({"groups": int(ev.args[6])}, **_eps(ev.args[7]), **affine))
        self._note_params(ev.args[1], ev.args[2])
        return True

    def _upsample(self, ev, bilinear, align_corners=False):
        if not self._one_act(ev) or ev.args[0].dim() not in (3, 4):
            return False
        extra = {"mode": "bilinear" if bilinear else "nearest"}
        if align_corners:
            extra["align_corners"] = True
        return self._simple(ev, "Upsample", extra)

    def _op_upsample_nearest2d(self, ev):
        return self._upsample(ev, False)

    _op_upsample_nearest1d = _op_upsample_nearest2d

    def _op_upsample_bilinear2d(self, ev):
        # (input, output_size, align_corners, scales...)
        return self._upsample(ev, True, bool(ev.args[2]) if len(ev.args) > 2 else False)

    _op_upsample_linear1d = _op_upsample_bilinear2d

    def _op_native_batch_norm(self, ev):
        # (input, weight, bias, running_mean, running_var, training, momentum, eps)
        affine = _affine(ev.args[1], ev.args[2])
        if not self._one_act(ev) or not ev.args[5] or affine is None:  # training
            return False
        self._simple(ev, "BatchNorm", dict(_eps(ev.args[7] if len(ev.args) > 7 else 1e-5), **affine))
        self._note_params(ev.args[1], ev.args[2])
        return True

    _op__native_batch_norm_legit = _op_native_batch_norm

    def _op_native_layer_norm(self, ev):
        x, shape = ev.args[0], ev.args[1]
        if not self._one_act(ev) or len(shape) != 1 or int(shape[0]) != x.shape[-1]:
            return False
        affine = _affine(ev.args[2], ev.args[3])
        if affine is None:
            return False
        self._simple(ev, "LayerNorm", dict(_eps(ev.args[4] if len(ev.args) > 4 else 1e-5), **affine))
        self._note_params(ev.args[2], ev.args[3])
        return True

    def _op_max_pool2d_with_indices(self, ev):
        x = ev.args[0]
        a = list(ev.args) + [None] * 6
        kernel = _ints(a[1], 2)
        stride = _ints(a[2], 2) if a[2] else kernel
        pad = _ints(a[3] if a[3] is not None else 0, 2)
        dil = _ints(a[4] if a[4] is not None else 1, 2)
        if not self._one_act(ev) or x.dim() != 4:
            return False
        return self._simple(ev, "MaxPool", {"kernel": kernel, "stride": stride, "pads": pad + pad, "dilation": dil,
                                            "ceil_mode": bool(a[5])})

    def _op_avg_pool2d(self, ev):
        x = ev.args[0]
        a = list(ev.args) + [None] * 7
        kernel = _ints(a[1], 2)
        stride = _ints(a[2], 2) if a[2] else kernel
        pad = _ints(a[3] if a[3] is not None else 0, 2)
        if not self._one_act(ev) or x.dim() != 4 or a[6] is not None:  # divisor_override: Generic
            return False
        attrs = {"kernel": kernel, "stride": stride, "pads": pad + pad, "ceil_mode": bool(a[4])}
        if a[5] is not None and not a[5]:
            attrs["count_include_pad"] = False
        return self._simple(ev, "AvgPool", attrs)

    def _op_mean(self, ev):
        # Global average pooling: mean over every spatial dim, keepdim.
        x = ev.args[0]
        if not self._one_act(ev):
            return False
        if x.dim() < 3 or len(ev.args) < 3 or not ev.args[2] or ev.kwargs.get("dtype") is not None:
            return self._reduce(ev, "mean")
        dims = sorted(d % x.dim() for d in ev.args[1])
        if dims != list(range(2, x.dim())):
            return self._reduce(ev, "mean")
        return self._simple(ev, "GlobalAvgPool")

    def _op__adaptive_avg_pool2d(self, ev):
        # To 1x1 a global mean (PyTorch calls mean for it, but a capture may
        # see this op); to any other size an adaptive AvgPool.
        if not self._one_act(ev) or ev.args[0].dim() != 4:
            return False
        size = [int(s) for s in ev.outputs[0].shape[2:]]
        if size == [1, 1]:
            return self._simple(ev, "GlobalAvgPool")
        return self._simple(ev, "AvgPool", {"output_size": size})

    def _op__softmax(self, ev):
        return self._one_act(ev) and self._simple(ev, "Softmax", {"axis": int(ev.args[1])})

    def _op__safe_softmax(self, ev):
        """PyTorch 2.5+'s attention on its math path (F.scaled_dot_product_attention
        with dropout, nn.MultiheadAttention and nn.TransformerEncoder in training)
        calls _safe_softmax(scores, -1): softmax(scores), except that a row whose
        every element is -inf gives zeros where softmax gives NaN. Its node keeps
        the result and its backward is softmax's (_softmax_backward_data on the
        result), so on a row with one element above -inf the two agree bit for bit,
        forward and backward. remat's Softmax is the plain one: it is that op only
        when no row can be all -inf, which _finite_rows decides from how the scores
        were made; otherwise Generic."""
        a = list(ev.args) + [None] * 2
        if not self._one_act(ev) or a[2] is not None or ev.kwargs.get("dtype") is not None:
            return False
        x = ev.args[0]
        if x.dtype != torch.float32 or not self._finite_rows(self.rid[id(x)], int(a[1]) % x.dim(), x.dim()):
            self.notes.append("_safe_softmax: its scores may have a row that is all -inf (a mask), where it gives "
                              "zeros and remat's Softmax NaN; Generic")
            return False
        return self._simple(ev, "Softmax", {"axis": int(a[1])})

    def _finite_rows(self, u, axis, rank):
        """Whether no row of op u's output along `axis` can be all -inf: u is (through
        views) a product of two activations (q·kᵀ: finite, as every activation remat
        computes from finite inputs and weights is, short of float32 overflow in each
        element of a row), or such a product plus a constant mask (add_, AddConst, the
        family's add) none of whose rows along the axis is all -inf: every row then
        keeps a finite element. Anything else (an activation mask, masked_fill, an
        op remat cannot see through) is not known to be finite."""
        while self.ops[u]["_view"] and self.ops[u]["kind"] == "Reshape":
            u = self.ops[u]["inputs"][0]
        op = self.ops[u]
        if op["kind"] == "MatMul":
            return True
        adds = op["kind"] == "AddConst" or (op["kind"] == "Pointwise" and op.get("fn") == "add")
        if not adds or len(op["inputs"]) != 1 or op.get("learned") or "values" not in op:
            return False
        if not self._finite_rows(op["inputs"][0], axis, rank):
            return False
        vals = op["values"]
        if not isinstance(vals, list):
            vals = [vals]
        mask = torch.tensor([float("-inf") if v == "-inf" else float("inf") if v == "inf" else float(v) for v in vals],
                            dtype=torch.float64).reshape(op.get("const_shape") or [1])
        if mask.dim() > rank:
            return False
        mask = mask.reshape([1] * (rank - mask.dim()) + list(mask.shape))
        return not bool((mask == float("-inf")).all(dim=axis).any())

    def _op_masked_fill(self, ev):
        mask = ev.args[1]
        if not self._one_act(ev):
            return False
        extra = {"const_shape": list(mask.shape)} if mask.dim() > 0 else {}
        fill = ev.args[2] if len(ev.args) > 2 else None
        fill = fill.item() if isinstance(fill, torch.Tensor) and fill.dim() == 0 else fill
        if isinstance(fill, (int, float)) and fill == fill and not mask.requires_grad:  # not NaN
            extra["values"] = "causal" if _is_causal(mask) else _numbers(mask)
            extra["fill"] = _number(float(fill))
        return self._simple(ev, "MaskedFill", extra)

    def _op__scaled_dot_product_flash_attention_for_cpu(self, ev):
        # PyTorch 2.x's fused CPU attention (F.scaled_dot_product_attention
        # without dropout, with or without a mask): (query, key, value, dropout_p=0,
        # is_causal=False, *, attn_mask=None, scale=None) -> (output,
        # logsumexp). Its node keeps q, k, v, the output and the f32
        # logsumexp (aux: 4 bytes per output row), as remat's Attention.
        a = list(ev.args) + [None] * 5
        q, k, v = a[0], a[1], a[2]
        dropout = ev.kwargs.get("dropout_p", a[3] if a[3] is not None else 0.0)
        causal = ev.kwargs.get("is_causal", a[4] if a[4] is not None else False)
        mask = ev.kwargs.get("attn_mask", a[5])
        scale = ev.kwargs.get("scale", a[6])
        if not all(self._act(t) for t in (q, k, v)) or dropout != 0:
            return False
        # A mask arrives additive (PyTorch turns a boolean one into 0 and
        # -inf, in q's dtype): a constant of the op, its values; one computed
        # from activations or parameters stays Generic.
        if mask is not None and (self._act(mask) or mask.requires_grad or mask.dtype not in (torch.float32, q.dtype)):
            return False
        # f32, or a model in pure bf16/f16 (q, k, v in one 16-bit dtype; the
        # logsumexp stays f32, as remat's Attention keeps it).
        if any(t.dtype not in (torch.float32, torch.bfloat16, torch.float16) or t.dtype != q.dtype or
               t.dim() not in (3, 4) or t.dim() != q.dim() for t in (q, k, v)):
            return False
        if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or q.shape[-1] != k.shape[-1] \
                or k.shape[-2] != v.shape[-2]:
            return False
        extra = {"causal": bool(causal)}
        if scale is not None:
            extra["scale"] = float(scale)
        if mask is not None:
            extra.update({"const_shape": list(mask.shape), "values": _numbers(mask)})
        return self._simple(ev, "Attention", extra, inputs=[self.rid[id(t)] for t in (q, k, v)])

    def _op_as_strided(self, ev):
        """x.as_strided_(its own size, strides) that moves no element: the
        restride adaptive_avg_pool2d does on its (N, C, 1, 1) result to match
        a memory format, which changes only the strides of size-1
        dimensions. The tensor stays the op it was; any other as_strided is Generic."""
        x = ev.args[0]
        if ev.name != "as_strided_" or not self._act(x) or not ev.outputs or ev.outputs[0] is not x:
            return False
        u = self.rid[id(x)]
        size, strides = list(ev.args[1]), list(ev.args[2])
        offset = ev.args[3] if len(ev.args) > 3 and ev.args[3] is not None else 0
        if self.ops[u]["_view"] or size != self.ops[u]["shape"] or offset != 0:
            return False
        want = 1
        for d in range(len(size) - 1, -1, -1):
            if size[d] != 1 and strides[d] != want:
                return False
            want *= size[d]
        return True

    def _op_clone(self, ev):
        # A tensor of its own, as PyTorch's clone makes it: of an expanded
        # tensor (q @ k broadcast by matmul), every element the expansion repeats.
        if not self._one_act(ev):
            return False
        self._new({"kind": "Reshape", "shape": list(ev.outputs[0].shape) or [1], "copy": True},
                  [self.rid[id(ev.args[0])]], ev.outputs[0], view=False, event=ev, label=self._label(ev, "clone"))
        return True

    def _op_embedding(self, ev):
        w, ids = ev.args[0], ev.args[1]
        if not self._one_act(ev, 1):
            return False
        self._simple(ev, "Embedding", {"vocab": int(w.shape[0])}, inputs=[self.rid[id(ids)]])
        self._note_params(w)
        return True

    def _op_cat(self, ev):
        ts = ev.args[0]
        dim = int(ev.args[1]) if len(ev.args) > 1 else int(ev.kwargs.get("dim", 0))
        consts = [k for k, t in enumerate(ts) if not self._act(t)]
        extra = {"axis": dim}
        if consts:
            # One parameter, broadcast outside the axis (ViT's class token,
            # torch.cat([cls.expand(B, -1, -1), x], 1)): a learned piece. What
            # autograd keeps is unchanged (cat saves nothing).
            piece = self._param_piece(ts[consts[0]], dim) if len(consts) == 1 and len(ts) > 1 else None
            if piece is None:
                return False
            extra.update({"const_at": consts[0], "const_shape": piece, "learned": True})
        self._simple(ev, "Concat", extra, inputs=[self.rid[id(t)] for t in ts if self._act(t)])
        if consts:  # the parameter the piece broadcasts (the expand's base), for the parameter map
            t = ts[consts[0]]
            self._note_params(t._base if t._base is not None else t)
        return True

    def _op_topk(self, ev):
        """torch.topk(x, k, dim) (largest, sorted): the indices a TopK op, the
        values a Gather of x by them; the node keeps the indices, which the
        Gather then keeps (as remat's gather backward reads them). x may be
        16-bit (a router's logits under autocast): picking the largest compares
        the values exactly, in any dtype."""
        x = ev.args[0]
        a = list(ev.args) + [None] * 4
        k = int(a[1])
        dim = int(a[2] if a[2] is not None else ev.kwargs.get("dim", -1)) % max(1, x.dim())
        largest = a[3] if a[3] is not None else ev.kwargs.get("largest", True)
        sort = a[4] if a[4] is not None else ev.kwargs.get("sorted", True)
        if not self._one_act(ev) or not largest or not sort or len(ev.outputs) != 2 or \
                x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            return False
        values, indices = ev.outputs
        i = self._new({"kind": "TopK", "k": k, "axis": dim}, [self.rid[id(x)]], indices, view=False,
                      label=self._label(ev, "topk"))
        self.ops[i]["_event"] = ev.index  # made by the same aten op as the Gather below
        self._new({"kind": "Gather", "axis": dim}, [self.rid[id(x)], i], values, view=False, event=ev,
                  label=self._label(ev, "topk_values"))
        return True

    def _op_cumsum(self, ev):
        """torch.cumsum(x, dim) of a float32 x, or of a bf16/f16 one under autocast
        (PyTorch's CPU kernel sums in f32 and rounds each output, as remat's runs
        any 16-bit op): a Cumsum (autograd keeps nothing)."""
        x = ev.args[0]
        dim = ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("dim")
        dtype = ev.args[2] if len(ev.args) > 2 else ev.kwargs.get("dtype")
        if not self._one_act(ev) or dim is None or x.dtype not in (torch.float32, torch.bfloat16, torch.float16) or \
                dtype not in (None, x.dtype) or x.dim() == 0:
            return False
        return self._simple(ev, "Cumsum", {"axis": int(dim) % x.dim()})

    def _op_gather(self, ev):
        """torch.gather(x, dim, index) by indices the model computed (a TopK's)."""
        a = list(ev.args) + [None] * 3
        x, index = a[0], a[2]
        if not (self._act(x) and self._act(index)) or ev.kwargs.get("sparse_grad", False) or \
                (a[3] is not None and a[3]):
            return False
        dim = int(a[1]) % max(1, x.dim())
        return self._simple(ev, "Gather", {"axis": dim}, inputs=[self.rid[id(x)], self.rid[id(index)]])

    def _param_piece(self, t, dim):
        """The shape (at t's rank) of the parameter that t broadcasts, or None."""
        base = t._base if t._base is not None else t
        if storage_key(base) not in self.excluded or not base.requires_grad or base.dim() > t.dim():
            return None
        shape = [1] * (t.dim() - base.dim()) + list(base.shape)
        ax = dim % t.dim()
        if shape[ax] != t.shape[ax] or any(s not in (1, n) for s, n in zip(shape, t.shape)):
            return None
        return [int(s) for s in shape]

    def _binary(self, ev):
        """add/sub/mul/div: the kinds of old (Add of two equal shapes, Dropout,
        MulConst/DivConst/AddConst of a constant repeating over the input's last
        dimensions), else the pointwise family (_pointwise.py): a product of
        two activations, a learned scale, a broadcast that enlarges."""
        a = ev.args[0]
        b = ev.args[1] if len(ev.args) > 1 else None
        alpha = ev.kwargs.get("alpha", ev.args[2] if len(ev.args) > 2 else 1)
        if alpha != 1:
            return False
        if not self._act(a):
            return self._pointwise_binary(ev)
        out = ev.outputs[0]
        if ev.name.rstrip("_") in ("add",) and self._act(b):
            if list(a.shape) != list(b.shape) or list(out.shape) != list(a.shape) or not a.is_contiguous() \
                    or not b.is_contiguous():
                return self._pointwise_binary(ev)
            return self._simple(ev, "Add", inputs=[self.rid[id(a)], self.rid[id(b)]])
        if self._act(b) or list(out.shape) != list(a.shape):
            return self._pointwise_binary(ev)
        # Dropout: x * noise, the noise drawn by bernoulli_ (CPU, unfused).
        if ev.name.rstrip("_") == "mul" and isinstance(b, torch.Tensor) and id(b) in self.noise:
            if list(b.shape) == list(a.shape):
                return self._simple(ev, "Dropout", {"p": round(1.0 - self.noise[id(b)], 12)})
            # Noise that broadcasts (stochastic depth drops whole samples, its
            # noise (N, 1, 1, 1)): a product with the noise this step drew, a
            # constant; what autograd keeps of it is the op's aux, as observed.
            return self._pointwise_binary(ev)
        if isinstance(b, torch.Tensor) and b.dim() > len(a.shape):
            return self._pointwise_binary(ev)
        values = _const_values(ev.name.rstrip("_"), b)
        # The *Const kernels repeat the constant over the input's last dimensions.
        repeats = not isinstance(b, torch.Tensor) or list(b.shape[_leading_ones(b):]) == \
            list(a.shape[len(a.shape) - (b.dim() - _leading_ones(b)):])
        # ... and read their input dense (a transposed q times a rotary table is the family's).
        if not values or not repeats or not a.is_contiguous():
            return self._pointwise_binary(ev)
        extra = {"const_shape": list(b.shape)} if isinstance(b, torch.Tensor) and b.dim() > 0 else {}
        extra.update(values)
        self._simple(ev, CONST_KINDS[ev.name], extra)
        if values.get("learned"):
            self._note_params(b)
        return True

    _op_add = _op_sub = _op_mul = _op_div = _binary

    def _op_native_dropout(self, ev):
        if not self._one_act(ev):
            return False
        return self._simple(ev, "Dropout", {"p": float(ev.args[1])})

    def _op_mse_loss(self, ev):
        if not self._one_act(ev):
            return False
        self._new({"kind": "MSELoss"}, [self.rid[id(ev.args[0])]], ev.outputs[0], view=False, event=ev,
                  label=self._label(ev, "mse_loss"))
        return True

    def _op_binary_cross_entropy_with_logits(self, ev):
        """BCEWithLogitsLoss averaged, without weight or pos_weight, against a
        target that is no activation (the module's labels or mask)."""
        a = ev.args
        weight, pos_weight = (a[2] if len(a) > 2 else None), (a[3] if len(a) > 3 else None)
        reduction = a[4] if len(a) > 4 else ev.kwargs.get("reduction", 1)
        if not self._one_act(ev) or not self._act(a[0]) or weight is not None or pos_weight is not None \
                or ev.kwargs.get("weight") is not None or ev.kwargs.get("pos_weight") is not None or reduction != 1:
            return False
        self._new({"kind": "BCEWithLogitsLoss"}, [self.rid[id(a[0])]], ev.outputs[0], view=False, event=ev,
                  label=self._label(ev, "bce_with_logits"))
        return True

    def _op_nll_loss_forward(self, ev):
        fused = [i for i, j in self.fused_into.items() if j == ev.index]
        if not fused:
            return False
        ls = self.rec.ops[fused[0]]
        logits = ls.args[0]
        if not self._act(logits) or ev.args[2] is not None:  # class weights: not remat's loss
            return False
        v = self._new({"kind": "SoftmaxCELoss"}, [self.rid[id(logits)]], ev.outputs[0], view=False, event=ev,
                      label=self._label(ev, "cross_entropy"))
        self._mark_lowp_logp(v, ls)
        self.event_op[ls.index] = self.event_op[ev.index]
        return True

    def _mark_lowp_logp(self, v, log_softmax):
        """A cross-entropy on bf16/f16 logits outside torch.autocast: PyTorch's
        log_softmax then writes (and keeps) 16-bit log-probabilities and
        nll_loss sums them in 16 bits, which remat's SoftmaxCELoss does not
        run (it takes f32 logits, or autocast's f32 log-probabilities). The
        op is made a simulate-only Generic in _finish, with PyTorch's saves."""
        if log_softmax.outputs[0].dtype in (torch.bfloat16, torch.float16):
            self.ops[v]["_lowp_logp"] = str(log_softmax.outputs[0].dtype).replace("torch.", "")

    def _op_smoothed_ce(self, ev):
        """The final add of a smoothed cross-entropy (_plan_fusions): one
        SoftmaxCELoss on the log_softmax's logits with label_smoothing. Every
        event of it is the op's, so what they save (the log-probabilities,
        nll_loss's total weight, the ignore masks, 1.13's masked smooth loss,
        2.x's row count) is the op's aux, as PyTorch keeps it."""
        events, eps = self.smoothed[ev.index]
        ls, nll = events[0], events[1]
        logits = ls.args[0]
        if not self._act(logits):
            return False
        self.loss_targets.update(storage_key(t) for pos, t in nll.tensor_args() if pos >= 1 and not self._act(t))
        v = self._new({"kind": "SoftmaxCELoss", "label_smoothing": eps}, [self.rid[id(logits)]], ev.outputs[0],
                      view=False, event=nll, label=self._label(nll, "cross_entropy"))
        for e in events:
            self.event_op[e.index] = v
        self._mark_lowp_logp(v, ls)
        return True

    # ---- views -------------------------------------------------------------------

    def _view(self, ev, kind, extra, src=None, out=None, label=None):
        src = ev.args[0] if src is None else src
        out = ev.outputs[0] if out is None else out
        op = {"kind": kind}
        op.update(extra)
        self._new(op, [self.rid[id(src)]], out, view=True, event=ev, label=self._label(ev, label or kind.lower()))
        return True

    def _reshape(self, ev):
        if not self._one_act(ev):
            return False
        return self._view(ev, "Reshape", {"shape": list(ev.outputs[0].shape) or [1]})

    _op_view = _op__unsafe_view = _op__reshape_alias = _op_reshape = _op_flatten = _op_unflatten = _reshape
    _op_squeeze = _op_unsqueeze = _op_view_as = _op_reshape_as = _reshape

    def _op_t(self, ev):
        if not self._one_act(ev):
            return False
        return self._view(ev, "Transpose", {"perm": list(range(ev.args[0].dim()))[::-1]})

    def _op_transpose(self, ev):
        if not self._one_act(ev):
            return False
        r = ev.args[0].dim()
        perm = list(range(r))
        a, b = ev.args[1] % r, ev.args[2] % r
        perm[a], perm[b] = perm[b], perm[a]
        return self._view(ev, "Transpose", {"perm": perm})

    def _op_permute(self, ev):
        if not self._one_act(ev):
            return False
        r = ev.args[0].dim()
        return self._view(ev, "Transpose", {"perm": [d % r for d in ev.args[1]]})

    def _op_expand(self, ev):
        if not self._one_act(ev):
            return False
        return self._view(ev, "Expand", {"shape": list(ev.outputs[0].shape)})

    def _slice_attrs(self, x, dim, start, end, step):
        size = x.shape[dim]
        start = 0 if start is None else start
        end = size if end is None or end > size else end
        return {"axis": dim, "start": int(start), "end": int(end), "step": int(step)}

    def _op_slice(self, ev):
        if not self._one_act(ev):
            return False
        x = ev.args[0]
        a = list(ev.args) + [None] * 5
        dim = (a[1] if a[1] is not None else 0) % x.dim()
        attrs = self._slice_attrs(x, dim, a[2], a[3], a[4] if a[4] is not None else 1)
        if attrs["start"] == 0 and attrs["end"] == x.shape[dim] and attrs["step"] == 1:
            self.rid[id(ev.outputs[0])] = self.rid[id(x)]  # the whole axis: the same tensor
            return True
        return self._view(ev, "Slice", attrs)

    def _select(self, ev, x, dim, i, out):
        """x.select(dim, i): a one-wide Slice, then a Reshape dropping the axis."""
        part = list(x.shape[:dim]) + [1] + list(x.shape[dim + 1:])
        sid = self._new({"kind": "Slice", "axis": dim, "start": int(i), "end": int(i) + 1, "step": 1,
                         "shape": part}, [self.rid[id(x)]], None, view=True, label=self._label(ev, "select"))
        self.ops[sid]["_event"] = ev.index  # made by the same aten op as the Reshape below
        self._new({"kind": "Reshape", "shape": list(out.shape) or [1]}, [sid], out, view=True, event=ev,
                  label=self._label(ev, "select"))
        return True

    def _op_select(self, ev):
        if not self._one_act(ev):
            return False
        x = ev.args[0]
        dim = ev.args[1] % x.dim()
        return self._select(ev, x, dim, ev.args[2] % x.shape[dim], ev.outputs[0])

    def _split(self, ev, sizes, dim):
        x = ev.args[0]
        dim = dim % x.dim()
        start = 0
        for out, n in zip(ev.outputs, sizes):
            self._view(ev, "Slice", {"axis": dim, "start": start, "end": start + n, "step": 1}, src=x, out=out,
                       label="split")
            start += n
        return True

    def _op_split(self, ev):
        if not self._one_act(ev):
            return False
        dim = ev.args[2] if len(ev.args) > 2 else ev.kwargs.get("dim", 0)
        return self._split(ev, [o.shape[dim] for o in ev.outputs], dim)

    _op_split_with_sizes = _op_unsafe_split = _op_unsafe_split_with_sizes = _op_split

    def _op_stack(self, ev):
        """torch.stack: each tensor unsqueezed (a view), then one Concat."""
        ts = ev.args[0]
        if not ts or not all(self._act(t) for t in ts):
            return False
        out = ev.outputs[0]
        dim = int(ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("dim", 0)) % out.dim()
        views = []
        for t in ts:
            shape = list(t.shape[:dim]) + [1] + list(t.shape[dim:])
            u = self._new({"kind": "Reshape", "shape": shape}, [self.rid[id(t)]], None, view=True,
                          label=self._label(ev, "stack"))
            self.ops[u]["_event"] = ev.index  # made by the same aten op as the Concat below
            views.append(u)
        return self._simple(ev, "Concat", {"axis": dim}, inputs=views)

    def _shuffle(self, ev, unshuffle):
        """pixel_shuffle(x, r) (pixel_unshuffle): PyTorch allocates the output
        and saves nothing (its backward is the other shuffle of the gradient).
        Here the same moves as views and one copy: a Reshape splitting the
        channels (the spatial axes), a Transpose, and a Reshape asked to copy,
        which is PyTorch's one allocation; the backward maps the gradient
        back through them, moving the same elements."""
        x, r = ev.args[0], int(ev.args[1])
        if not self._one_act(ev) or x.dim() < 3 or r < 1 or not ev.outputs:
            return False
        k = x.dim() - 3
        lead, (c, h, w) = list(x.shape[:k]), x.shape[k:]
        if unshuffle:
            split, perm = lead + [c, h // r, r, w // r, r], [k, k + 2, k + 4, k + 1, k + 3]
        else:
            split, perm = lead + [c // (r * r), r, r, h, w], [k, k + 3, k + 1, k + 4, k + 2]
        name = "pixel_unshuffle" if unshuffle else "pixel_shuffle"
        u = self._new({"kind": "Reshape", "shape": split}, [self.rid[id(x)]], None, view=True,
                      label=self._label(ev, name + ".split"))
        t = self._new({"kind": "Transpose", "perm": list(range(k)) + perm}, [u], None, view=True,
                      label=self._label(ev, name + ".permute"))
        for i in (u, t):
            self.ops[i]["_event"] = ev.index  # made by the same aten op as the copy below
        out = ev.outputs[0]
        self._new({"kind": "Reshape", "shape": list(out.shape), "copy": True}, [t], out, view=False, event=ev,
                  label=self._label(ev, name))
        return True

    def _op_pixel_shuffle(self, ev):
        return self._shuffle(ev, False)

    def _op_pixel_unshuffle(self, ev):
        return self._shuffle(ev, True)

    def _op_unbind(self, ev):
        if not self._one_act(ev):
            return False
        x = ev.args[0]
        dim = (ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("dim", 0)) % x.dim()
        for i, out in enumerate(ev.outputs):
            self._select(ev, x, dim, i, out)
        return True

    # ---- saved tensors -------------------------------------------------------------

    def _attach_saves(self):
        counted = set()
        later = []
        # Saves of ops on constants alone (a position embedding keeps its ids)
        # are charged to the next op: they live as long as the step does.
        next_op = [None] * (len(self.rec.ops) + 1)
        for i in range(len(self.rec.ops) - 1, -1, -1):
            v = self.event_op.get(i)
            next_op[i] = v if v is not None else next_op[i + 1]
        for index, t in sorted(self.rec.attribute_saves(), key=lambda e: e[0]):
            key = storage_key(t)
            if key in self.excluded or key in self.targets:
                continue
            ev = self.rec.ops[index]
            if index in self.rnn_layers:
                self._rnn_save(self.rnn_layers[index], t, counted)
                continue
            v = self.event_op.get(index)
            if v is None and ev.name == "_to_copy" and ev.outputs and next_op[index] is not None and \
                    storage_key(ev.outputs[0]) in self.weight_casts and key in self.owner:
                # torch.autocast casts an op's weights just before the op; a save
                # packed meanwhile (the result of an in-place ReLU on a view, which
                # autograd packs late: _complete_activations) is of an activation
                # that op reads: a save like any, counted once, not bytes of its own.
                v = next_op[index]
                self._save(v, t, counted, later)
                continue
            if v is None:
                v = next_op[index] if next_op[index] is not None else len(self.ops) - 1
                self._private(v, t, counted)
                continue
            if ev.name in LOSS_OPS and not self._act(t) and any(t is a for a in ev.args[1:]):
                continue  # the loss target: baseline
            if self._saves_overwritten(v, ev, t, counted):
                continue
            self._save(v, t, counted, later)
        for v, t in later:
            key = storage_key(t)
            if key not in counted:
                self._private(v, t, counted)
        self._charge_storage_rest()
        self._complete_products()
        self._complete_activations()

    def _complete_products(self):
        """A Pointwise mul's backward reads each operand for the other's
        gradient. PyTorch 2.x packs what an in-place mul_ keeps of r (a GRU's
        r·h_n, (h - n)·z) after the op, so attribute_saves gives it to the next
        op; where that operand is kept by another op already (the sigmoid that
        made it saves it), the product saves it too: the same bytes, counted once."""
        saved = {s for op in self.ops for s in op["_saved"]}
        for op in self.ops:
            if op["kind"] != "Pointwise" or op.get("fn") != "mul":
                continue
            for u in op["inputs"]:
                if u not in op["_saved"] and u in saved:
                    op["_saved"].append(u)

    def _complete_activations(self):
        """ReLU, Tanh and Sigmoid differentiate from their result. An in-place
        one on a view (nn.ReLU(True) after nn.InstanceNorm2d, whose output is a
        view of batch_norm's) leaves its node without _saved_result (autograd
        rebases the view), so the save of that tensor went to the op that
        reads it next (a convolution keeping its input): the activation keeps
        it too, the same bytes, counted once."""
        saved = {s for op in self.ops for s in op["_saved"]}
        for op in self.ops:
            if op["kind"] in ("ReLU", "Tanh", "Sigmoid") and op["id"] not in op["_saved"] and op["id"] in saved:
                op["_saved"].append(op["id"])

    def _charge_storage_rest(self):
        """PyTorch keeps a saved tensor's whole storage; remat gives each op that
        wrote a part of it its own bytes. Where autograd saved parts of a storage
        that other parts, written in place by ops whose outputs are not saved,
        share (1.13's GRU: r and z are sigmoid_ in place on two thirds of
        W_hh·h + b_hh, whose last third becomes n's product with r in place),
        those other parts are kept as long: each such op keeps its output's
        bytes private (aux), so the count is PyTorch's."""
        saved = {s for op in self.ops for s in op["_saved"]}
        last = {}  # storage key -> {(offset, bytes): the op that wrote that region last}
        for v, (key, where) in self.op_storage.items():
            if "_before" not in self.ops[v]:
                last.setdefault(key, {})[where] = v
        for key, regions in last.items():
            if len(regions) < 2 or not any(v in saved for v in regions.values()):
                continue
            # Which elements each region is; the finest ones (a region that holds
            # another, the whole storage's first writer, drops out) must cover the
            # storage once each.
            size = regions and next(iter(regions))[3]
            n = self.storage_bytes[key] // size
            cells = {r: frozenset(torch.arange(n).as_strided(r[1], r[2], r[0]).reshape(-1).tolist())
                     for r in regions if r[3] == size}
            finest = [r for r in cells if not any(o != r and cells[o] < cells[r] for o in cells)]
            covered = [c for r in finest for c in cells[r]]
            if len(finest) < 2 or len(covered) != n or len(set(covered)) != n:
                continue
            regions = {r: regions[r] for r in finest}
            if not any(v in saved for v in regions.values()):
                continue
            for v in regions.values():
                if v not in saved and self.ops[v]["kind"] == "Pointwise":
                    self.ops[v]["_aux"] += self._op_nbytes(v)

    def _saves_overwritten(self, v, ev, t, counted):
        """An in-place op whose backward reads the value it overwrites
        (hardswish_, x.mul_(y) with y needing a gradient): autograd saves a
        clone of that value, made before the op, in a storage of its own. remat
        gives the in-place result an op of its own, so the value overwritten
        is its first input's, still there: the op saves that input (the same
        bytes, kept as long), which its kernel's backward then reads. True when
        `t` is that clone and so charged."""
        op = self.ops[v]
        # The family, and the activation kinds whose backward reads their input (silu_).
        if not ev.name.endswith("_") or op["kind"] not in ("Pointwise", "SiLU", "GELU") or not op["inputs"] or not ev.args:
            return False
        key = storage_key(t)
        if key in counted or ev.args[0] is not ev.outputs[0]:
            return False
        if op.get("const_at") == 0:
            return False  # the value overwritten is the op's constant (a GRU's first step): the clone is private
        u = op["inputs"][0]
        src = self.ops[u]
        # The clone runs as an aten op of its own (a Reshape copy of the
        # input, which leads nowhere and is dropped), or inside autograd.
        clone = self.rid.get(id(t))
        if clone is not None and not (self.ops[clone].get("copy") and self.ops[clone]["inputs"] == [u]):
            return False
        if clone is None and key in self.owner:
            return False
        numel = 1
        for d in src["shape"]:
            numel *= d
        dtype = src.get("dtype") if not src["_view"] else DTYPES.get(t.dtype)
        if ("bytes" in src or dtype != DTYPES.get(t.dtype) or list(t.shape) != src["shape"] or
                storage_nbytes(t) != numel * t.element_size() or u in op["_saved"]):
            return False
        if src["_view"]:
            # The value overwritten is a view (1.13's GRU multiplies a third of
            # W_hh·h + b_hh by r in place): saving the view would keep its whole
            # base. remat writes autograd's clone as the op it is, a dense copy
            # of the view placed just before the op (_finish), read and saved by it.
            u = self._clone_before(v, u, t)
        op["_saved"].append(u)
        counted.add(key)
        return True

    def _clone_before(self, v, u, t):
        """A Reshape copy of op u, made the first input of op v and emitted just
        before v (it is appended after every op; _finish places it)."""
        op = self.ops[v]
        c = {"kind": "Reshape", "shape": list(self.ops[u]["shape"]), "copy": True, "dtype": DTYPES.get(t.dtype),
             "id": len(self.ops), "inputs": [u], "_saved": [], "_aux": 0, "_view": False, "_before": v,
             "name": self._unique_name(f"{op.get('name', 'op')}.clone")}
        if "_event" in op:
            c["_event"] = op["_event"]
        self.ops.append(c)
        op["inputs"][0] = c["id"]
        return c["id"]

    def _save(self, v, t, counted, later):
        op = self.ops[v]
        cands = [op["id"]] + op["inputs"]
        alias = self.rid.get(id(t))
        key = storage_key(t)
        if alias is None and key not in self.owner:
            self._private(v, t, counted)
            return
        chosen = alias if alias in cands else None
        if chosen is None:
            for c in cands:
                if self._storage_of(c) == self.owner.get(key):
                    chosen = c
                    break
        if chosen is None or self.ops[v]["kind"] == "SoftmaxCELoss" and chosen == v:
            later.append((v, t))
            return
        if chosen not in op["_saved"]:
            op["_saved"].append(chosen)
        counted.add(key)

    def _storage_of(self, v):
        while self.ops[v]["_view"]:
            v = self.ops[v]["inputs"][0]
        return v

    def _private(self, v, t, counted):
        key = storage_key(t)
        if key in counted:
            return
        counted.add(key)
        self.ops[v]["_aux"] += storage_nbytes(t)

    # ---- the file ----------------------------------------------------------------------

    def _torch_origins(self):
        return _torch_origins_of(self.rec.ops)

    def _finish(self, loss_id):
        self._attach_saves()
        # Only what leads to the loss: remat requires it, and the rest has no backward.
        # The order ops are written in: creation order, with the copies
        # _clone_before made placed just before the op reading them.
        order = []
        placed = {}
        for op in self.ops:
            if "_before" in op:
                placed.setdefault(op["_before"], []).append(op)
        for op in self.ops[:loss_id + 1]:
            if "_before" not in op:
                order.extend(placed.get(op["id"], []))
                order.append(op)
        keep = [False] * len(self.ops)
        keep[loss_id] = True
        for op in reversed(order):
            if keep[op["id"]]:
                for u in op["inputs"]:
                    keep[u] = True
        dropped = [op for op in order[:-1] if not keep[op["id"]]]
        lost = sum(op["_aux"] for op in dropped)
        if any(op["_saved"] or op["_aux"] for op in dropped):
            self.notes.append(f"{len(dropped)} op(s) do not lead to the loss; what they saved ({lost} private bytes) "
                              "is left out")
        renum = {}
        out = []
        for op in order:
            if not keep[op["id"]]:
                continue
            renum[op["id"]] = len(out)
            out.append(op)
        loss = out[-1]
        # A loss another op reads (a sum of two losses: CLIP's symmetric
        # cross-entropy, a reconstruction loss plus a KL term) is not remat's
        # loss, which ends the step: a scalar Generic op, simulate-only.
        summed = [op for op in out[:-1] if op["kind"] in LOSS_KINDS]
        for op in summed:
            _as_generic(op)
            op["shape"] = [1]
        if summed:
            self.notes.append(f"the loss combines {len(summed)} loss op(s) ({', '.join(op['name'] for op in summed)}) "
                              "with others; remat runs one loss, so the model can be simulated, not run")
        if "_lowp_logp" in loss:
            self.notes.append(f"the cross-entropy ran on {loss['_lowp_logp']} logits outside torch.autocast, so "
                              f"PyTorch kept {loss['_lowp_logp']} log-probabilities and summed the loss in "
                              f"{loss['_lowp_logp']}; remat runs a cross-entropy on f32 logits or under autocast "
                              "(f32 log-probabilities), so this model can be simulated (with PyTorch's saved bytes), "
                              "not run: compute the loss inside torch.autocast, or on logits.float(), to run it")
            _as_generic(loss)
            loss["shape"] = [1]
        if loss["kind"] not in LOSS_KINDS:
            # Any other scalar: a Generic last op (remat needs a shape: [1]).
            if loss["kind"] != "Generic":
                _as_generic(loss)
            loss["shape"] = [1]
        origins = self._torch_origins()
        ops = []
        for op in out:
            j = {"id": renum[op["id"]]}
            for k, val in op.items():
                if k.startswith("_") or k == "id":
                    continue
                j[k] = val
            if op["inputs"]:
                j["inputs"] = [renum[u] for u in op["inputs"]]
            else:
                j.pop("inputs", None)
            if op["kind"] != "Input":
                j["saved"] = sorted(renum[s] for s in op["_saved"])
            if op["_aux"]:
                j["aux_bytes"] = op["_aux"]
            for slot, pname in op.get("_params", []):
                names = PARAM_NAMES.get(op["kind"], [])
                if slot < len(names):
                    self.parameters.append({"tensor": f"{renum[op['id']]}.{names[slot]}", "param": pname})
            if op["_view"] or op["kind"] in LOSS_KINDS:
                j.pop("dtype", None)
            if op["kind"] in LOSS_KINDS:
                j.pop("shape", None)
            j["torch"] = origins.get(op.get("_event"), {"module": ""})  # the Input: the root's argument
            ops.append(j)
        return ops, self.notes


def _keep(ev):
    """bernoulli_(noise, p)'s keep probability p (a tensor for the Tensor
    overload, which is no dropout's). The dispatcher leaves out an argument
    equal to its default, so nn.Dropout(0.5) draws bernoulli_(noise) with no
    p: 0.5, the float overload's default. Before, such a dropout was captured
    as a product with the noise the capture drew (a MulConst)."""
    if len(ev.args) > 1:
        return ev.args[1]
    return ev.kwargs.get("p", 0.5)


def _smoothing(hit, spread, classes):
    """label_smoothing eps from ATen's two factors, hit = 1 - eps and spread =
    eps / classes (double): the shortest decimal near spread·classes that
    gives both back exactly, else None (not a smoothed cross-entropy)."""
    import math
    guess = spread * classes
    for cand in (float(f"{guess:.12g}"), guess, math.nextafter(guess, 0), math.nextafter(guess, 2), 1.0 - hit):
        if 0 < cand <= 1 and 1.0 - cand == hit and cand / classes == spread:
            return cand
    return None


def _torch_origins_of(events):
    """Per event index: where the op ran, as a torch plan names it (the
    module; the aten overload and its occurrence among that overload's calls
    in the step, `call`; its place among its module's aten ops, `place`)."""
    calls, places, found = {}, {}, {}
    for ev in events:
        aten = str(ev.func)  # "aten.addmm.default"
        call = calls.get(aten, 0)
        calls[aten] = call + 1
        where = ev.module if ev.inside else None
        place = places.get(where, 0)
        places[where] = place + 1
        origin = {"aten": aten, "call": call, "place": place}
        if ev.inside:
            origin = {"module": ev.module, **origin}
        found[ev.index] = origin
    return found


def _leading_ones(t):
    n = 0
    while n < t.dim() and t.shape[n] == 1:
        n += 1
    return n


def _number(f):
    """A float for the JSON file: infinities as the format's "inf"/"-inf"."""
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    return f


def _numbers(t, sign=1.0):
    """A constant tensor's values (times sign), row-major, as plain numbers."""
    return [_number(sign * float(x)) for x in t.detach().reshape(-1).tolist()]


def _is_causal(mask):
    """(1, ..., 1, T, T), set exactly above the diagonal: the format's "causal"."""
    if mask.dim() < 2 or mask.shape[-1] != mask.shape[-2] or any(int(d) != 1 for d in mask.shape[:-2]):
        return False
    t = int(mask.shape[-1])
    want = torch.ones(t, t, dtype=torch.bool).triu(1)
    return bool(torch.equal(mask.detach().reshape(t, t).to(torch.bool), want))


def _const_values(name, c):
    """The values of an add/sub/mul/div's constant operand c (x - c is written
    x + (-c)), so the op can run. A constant computed from parameters (a
    position table looked up by arange) is a learned AddConst, its current
    values the initial ones; a product or quotient with such a constant has no
    kind that trains it and stays simulate-only (no values)."""
    grad = isinstance(c, torch.Tensor) and c.requires_grad
    if grad and name != "add":
        return {}
    sign = -1.0 if name == "sub" else 1.0
    if isinstance(c, torch.Tensor):
        if c.dim() == 0:
            vals = _number(sign * float(c.item()))
        else:
            vals = _numbers(c, sign)
    elif isinstance(c, (int, float)) and not isinstance(c, bool):
        vals = _number(sign * float(c))
    else:
        return {}
    out = {"values": vals}
    if grad:
        out["learned"] = True
    return out


def _flops(ev, out):
    """Forward and backward FLOP estimates of an op remat has no kind for:
    products count 2 per multiply-add, everything else one per output
    element; the backward twice the forward."""
    n = float(max(1, out.numel()))
    name = ev.name.rstrip("_")
    a = ev.args
    try:
        if name in ("mm", "bmm", "addmm", "baddbmm", "matmul"):
            x, y = (a[1], a[2]) if name in ("addmm", "baddbmm") else (a[0], a[1])
            f = 2.0 * n * x.shape[-1]
        elif name == "convolution":
            w = a[1]
            f = 2.0 * n * _numel(w.shape[1:])
        elif name in ("_log_softmax", "_softmax", "log_softmax", "softmax"):
            f = 4.0 * n
        elif name in ("sum", "mean", "amax", "amin", "max", "min", "norm", "var", "std"):
            f = float(a[0].numel())
        else:
            f = n
    except (AttributeError, IndexError, TypeError):
        f = n
    return f, 2.0 * f

