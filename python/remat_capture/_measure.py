"""What PyTorch keeps during one training step, measured from PyTorch itself:
every storage an aten op makes (a TorchDispatchMode sees each op's outputs,
forward, recomputation and backward alike) is followed by a weak reference
(StorageWeakRef), so it counts exactly while PyTorch holds it. Parameters,
buffers and their gradients are left out (remat's baseline), and so is what
the step's caller holds apart from the loss (the target, the labels).

Figures, in bytes of unique storages:
- kept: alive when the forward pass (and the loss) has returned, the caller's
  reference to the input dropped: what autograd keeps for backward (the input
  too if autograd keeps it; the loss tensor, the caller's, left out);
- peak: the most alive after any op of the step (forward or backward),
  parameter gradients excluded;
  both with the 0-dim tensors autograd keeps that no op made (Python
  numbers wrapped as tensors, counted apart: _wrapped_scalars);
- recomputed: the ops checkpoint regions ran again during the backward pass
  (with remat_capture.apply's names: (aten overload, call)).
"""
import time

import torch

from . import _apply
from ._trace import storage_of

try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover
    TorchDispatchMode = object

try:
    from torch.multiprocessing.reductions import StorageWeakRef
except ImportError:  # pragma: no cover
    StorageWeakRef = None


_DETACH = torch.ops.aten.detach.default


def _ptr(t):
    return storage_of(t).data_ptr()


class _Entry:
    __slots__ = ("ref", "nbytes", "serial", "ptr")

    def __init__(self, t, serial):
        s = storage_of(t)
        self.ref = StorageWeakRef(s)
        self.nbytes = s.nbytes()
        self.ptr = s.data_ptr()
        self.serial = serial


class Tracker(TorchDispatchMode):
    def __init__(self, excluded):
        super().__init__()
        self.excluded = excluded  # storage pointers never counted (parameters, buffers)
        self.alive = []           # entries not yet seen expired
        self.by_ptr = {}          # storage pointer -> its latest entry
        self.serial = 0
        self.sizes = {}           # serial -> bytes, of every entry ever made
        self.samples = []         # per op: the serials alive after it ran
        self.backward = False
        self.recomputed = []      # (aten, call) of every op a recomputation ran

    def note(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        p = _ptr(t)
        if p == 0 or p in self.excluded:
            return
        e = self.by_ptr.get(p)
        if e is not None and not e.ref.expired():
            return
        e = _Entry(t, self.serial)
        self.serial += 1
        if e.nbytes == 0:
            return
        self.by_ptr[p] = e
        self.sizes[e.serial] = e.nbytes
        self.alive.append(e)

    def live(self):
        self.alive = [e for e in self.alive if not e.ref.expired()]
        return self.alive

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is _DETACH and not isinstance(out, torch.Tensor):
            # PyTorch 1.13 hands a detached wrapped number (a saved `x * 0.125`'s
            # 0.125, unpacked through saved_tensors_hooks) back to a dispatch
            # mode as a Python float, then refuses the float: the tensor is
            # returned instead (it is the same value; detach allocates nothing).
            out = args[0]
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            self.note(t)
        if self.backward and _apply.state.recomputing and _apply.state.current is not None:
            self.recomputed.append(_apply.state.current)
        self.samples.append([e.serial for e in self.live()])
        return out


class _Outputs(TorchDispatchMode):
    """The storages every op makes (for _wrapped_scalars)."""

    def __init__(self):
        super().__init__()
        self.ptrs = set()
        self.keep = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor):
                self.ptrs.add(_ptr(t))
                self.keep.append(t)  # alive until the pass ends: no pointer is reused meanwhile
        return out


def _wrapped_scalars(model, make_input, loss_fn):
    """Bytes of the 0-dim tensors autograd keeps that no aten op made: a
    Python number an op takes as a tensor (att * 0.125) is wrapped before
    the dispatch and reaches a TorchDispatchMode as a number, so the tracker
    cannot see it. Counted by saved_tensors_hooks in a forward pass of its
    own (hooks change when PyTorch frees saved outputs, so the measured pass
    has none); inside checkpoint regions the regions' hooks take the saves,
    so only what PyTorch really keeps is counted."""
    seen = {}
    outs = _Outputs()

    def pack(t):
        if t.dim() == 0:
            seen[_ptr(t)] = (storage_of(t).nbytes(), t)
        return t

    x = make_input()
    # remat_capture.apply's op-by-op replay packs with hooks of its own
    # (inner ones win): it shows this pack what it keeps as it is.
    _apply.state.outer_pack = pack
    try:
        with outs, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn(model(x))
    finally:
        _apply.state.outer_pack = None
    total = sum(n for p, (n, _) in seen.items() if p not in outs.ptrs and p != _ptr(x))
    del loss, seen, outs
    return total


def measure_step(model, make_input, loss_fn, module=None):
    """One training step of `model` (the module, or remat_capture.apply's
    wrapper of it) on make_input() with loss_fn(output); `module`: the one
    whose parameters and buffers are the baseline (default: model).
    Returns {"kept", "peak", "recomputed", "grads", "loss"}."""
    if StorageWeakRef is None:
        raise RuntimeError("this PyTorch has no StorageWeakRef (torch.multiprocessing.reductions)")
    module = module if module is not None else model
    params = list(module.parameters())
    scalars = _wrapped_scalars(model, make_input, loss_fn)
    for p in params:
        p.grad = None
    excluded = {_ptr(t) for t in params + list(module.buffers())}
    tr = Tracker(excluded)
    x = make_input()
    tr.note(x)

    _apply.state.measuring = True
    try:
        with tr:
            loss = loss_fn(model(x))
    finally:
        _apply.state.measuring = False
    del x  # PyTorch keeps the input only if it needs it
    # The loss is the caller's (a 0-dim view, which can hold a whole
    # buffer: 1.13's mse_loss), not kept for backward: left out throughout.
    held = tr.by_ptr.get(_ptr(loss))
    skip = {held.serial} if held is not None else set()
    kept_entries = [e for e in tr.live() if e.serial not in skip]
    kept = sum(e.nbytes for e in kept_entries) + scalars
    tr.samples.append([e.serial for e in kept_entries])
    tr.backward = True
    _apply.state.measuring = True
    try:
        with tr:
            loss.backward()
    finally:
        tr.backward = False
        _apply.state.measuring = False
    # Parameter gradients are the baseline: the storages that became .grad.
    grad_serials = set(skip)
    for p in params:
        if p.grad is not None:
            e = tr.by_ptr.get(_ptr(p.grad))
            if e is not None:
                grad_serials.add(e.serial)
    peak = scalars + max(sum(tr.sizes[s] for s in sample if s not in grad_serials) for sample in tr.samples)
    grads = {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}
    return {"kept": kept, "peak": peak, "recomputed": tr.recomputed, "grads": grads, "loss": float(loss.detach())}


def recomputed_ops(plan, recomputed):
    """The remat ops the recomputed aten calls stand for (a select is a
    Slice and a Reshape, a split one Slice per part)."""
    ops = {}
    for i, key in sorted(_apply.plan_keys(plan).items()):
        ops.setdefault(key, []).append(i)
    return [v for key in recomputed for v in ops.get(tuple(key), [])]


def timed_step(model, make_input, loss_fn, module=None, repeat=5):
    """The median wall time of `repeat` steps (forward, loss, backward), in seconds."""
    module = module if module is not None else model
    times = []
    for _ in range(repeat + 1):
        for p in module.parameters():
            p.grad = None
        x = make_input()
        t0 = time.perf_counter()
        loss_fn(model(x)).backward()
        times.append(time.perf_counter() - t0)
    times = sorted(times[1:])
    return times[len(times) // 2]
