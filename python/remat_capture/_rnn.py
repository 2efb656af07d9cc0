"""PyTorch 2.x's fused CPU LSTM layer (aten.mkldnn_rnn_layer, oneDNN's), as the
ops remat runs.

PyTorch 1.13 ran nn.LSTM on the CPU as the cell's own aten ops, which the
Builder maps one by one: the input's gates for every step in one product
(Linear), then per step the hidden state's product with W_hh plus b_hh
(Linear; at the first step, from a zero state, b_hh broadcast), the two
added, split in four (unsafe_split: Slice views), sigmoid/sigmoid/tanh/
sigmoid, c = f·c_prev + i·g, h = o·tanh(c), and the steps' h stacked (a
Concat). PyTorch 2.x runs a layer as one oneDNN call instead, which remat has
no kernel for; this mixin writes that same decomposition for it, so the
layer runs (its value is the same function: gates = x·W_ihᵀ + b_ih +
h·W_hhᵀ + b_hh; oneDNN adds the two biases first, so the two differ by
float32 rounding, not in what they compute).

What it saves is what 2.x's node saves, measured by saved_tensors_hooks
(_build.py's _attach_saves): the layer's input, its output, h_n and c_n, the
initial h and c (constants: aux), the biases when the layer has none (2.x
passes zero tensors shaped like the weights, which it keeps: aux), and
oneDNN's workspace, a uint8 tensor whose size oneDNN chooses (40,960 bytes
for 6 steps of 2 × 32, 36,864 for 5 steps of 3 × 12: it holds every step's
gates and states, laid out and padded its own way). The decomposition's
kernels read tensors of their own in the backward: each step's four gates,
c_prev, tanh(c) and h_prev. Those are the workspace's contents in remat's
layout, so they are charged against it: the workspace's bytes minus theirs
are the first op's aux_bytes (kept from the layer's forward to its
backward, as the workspace is). The layer's saved bytes are then 2.x's
exactly. A layer whose workspace is smaller than what the decomposition
keeps (not seen with oneDNN's layouts) stays Generic, with a note.

Mapped: mode LSTM, one direction forward (not the reverse half of a
bidirectional layer), no packed sequence, f32, initial states that are
zero constants or activations. Anything else stays Generic.
"""
import torch

from ._trace import storage_key, storage_nbytes

LSTM_MODE = 2  # ideep::rnn_kind::LSTM


class RnnMixin:
    """_op_mkldnn_rnn_layer for the Builder (_build.py) and the attribution of that op's saves."""

    def _rnn_tensor(self, shape, like):
        """A tensor standing for a value the decomposition computes and PyTorch
        never materialised: it gives the op its shape, dtype and a storage of its
        own (kept alive, so that no address is reused while the capture runs)."""
        t = torch.empty(shape, dtype=like.dtype)
        self.rnn_keep.append(t)
        return t

    def _rnn_state(self, s):
        """An initial state: ('zero', None), ('act', op id), or None (a nonzero constant)."""
        if self._act(s):
            return ("act", self.rid[id(s)])
        if not s.requires_grad and not bool(s.detach().ne(0).any()):
            return ("zero", None)
        return None

    def _op_mkldnn_rnn_layer(self, ev):
        a = list(ev.args) + [None] * 16
        x, w_ih, w_hh, b_ih, b_hh, hx, cx = a[:7]
        reverse, batch_sizes, mode, hidden, has_biases = a[7], a[8], a[9], a[10], a[12]
        acts = [t for _, t in ev.tensor_args() if self._act(t)]
        if not self._act(x) or any(t is not x and t is not hx and t is not cx for t in acts):
            return False
        if mode != LSTM_MODE or reverse or batch_sizes or len(ev.outputs) != 4:
            return False
        if x.dtype != torch.float32 or x.dim() != 3 or not x.is_contiguous():
            return False
        h0, c0 = self._rnn_state(hx), self._rnn_state(cx)
        if h0 is None or c0 is None or hx.dim() != 2 or cx.dim() != 2:
            return False
        params = [self._param_name(w) for w in (w_ih, w_hh)]
        biases = [self._param_name(b) for b in (b_ih, b_hh)] if has_biases else [None, None]
        if None in params or (has_biases and None in biases):
            return False
        steps, n, hid = int(x.shape[0]), int(x.shape[1]), int(hidden)
        out, hy, cy, ws = ev.outputs
        # What the decomposition's kernels keep beyond what 2.x keeps (its
        # input, output, h_n, c_n): per step four gates, tanh(c), and for each
        # step after the first c_prev and h_prev.
        cell = n * hid * x.element_size()
        own = steps * (4 + 1) * cell + (steps - 1) * 2 * cell
        if storage_nbytes(ws) < own:
            self.notes.append(f"mkldnn_rnn_layer: its workspace ({storage_nbytes(ws)} bytes) is smaller than what "
                              f"the decomposition keeps ({own}); Generic")
            return False
        first = len(self.ops)
        label = self._label(ev, "lstm")

        def new(op, inputs, t, view=False, name=None):
            v = self._new(op, inputs, t if not view else None, view=view, label=f"{label}.{name or op['kind'].lower()}")
            self.ops[v]["_event"] = ev.index  # every op of the layer names the aten op it stands for
            return v

        xv = new({"kind": "Reshape", "shape": [steps * n, int(x.shape[2])]}, [self.rid[id(x)]], None, view=True,
                 name="input")
        gx = new({"kind": "Linear"} if has_biases else {"kind": "Linear", "bias": False}, [xv],
                 self._rnn_tensor([steps * n, 4 * hid], x), name="gates_x")
        self.ops[gx]["_params"] = [(0, params[0])] + ([(1, biases[0])] if has_biases else [])
        self.ops[gx]["_saved"] = [xv]
        gxs = new({"kind": "Reshape", "shape": [steps, n, 4 * hid]}, [gx], None, view=True, name="gates_x")
        h, c = h0, c0
        hs = []
        state_ops = {}
        for t in range(steps):
            part = new({"kind": "Slice", "axis": 0, "start": t, "end": t + 1, "step": 1, "shape": [1, n, 4 * hid]},
                       [gxs], None, view=True, name="step")
            xt = new({"kind": "Reshape", "shape": [n, 4 * hid]}, [part], None, view=True, name="step")
            if h[0] == "zero":
                # h·W_hhᵀ = 0: the gates are x's plus b_hh broadcast (a learned
                # constant, as 1.13's addmm(b_hh, zeros, W_hhᵀ) is captured), or x's alone.
                if has_biases:
                    const = self._constant_operand(b_hh)
                    param = const.pop("_param")
                    g = new(dict({"kind": "Pointwise", "fn": "add", "const_at": 1}, **const), [xt],
                            self._rnn_tensor([n, 4 * hid], x), name="gates")
                    self.ops[g]["_params"] = [(0, param)]
                else:
                    g = xt
                state_ops["h0_reader"] = g if has_biases else None  # without: the first sigmoid (below)
            else:
                hh = new({"kind": "Linear"} if has_biases else {"kind": "Linear", "bias": False}, [h[1]],
                         self._rnn_tensor([n, 4 * hid], x), name="gates_h")
                self.ops[hh]["_params"] = [(0, params[1])] + ([(1, biases[1])] if has_biases else [])
                self.ops[hh]["_saved"] = [h[1]]
                g = new({"kind": "Add"}, [hh, xt], self._rnn_tensor([n, 4 * hid], x), name="gates")
            gates = []
            for k, fn in enumerate(("sigmoid", "sigmoid", "tanh", "sigmoid")):  # i, f, g, o
                s = new({"kind": "Slice", "axis": 1, "start": k * hid, "end": (k + 1) * hid, "step": 1,
                         "shape": [n, hid]}, [g], None, view=True, name="split")
                u = new({"kind": "Pointwise", "fn": fn}, [s], self._rnn_tensor([n, hid], x), name=fn)
                self.ops[u]["_saved"] = [u]
                gates.append(u)
            i, f, gg, o = gates
            if t == 0:
                # The layer's first Pointwise op (b_hh's add, else i), held from the
                # layer's forward to its backward, carries the workspace's rest (a
                # Linear's aux is reserved for a copy of its input).
                state_ops["first_pointwise"] = g if self.ops[g]["kind"] == "Pointwise" else i
                if state_ops.get("h0_reader") is None and h0[0] == "zero":
                    state_ops["h0_reader"] = i
            if c[0] == "zero":
                # f·c0 with c0 a zero constant, as 1.13's mul(f, zeros) is captured:
                # its saves are the constant's (2.x's cx, charged by _rnn_save).
                fc = new({"kind": "Pointwise", "fn": "mul", "const_at": 1, "const_shape": [n, hid],
                          "values": [0.0] * (n * hid)}, [f], self._rnn_tensor([n, hid], x), name="mul")
                state_ops["c0_reader"] = fc
            else:
                fc = new({"kind": "Pointwise", "fn": "mul"}, [f, c[1]], self._rnn_tensor([n, hid], x), name="mul")
                self.ops[fc]["_saved"] = sorted({f, c[1]})
            ig = new({"kind": "Pointwise", "fn": "mul"}, [i, gg], self._rnn_tensor([n, hid], x), name="mul")
            self.ops[ig]["_saved"] = [i, gg]
            last = t == steps - 1
            cn = new({"kind": "Add"}, [fc, ig], cy if last else self._rnn_tensor([n, hid], x), name="c")
            tc = new({"kind": "Tanh"}, [cn], self._rnn_tensor([n, hid], x), name="tanh")
            self.ops[tc]["_saved"] = [tc]
            hn = new({"kind": "Pointwise", "fn": "mul"}, [o, tc], hy if last else self._rnn_tensor([n, hid], x),
                     name="h")
            self.ops[hn]["_saved"] = [o, tc]
            h, c = ("act", hn), ("act", cn)
            hs.append(hn)
        ups = [new({"kind": "Reshape", "shape": [1, n, hid]}, [v], None, view=True, name="stack") for v in hs]
        cat = new({"kind": "Concat", "axis": 0}, ups, out, name="output")
        # The decomposition's own saves, summed as remat counts them (one per storage).
        kept = set()
        for op in self.ops[first:]:
            kept.update(self._storage_of(s) for s in op["_saved"])
        # Not its own: x, and the initial states when they are activations (2.x keeps them too).
        kept -= {self._storage_of(v) for v in [xv] + [s[1] for s in (h0, c0) if s[0] == "act"]}
        mine = sum(self._op_nbytes(s) for s in kept)
        assert mine == own, (mine, own)
        self.rnn_layers[ev.index] = {"input": storage_key(x), "output": (storage_key(out), cat),
                                     "hy": (storage_key(hy), h[1]), "cy": (storage_key(cy), c[1]),
                                     "workspace": storage_key(ws), "first": state_ops["first_pointwise"], "own": own,
                                     "hx": storage_key(hx), "cx": storage_key(cx), "h0": h0, "c0": c0,
                                     "h0_reader": state_ops.get("h0_reader"), "c0_reader": state_ops.get("c0_reader")}
        return True

    def _op_nbytes(self, v):
        op = self.ops[v]
        if "bytes" in op:
            return op["bytes"]
        n = 1
        for d in op["shape"]:
            n *= d
        return n * {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}[op["dtype"]]

    def _rnn_save(self, layer, t, counted):
        """One tensor 2.x's mkldnn_rnn_layer node saved, charged to the decomposition:
        its input (the first Linear keeps it already), output, h_n and c_n (kept by
        the ops that make them), and everything else private: the initial states'
        constants to the ops reading them, zero biases and the workspace (less the
        decomposition's own saves) to the first op."""
        key = storage_key(t)
        if key in counted:
            return
        counted.add(key)
        for what in ("output", "hy", "cy"):
            skey, v = layer[what]
            if key == skey:
                if v not in self.ops[v]["_saved"]:
                    self.ops[v]["_saved"].append(v)
                return
        if key == layer["input"]:
            return
        nbytes = storage_nbytes(t)
        if key == layer["workspace"]:
            self.ops[layer["first"]]["_aux"] += nbytes - layer["own"]
        elif key in (layer["hx"], layer["cx"]):
            # An initial state. An activation is kept by the op reading it (the
            # first step's Linear, f·c0) already; a zero constant is that op's aux.
            state, reader = ((layer["h0"], layer["h0_reader"]) if key == layer["hx"] else
                             (layer["c0"], layer["c0_reader"]))
            if state[0] == "zero":
                self.ops[reader]["_aux"] += nbytes
        else:
            self.ops[layer["first"]]["_aux"] += nbytes
