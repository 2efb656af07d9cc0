"""Padding and rolling (remat's Pad kind, core/kernels/pad_geom.h; torch.roll
as Slice views and a Concat): which aten ops are which, and the circular
padding that PyTorch composes out of smaller ops.

F.pad reaches the dispatcher as constant_pad_nd (mode constant, negative pads
crop), reflection_padNd or replication_padNd, each with its pads in F.pad's
order (the last dimension first), which is Pad's own. Circular padding
(F.pad(mode="circular"), Conv*d(padding_mode="circular")) has no kernel of its
own: _pad_circular runs as new_empty(x, padded shape), then copy_ of x into the
middle and of the buffer's own slices into its borders. _plan_circular_pads
finds such a run, checks that the buffer then holds exactly
F.pad(x, pads, "circular"), and the run becomes one Pad op producing the buffer.

torch.roll on the CPU is narrow and cat, one dimension at a time (ATen's
roll_cpu; several dimensions: one roll after another, each a tensor of its
own): Slice views and a Concat per dimension, so the tensors made and kept are
PyTorch's (a Concat saves nothing; roll's node keeps only shifts and dims).
"""
import torch
import torch.nn.functional as F

from ._trace import storage_key

PAD_MODES = {"constant_pad_nd": "constant", "reflection_pad1d": "reflect", "reflection_pad2d": "reflect",
             "reflection_pad3d": "reflect", "replication_pad1d": "replicate", "replication_pad2d": "replicate",
             "replication_pad3d": "replicate", "_pad_circular": "circular"}


def _fill(v):
    v = float(v)
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


class PadMixin:
    """Handlers for padding and rolling; the Builder (_build.py) mixes them in."""

    def _pad(self, ev):
        if not self._one_act(ev) or not ev.outputs:
            return False
        mode = PAD_MODES[ev.name.rstrip("_")]
        pads = [int(p) for p in ev.args[1]]
        extra = {"mode": mode, "pads": pads}
        if mode == "constant":
            value = ev.args[2] if len(ev.args) > 2 else ev.kwargs.get("value", 0)
            extra["fill"] = _fill(0 if value is None else value)
        return self._simple(ev, "Pad", extra)

    _op_constant_pad_nd = _op_reflection_pad1d = _op_reflection_pad2d = _op_reflection_pad3d = _pad
    _op_replication_pad1d = _op_replication_pad2d = _op_replication_pad3d = _op__pad_circular = _pad

    # ---- circular padding, composed ----------------------------------------------

    def _plan_circular_pads(self):
        """Finds each new_empty(x, shape) followed by slices and copy_s that
        fill the buffer, and nothing else, which leave it equal to
        F.pad(x, pads, "circular"): those events are skipped (pad_skip) and
        the last copy_ makes one Pad op (pad_at)."""
        ops = self.rec.ops
        for k, ev in enumerate(ops):
            if ev.name not in ("new_empty", "empty_like") or not ev.outputs or not ev.args:
                continue
            x, buf = ev.args[0], ev.outputs[0]
            if not isinstance(x, torch.Tensor) or not isinstance(buf, torch.Tensor) or buf.dim() != x.dim():
                continue
            key, xkey = storage_key(buf), storage_key(x)
            run, last, interior = [k], None, None
            for ev2 in ops[k + 1:]:
                if ev2.name not in ("slice", "narrow", "copy_") or not ev2.args:
                    break
                if ev2.name == "copy_":
                    dst, src = ev2.args[0], ev2.args[1]
                    if not isinstance(src, torch.Tensor) or storage_key(dst) != key or \
                            storage_key(src) not in (key, xkey):
                        break
                    if storage_key(src) == xkey:
                        if interior is not None or list(src.shape) != list(x.shape):
                            break
                        interior = dst
                    last = ev2.index
                elif storage_key(ev2.args[0]) not in (key, xkey):
                    break
                run.append(ev2.index)
            if last is None or interior is None:
                continue
            pads = self._circular_pads(x, buf, interior)
            if pads is None:
                continue
            self.pad_skip.update(i for i in run if i != last)
            self.pad_at[last] = (x, buf, pads)

    @staticmethod
    def _circular_pads(x, buf, interior):
        """F.pad's pads (the last dimension first) that put x where `interior`
        (the middle of buf) is, when buf then equals x padded circularly."""
        if not buf.is_contiguous() or list(interior.stride()) != list(buf.stride()):
            return None
        start, off = [], interior.storage_offset() - buf.storage_offset()
        for s in buf.stride():
            start.append(off // s)
            off %= s
        rank = x.dim()
        k = min(3, rank - 2) if rank >= 3 else rank - 1
        if k < 1 or any(start[d] != 0 or buf.shape[d] != x.shape[d] for d in range(rank - k)):
            return None
        pads = []
        for d in range(rank - 1, rank - 1 - k, -1):
            b = start[d]
            pads += [b, int(buf.shape[d]) - int(x.shape[d]) - b]
        with torch.no_grad():
            try:
                want = F.pad(x.detach(), pads, mode="circular")
            except (RuntimeError, ValueError, NotImplementedError):
                return None
        return pads if want.shape == buf.shape and torch.equal(want, buf.detach()) else None

    def _pad_composed(self, ev):
        """The last copy_ of a composed circular pad: the Pad op, producing the buffer."""
        hit = self.pad_at.get(ev.index)
        if hit is None:
            return False
        x, buf, pads = hit
        if not self._act(x):
            return False
        self._new({"kind": "Pad", "mode": "circular", "pads": pads}, [self.rid[id(x)]], buf, view=False, event=ev,
                  label=self._label(ev, "pad"))
        return True

    # ---- torch.roll ----------------------------------------------------------------

    def _op_roll(self, ev):
        if not self._one_act(ev) or not ev.outputs:
            return False
        x, out = ev.args[0], ev.outputs[0]
        shifts = [int(s) for s in (ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("shifts", []))]
        dims = [int(d) for d in (ev.args[2] if len(ev.args) > 2 else ev.kwargs.get("dims", []))]
        if not dims:
            if len(shifts) != 1 or not x.is_contiguous():
                return False
            # roll of the flattened tensor (ATen's roll_common: contiguous().view(-1)).
            flat = self._new({"kind": "Reshape", "shape": [x.numel()]}, [self.rid[id(x)]], None, view=True,
                             label=self._label(ev, "roll"))
            self.ops[flat]["_event"] = ev.index
            rolled = self._roll_dims(ev, flat, [x.numel()], self._dtype(x), shifts, [0], None)
            self._new({"kind": "Reshape", "shape": list(out.shape)}, [rolled], out, view=True, event=ev,
                      label=self._label(ev, "roll"))
            return True
        if len(dims) != len(shifts):
            return False
        self._roll_dims(ev, self.rid[id(x)], list(x.shape), self._dtype(x), shifts, [d % x.dim() for d in dims], out)
        return True

    def _roll_dims(self, ev, u, shape, dtype, shifts, dims, out):
        """Rolls op u (of `shape`) along each of dims in turn: a Concat of two
        Slice views per dimension (a copy where the shift is a whole turn, as
        cat of the tensor and an empty piece); the last one produces `out`."""
        for j, (s, d) in enumerate(zip(shifts, dims)):
            last = j == len(dims) - 1
            n = shape[d]
            start = (n - s) % n
            made = out if last else None
            if start == 0:
                op = {"kind": "Reshape", "shape": list(shape), "copy": True, "dtype": dtype}
                u = self._new(op, [u], made, view=False, event=ev if last else None, label=self._label(ev, "roll"))
            else:
                pieces = []
                for a, b in ((start, n), (0, start)):
                    part = list(shape)
                    part[d] = b - a
                    p = self._new({"kind": "Slice", "axis": d, "start": a, "end": b, "step": 1, "shape": part}, [u],
                                  None, view=True, label=self._label(ev, "roll"))
                    self.ops[p]["_event"] = ev.index
                    pieces.append(p)
                op = {"kind": "Concat", "axis": d, "shape": list(shape), "dtype": dtype}
                u = self._new(op, pieces, made, view=False, event=ev if last else None, label=self._label(ev, "roll"))
            if not last:
                self.ops[u]["_event"] = ev.index
        return u
