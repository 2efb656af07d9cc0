"""A checkpoint-set plan applied op by op, where no checkpoint region can hold
a phase (a phase that cuts a residual block: its ops are no module's and no run
of nn.Sequential children, and a region around them would also run an Add
that remat neither keeps nor recomputes).

This is the machinery non-reentrant torch.utils.checkpoint is built on,
saved_tensors_hooks, at the grain of remat's ops instead of a region's:

- forward: a TorchDispatchMode names each aten call as the capture did
  (overload, call). The calls of ops remat recomputes are recorded (the
  overload and its arguments; an argument another recomputed call made is
  recorded as a reference to it, anything else is held). When autograd saves
  a tensor whose storage a recomputed call made, the pack hook stores a
  handle instead, so PyTorch frees the tensor as remat does;
- backward: the first unpack of a phase's handle replays that phase's
  recorded calls, in order, under no_grad (remat's phase recomputes its ops
  when its backward begins); each value is dropped when the last saved
  tensor that needs it has been unpacked, or at once if none does.

So PyTorch keeps exactly what remat keeps: the kept ops' outputs its autograd
saves, and the kept inputs of recomputed ops (held by the records), which
remat keeps as checkpoints."""
import torch

from . import _apply
from ._trace import storage_of

try:  # PyTorch 1.13 and 2.x
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover
    TorchDispatchMode = object

try:
    from torch.multiprocessing.reductions import StorageWeakRef
except ImportError:  # pragma: no cover
    StorageWeakRef = None

from torch.utils._mode_utils import no_dispatch
from torch.utils._pytree import tree_flatten, tree_unflatten

# Ops that write their buffer arguments (batch norm's running statistics):
# a replay gets none where the schema allows it (training batch norm then
# normalizes as before and updates nothing) and copies otherwise, so the
# statistics are updated once per step, as without the plan.
_WRITES_BUFFERS = ("batch_norm",)
# A replay draws new random numbers: such an op cannot be recomputed so.
_RANDOM = _apply.RANDOM


# remat's compressed checkpoints as casts (docs/memory-model.md: bf16 and f16
# codes of an f32 tensor, 2 bytes a value). int8 (codes and a scale) has no
# single cast: refused.
_CASTS = {"bf16": torch.bfloat16, "f16": torch.float16}


def _cast(name):
    dtype = _CASTS[name]
    return (lambda t: t.to(dtype)), (lambda c: c.to(torch.float32))


def _in_place(aten):
    """aten.add_.Tensor, aten.relu_.default: the op writes its first input."""
    parts = aten.split(".")
    return len(parts) >= 2 and parts[1].endswith("_") and not parts[1].startswith("_")


def check_plan(plan):
    """PlanError when a checkpoint-set or compress plan cannot be replayed op by op."""
    ops = plan["ops"]
    strategy = plan.get("strategy")
    for op in ops:
        # An in-place op (torchvision's `out += identity`, ReLU(inplace=True))
        # leaves its result in its input's storage: a replay can make it again
        # only from that input made again too.
        if op["phase"] >= 0 and _in_place(op.get("aten") or "") and op.get("inputs"):
            u = op["inputs"][0]
            if ops[u]["phase"] < 0:
                raise _apply.PlanError(
                    f"'{strategy}' recomputes {op['name']} (op {op['id']}, {op['aten']}) but not "
                    f"{ops[u]['name']} (op {u}), whose storage it overwrites: after the forward pass that storage "
                    "holds the in-place op's result, so a replay cannot make it again. Make the op out of place "
                    "(out = out + identity; ReLU(inplace=False)) and capture again, or choose another strategy")
        if op.get("compress"):
            if op["compress"] not in _CASTS:
                raise _apply.PlanError(
                    f"'{strategy}' keeps {op['name']} (op {op['id']}) as {op['compress']}: codes and a scale, which "
                    "no single cast in a saved_tensors_hooks pack makes (bf16 and f16 plans apply)")
            if op["phase"] >= 0:
                raise _apply.PlanError(f"'{strategy}' both converts and recomputes {op['name']} (op {op['id']})")
            if not op.get("aten") and op["id"] != 0:
                raise _apply.PlanError(f"'{strategy}' converts {op['name']} (op {op['id']}), which no aten op made")
        if op["phase"] < 0:
            continue
        aten = op.get("aten") or ""
        if any(w in aten for w in _RANDOM):
            raise _apply.PlanError(f"'{strategy}' recomputes {op['name']} (op {op['id']}, {aten}), which draws "
                                   "random numbers: a replay would draw others")
        if op["keep"]:
            raise _apply.PlanError(f"'{strategy}' both keeps and recomputes {op['name']} (op {op['id']})")
        for u in op.get("inputs", []):
            if (not ops[u]["keep"] and ops[u]["phase"] < 0 and not ops[u].get("compress")
                    and ops[u]["kind"] != "Input"):
                raise _apply.PlanError(
                    f"'{strategy}' recomputes {op['name']} (op {op['id']}) in phase {op['phase']} from "
                    f"{ops[u]['name']} (op {u}), which it neither keeps nor recomputes")


class _Ref:
    """An argument made by recorded call `idx` (output `k`), seen with this view."""
    __slots__ = ("idx", "k", "view")

    def __init__(self, idx, k, view):
        self.idx, self.k, self.view = idx, k, view


class _Handle(_Ref):
    """What autograd holds instead of a recomputed tensor."""
    __slots__ = ("phase",)

    def __init__(self, idx, k, view, phase):
        super().__init__(idx, k, view)
        self.phase = phase


class _Scalar:
    """What autograd holds instead of a Python number an op took as a tensor
    (a wrapped number: `att * 0.125`'s 0.125, saved by the mul). No op made
    it, so which op saves it is known only when that op reaches the dispatch
    (autograd saves inputs before): if remat recomputes the op, the number
    is dropped and comes back with the op's phase, as remat recomputes the
    op for it (its aux); else it is kept as it is."""
    __slots__ = ("t", "value", "dtype", "phase")

    def __init__(self, t):
        self.t, self.value, self.dtype, self.phase = t, None, None, None


class _Packed:
    """What autograd (or a recorded call) holds instead of a checkpoint remat
    keeps converted: the converted copy's key, and the view seen."""
    __slots__ = ("key", "view")

    def __init__(self, key, view):
        self.key, self.view = key, view


class _Call:
    __slots__ = ("func", "key", "call", "phase", "flat", "spec", "clone")

    def __init__(self, func, key, call, phase, flat, spec, clone):
        self.func, self.key, self.call, self.phase = func, key, call, phase
        self.flat, self.spec, self.clone = flat, spec, clone


def _meta(t):
    return (tuple(t.size()), tuple(t.stride()), t.storage_offset())


class _Step(TorchDispatchMode):
    """One forward pass and its backward: the records, the handles, the replays."""

    def __init__(self, phases, buffers, convert=None):
        super().__init__()
        self.phases = phases        # (aten, call) -> phase, of the recomputed calls
        # (aten, call) -> (pack, unpack) of the ops whose outputs remat keeps
        # converted (compress: a cast to bf16 or f16 and back).
        self.convert = convert or {}
        self.cowner = {}            # storage pointer -> (weak ref, key, the output's view, (pack, unpack))
        self.packed = {}            # key -> the converted copy, until it is converted back
        self.unpacked = {}          # key -> the value converted back, until its last reader
        self.crefs = {}             # key -> handles and records that will read it
        self.paused = 0             # above zero while this class's own ops run (not the module's)
        self.unconvert = {}         # key -> how its converted copy is converted back
        self.buffers = buffers      # storage pointers of the module's buffers
        self.counts = {}
        self.calls = []             # recorded calls, in forward order
        self.owner = {}             # storage pointer -> (weak ref, recorded idx, output k)
        self.refs = {}              # (recorded idx, output k) -> handles not yet unpacked
        self.cache = {}             # (recorded idx, output k) -> that output of its replay
        self.done = set()           # phases replayed
        self.readers = None         # (recorded idx, output k) -> recorded calls yet to read it
        self.views = {}             # (storage pointer, view) -> (weak ref, recorded idx, output k)
        self.made0 = {}             # storage pointer -> weak ref, of every 0-dim op output
        self.pending = []           # _Scalar packs whose op has not reached the dispatch yet

    # ---- forward -------------------------------------------------------------------------
    def _made_by(self, t):
        """(idx, k) of the recorded call whose output owns t's storage, or None."""
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return None
        s = storage_of(t)
        e = self.owner.get(s.data_ptr())
        if e is None or e[0].expired():
            return None
        return e[1], e[2]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        key = _apply._name(func)
        call = self.counts.get(key, 0)
        self.counts[key] = call + 1
        phase = self.phases.get((key, call))
        self.settle(phase)
        if phase is not None:
            clone = []
            if any(w in key for w in _WRITES_BUFFERS):
                for p, (a, arg) in enumerate(zip(args, func._schema.arguments)):
                    if isinstance(a, torch.Tensor) and storage_of(a).data_ptr() in self.buffers:
                        clone.append((p, isinstance(arg.type, torch._C.OptionalType)))
            flat, spec = tree_flatten((args, kwargs))
            rec = []
            for a in flat:
                made = self._made_by(a)
                conv = None if made else self._converted(a)
                rec.append(_Ref(made[0], made[1], _meta(a)) if made else self._pack_converted(a, conv) if conv
                           else a)
            self.calls.append(_Call(func, key, call, phase, rec, spec, clone))
            ins = {storage_of(a).data_ptr() for a in flat if isinstance(a, torch.Tensor)}
        out = func(*args, **kwargs)
        if phase is None and _in_place(key) and args and isinstance(args[0], torch.Tensor):
            # A recomputed op's storage overwritten by one that is not: it no
            # longer holds what a replay makes, so from now on it is held as it is.
            ptr = storage_of(args[0]).data_ptr()
            self.owner.pop(ptr, None)
            for v in [v for v in self.views if v[0] == ptr]:
                del self.views[v]
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.dim() == 0:
                s = storage_of(t)
                self.made0[s.data_ptr()] = StorageWeakRef(s)
        conv = self.convert.get((key, call))
        if conv is not None:
            # A(v) only: a batch norm's statistics (its aux) stay as they are, as in remat.
            first = out[0] if isinstance(out, (tuple, list)) else out
            if isinstance(first, torch.Tensor):
                self.register_converted(first, (key, call, 0), conv)
        if phase is not None:
            idx = len(self.calls) - 1
            # A view's storage is its input's: it stays that input's.
            for k, t in enumerate(out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and self._made_by(t) is None:
                    s = storage_of(t)
                    if s.data_ptr() in ins:
                        # A view remat recomputes of a storage it keeps: the
                        # same bytes either way, but saved as this view it is
                        # made again with its phase, as remat counts it.
                        self.views[(s.data_ptr(), _meta(t))] = (StorageWeakRef(s), idx, k)
                    elif s.data_ptr() != 0:
                        self.owner[s.data_ptr()] = (StorageWeakRef(s), idx, k)
        return out

    def settle(self, phase):
        """The op about to run saved the pending numbers: dropped if remat recomputes it."""
        for h in self.pending:
            if phase is None:
                if _apply.state.outer_pack is not None:
                    _apply.state.outer_pack(h.t)
            else:
                # Read past the dispatch modes: PyTorch 1.13 would hand them
                # the wrapped number as a Python float, which they cannot return.
                with no_dispatch():
                    h.value = h.t.tolist()
                h.dtype, h.phase, h.t = h.t.dtype, phase, None
        self.pending = []

    def _wrapped(self, t):
        if t.dim() != 0 or t.device.type != "cpu":
            return False
        s = storage_of(t)
        ref = self.made0.get(s.data_ptr())
        return ref is None or ref.expired()

    # ---- checkpoints kept converted ----------------------------------------------------------
    def register_converted(self, t, key, conv):
        s = storage_of(t)
        self.cowner[s.data_ptr()] = (StorageWeakRef(s), key, _meta(t), conv)

    def _converted(self, t):
        if not isinstance(t, torch.Tensor) or not self.cowner:
            return None
        e = self.cowner.get(storage_of(t).data_ptr())
        return None if e is None or e[0].expired() else e

    def _pack_converted(self, t, e):
        """The handle of t, a view of a checkpoint remat keeps converted; the
        conversion is made at the first (remat converts after the forward
        pass's last read; PyTorch frees the original after it too)."""
        _, key, view, conv = e
        if key not in self.packed and key not in self.unpacked:
            self.paused += 1
            try:
                with torch.no_grad():
                    whole = t if _meta(t) == view else t.as_strided(*view)
                    self.packed[key] = conv[0](whole)
            finally:
                self.paused -= 1
        self.unconvert[key] = conv[1]
        self.crefs[key] = self.crefs.get(key, 0) + 1
        return _Packed(key, _meta(t))

    def _unpack_converted(self, h):
        """Converted back at the first read (remat's decompress, which frees
        the converted copy), kept until the last."""
        if h.key not in self.unpacked:
            with torch.no_grad():
                self.unpacked[h.key] = self.unconvert[h.key](self.packed.pop(h.key))
        t = self.unpacked[h.key]
        if _meta(t) != h.view:
            with torch.no_grad():
                t = t.as_strided(*h.view)
        self.crefs[h.key] -= 1
        if self.crefs[h.key] <= 0:
            del self.unpacked[h.key]
        return t

    def pack(self, t):
        conv = self._converted(t)
        if conv is not None:
            return self._pack_converted(t, conv)
        made = self._made_by(t)
        if made is None and isinstance(t, torch.Tensor):
            e = self.views.get((storage_of(t).data_ptr(), _meta(t)))
            if e is not None and not e[0].expired():
                made = e[1], e[2]
        if made is None:
            if self._wrapped(t):
                h = _Scalar(t)
                self.pending.append(h)
                return h
            if _apply.state.outer_pack is not None:
                _apply.state.outer_pack(t)
            return t
        self.refs[made] = self.refs.get(made, 0) + 1
        return _Handle(made[0], made[1], _meta(t), self.calls[made[0]].phase)

    # ---- backward ------------------------------------------------------------------------
    def unpack(self, h):
        if isinstance(h, _Packed):
            return self._unpack_converted(h)
        if isinstance(h, _Scalar):
            if h.t is not None:
                return h.t
            if h.phase not in self.done:
                self._replay(h.phase)
            return torch.tensor(h.value, dtype=h.dtype)
        if not isinstance(h, _Handle):
            return h
        key = (h.idx, h.k)
        if key not in self.cache:
            if h.phase in self.done:
                raise RuntimeError("remat_capture.apply: a phase's saved tensors were unpacked again after its "
                                   "values were dropped (a second backward through one forward pass?); "
                                   "the plan replays each phase once, as remat's schedule does")
            self._replay(h.phase)
        v = self._view(h)
        self.refs[key] -= 1
        if self.refs[key] <= 0:
            del self.cache[key]
        return v

    def _view(self, r):
        t = self.cache[(r.idx, r.k)]
        if _meta(t) == r.view:
            return t
        _apply.state.current = None  # a view of a replayed value, not an op remat recomputes
        with torch.no_grad():
            return t.as_strided(*r.view)

    def _replay(self, phase):
        if self.readers is None:
            # How many recorded calls read each output, over every phase: a
            # value one phase recomputes may be read by a later one (optimal
            # keeps some from phase to phase), and stays until its last reader.
            self.readers = {}
            for c in self.calls:
                for a in c.flat:
                    if isinstance(a, _Ref):
                        self.readers[(a.idx, a.k)] = self.readers.get((a.idx, a.k), 0) + 1
        mine = [i for i, c in enumerate(self.calls) if c.phase == phase]
        # A phase reading what an earlier one recomputes, before PyTorch's
        # backward has asked for that one: that one first.
        for i in mine:
            for a in self.calls[i].flat:
                if isinstance(a, _Ref) and self.calls[a.idx].phase not in self.done | {phase}:
                    self._replay(self.calls[a.idx].phase)

        # Each output is dropped after its last reader unless a saved tensor
        # needs it (one nothing reads, such as the normalized output of a
        # batch norm recomputed for its statistics, goes at once), as remat
        # frees each tensor after its last use.
        def drop(key):
            if self.readers.get(key, 0) <= 0 and self.refs.get(key, 0) <= 0:
                self.cache.pop(key, None)

        _apply.state.recomputing += 1
        try:
            with torch.no_grad():
                for i in mine:
                    c = self.calls[i]
                    flat = [self._view(a) if isinstance(a, _Ref) else self._unpack_converted(a)
                            if isinstance(a, _Packed) else a for a in c.flat]
                    args, kwargs = tree_unflatten(flat, c.spec)
                    if c.clone:
                        args = list(args)
                        for p, optional in c.clone:
                            args[p] = None if optional else args[p].clone()
                    _apply.state.current = (c.key, c.call)
                    out = c.func(*args, **kwargs)
                    _apply.state.current = None
                    del flat, args, kwargs
                    outs = out if isinstance(out, (tuple, list)) else [out]
                    del out
                    for k, t in enumerate(outs):
                        if isinstance(t, torch.Tensor):
                            self.cache[(i, k)] = t
                    del outs, t
                    for a in c.flat:
                        if isinstance(a, _Ref):
                            self.readers[(a.idx, a.k)] -= 1
                            drop((a.idx, a.k))
                    for key in [key for key in self.cache if key[0] == i]:
                        drop(key)
                    # The phase's inputs are no longer held for it: remat
                    # frees a checkpoint after the last recomputation that reads it.
                    c.flat = None
        finally:
            _apply.state.recomputing -= 1
            _apply.state.current = None
        self.done.add(phase)


class Replayed(torch.nn.Module):
    """The module with the plan replayed op by op while it runs (see the module docstring)."""

    def __init__(self, module, plan, reason):
        super().__init__()
        self.module = module
        self.plan = plan
        self.reason = reason  # why no checkpoint region could hold it
        self.selective = False
        keys = _apply.plan_keys(plan)  # a batch norm is named alike on every device
        self.phases = {keys[op["id"]]: op["phase"] for op in plan["ops"] if op["phase"] >= 0 and op.get("aten")}
        self.regions = sorted(set(self.phases.values()))
        self.convert = {keys[op["id"]]: _cast(op["compress"]) for op in plan["ops"]
                        if op.get("compress") and op.get("aten")}
        self.convert_input = _cast(plan["ops"][0]["compress"]) if plan["ops"][0].get("compress") else None

    def describe(self):
        n = len([op for op in self.plan["ops"] if op["phase"] >= 0])
        c = [op for op in self.plan["ops"] if op.get("compress")]
        casts = (f"; {len(c)} checkpoints kept as {c[0]['compress']} casts" if c else "")
        return (f"{self.plan['strategy']}: {len(self.regions)} phases replayed op by op with saved_tensors_hooks "
                f"({n} ops recomputed{casts}; no checkpoint region holds them: {self.reason})")

    def forward(self, *args, **kwargs):
        buffers = {storage_of(b).data_ptr() for b in self.module.buffers()}
        step = _Step(self.phases, buffers, self.convert)
        if self.convert_input is not None and args and isinstance(args[0], torch.Tensor):
            step.register_converted(args[0], ("input", 0, 0), self.convert_input)
        with step, torch.autograd.graph.saved_tensors_hooks(step.pack, step.unpack):
            out = self.module(*args, **kwargs)
            step.settle(None)
        return out
