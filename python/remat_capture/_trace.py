"""One training step of a module, recorded at the level PyTorch dispatches to
kernels: every aten op with its arguments and outputs (TorchDispatchMode),
every tensor autograd saves for backward (saved_tensors_hooks), and the module
each op ran in (forward hooks). The raw material of _build.py.

Why the dispatch level: it is below autograd, so composite functions
(F.linear, F.cross_entropy, matmul) arrive as the ops autograd records and
saves for (addmm, _log_softmax, nll_loss_forward, bmm), views arrive as views,
and nothing is guessed.

Why the order of events matters: autograd's kernel for an op saves its inputs
*before* it dispatches the op and its outputs *after*, so a saved tensor
belongs to the next op when it is one of that op's arguments and to the
previous op when it is one of that op's outputs (attribute_saves below).
"""
import torch

try:  # PyTorch 1.13 and 2.x
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover - older PyTorch
    TorchDispatchMode = None


# Ops whose autograd node keeps its outputs under their names in the schema
# (grad_fn._saved_output, _saved_logsumexp) instead of _saved_result0, ...:
# PyTorch 2.x's fused CPU attention keeps its output and logsumexp; the
# reductions and selections that return (values, indices) keep their indices
# (_saved_indices). Listed one by one so that no other op's attribution
# changes (embedding's node saves an *input* called indices).
# Ops that change a tensor's shape or strides in place (the tensor object stays,
# its metadata changes). PyTorch 1.13's GRU (and RNN) with batch_first ends in
# stack(...).transpose_(0, 1). The events before such an op recorded the
# tensor by reference, so the Builder, reading shapes after the step, would see
# the new metadata where the old one was (the stack's output [T, N, H] read as
# [N, T, H]): _Recorder gives them an alias frozen at the old metadata instead.
# Only the transposes: others (as_strided_, which adaptive pooling runs on its
# own output) the Builder reads as they are.
METADATA_INPLACE = {"transpose_", "t_", "swapaxes_", "swapdims_"}

NAMED_SAVED_OUTPUTS = {"_scaled_dot_product_flash_attention_for_cpu", "max", "min", "topk", "sort", "kthvalue",
                       "median", "nanmedian", "mode", "cummax", "cummin"}


def storage_of(t):
    """The storage a tensor's bytes live in (2.x: untyped_storage; 1.13: storage)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage()


def storage_key(t):
    """Identity of a storage while it is alive (every traced tensor is kept
    alive until the capture ends, so no address is reused meanwhile)."""
    return storage_of(t).data_ptr()


def storage_nbytes(t):
    return storage_of(t).nbytes()


class OpEvent:
    __slots__ = ("index", "func", "name", "args", "kwargs", "outputs", "module", "inside", "saves_output")

    def __init__(self, index, func, args, kwargs, out, module, inside=True):
        self.index = index
        self.func = func
        self.name = func.overloadpacket.__name__  # "addmm", "relu_", "native_batch_norm"
        self.args = args
        self.kwargs = kwargs
        if isinstance(out, torch.Tensor):
            self.outputs = [out]
        elif isinstance(out, (tuple, list)):
            self.outputs = list(out)
        else:
            self.outputs = []
        self.module = module
        self.inside = inside  # False: outside the module's forward (the loss function)
        self.saves_output = None  # per output: whether its autograd node keeps it (note_history)

    def note_history(self):
        """Which outputs this op's autograd node saves (grad_fn._saved_result,
        _saved_result0, ...; for NAMED_SAVED_OUTPUTS _saved_<the schema's
        return name>), read once autograd has set the outputs' history and
        before a later in-place op replaces it."""
        if self.saves_output is not None:
            return
        # One node for all outputs (non-differentiable ones have no grad_fn of their own).
        node = next((o.grad_fn for o in self.outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None), None)
        names = set(dir(node)) if node is not None else set()
        single = len(self.outputs) == 1
        flags = [("_saved_result" in names if single else f"_saved_result{j}" in names)
                 for j in range(len(self.outputs))]
        if self.name in NAMED_SAVED_OUTPUTS:
            # Either name: max() without a dim keeps _saved_result, max.dim _saved_indices.
            returns = [r.name for r in self.func._schema.returns]
            flags = [f or (j < len(returns) and bool(returns[j]) and f"_saved_{returns[j]}" in names)
                     for j, f in enumerate(flags)]
        self.saves_output = flags

    def tensor_args(self):
        """(position, tensor) of every tensor argument, lists flattened."""
        found = []
        for i, a in enumerate(list(self.args) + list(self.kwargs.values())):
            if isinstance(a, torch.Tensor):
                found.append((i, a))
            elif isinstance(a, (list, tuple)):
                found.extend((i, x) for x in a if isinstance(x, torch.Tensor))
        return found


class PackEvent:
    __slots__ = ("after", "tensor")

    def __init__(self, after, tensor):
        self.after = after  # index of the last OpEvent before this save (-1: none)
        self.tensor = tensor


class Recording:
    def __init__(self):
        self.ops = []
        self.packs = []
        self.module_stack = [""]

    def freeze(self, t):
        """Before t's metadata changes in place (METADATA_INPLACE): every earlier
        event and save that holds t gets an alias of t with its metadata as it is
        now (the same storage, so storage keys are unchanged), and that alias is
        returned, to be the in-place op's recorded input. The op's output stays t
        itself, as what follows reads it, so the op reads as its out-of-place
        form: a view of the alias."""
        alias = None

        def swap(x):
            nonlocal alias
            if x is t:
                if alias is None:
                    alias = t.as_strided(t.size(), t.stride(), t.storage_offset())
                return alias
            if isinstance(x, (list, tuple)) and any(y is t for y in x):
                return type(x)(swap(y) for y in x)
            return x

        for ev in self.ops:
            ev.outputs = [swap(o) for o in ev.outputs]
            ev.args = tuple(swap(a) for a in ev.args)
            ev.kwargs = {k: swap(v) for k, v in ev.kwargs.items()}
        for p in self.packs:
            p.tensor = swap(p.tensor)
        return t if alias is None else alias

    def attribute_saves(self):
        """[(op index, tensor)] for every saved tensor: the op whose autograd
        node saved it (see the module docstring). Between two ops, the saves
        of the first one's outputs come first; a tensor that is both its
        output and the next op's input belongs to the first op only when its
        node keeps that output (ReLU keeps its result, Add does not)."""
        result = []
        expected = {}
        for p in self.packs:
            k = p.after
            if k >= 0 and k not in expected:
                prev = self.ops[k]
                prev.note_history()
                expected[k] = [o for o, keeps in zip(prev.outputs, prev.saves_output) if keeps]
            mine = expected.get(k, [])
            hit = next((i for i, o in enumerate(mine) if o is p.tensor), None)
            if hit is not None:
                del mine[hit]
                result.append((k, p.tensor))
            elif k + 1 < len(self.ops):
                result.append((k + 1, p.tensor))
            else:
                result.append((max(k, 0), p.tensor))
        return result


if TorchDispatchMode is not None:
    class _Recorder(TorchDispatchMode):
        def __init__(self, rec):
            super().__init__()
            self.rec = rec

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            rec = self.rec
            if rec.ops:
                rec.ops[-1].note_history()
            recorded = args
            if func.overloadpacket.__name__ in METADATA_INPLACE and args and isinstance(args[0], torch.Tensor):
                recorded = (rec.freeze(args[0]),) + tuple(args[1:])
            out = func(*args, **kwargs)
            rec.ops.append(OpEvent(len(rec.ops), func, recorded, kwargs, out, rec.module_stack[-1],
                                   len(rec.module_stack) > 1))
            return out


def record(module, run_step):
    """Runs run_step() (forward and loss) with the recorders on; returns
    (Recording, run_step's result). The backward pass is the caller's."""
    if TorchDispatchMode is None:
        raise RuntimeError(
            f"PyTorch {torch.__version__} has no TorchDispatchMode (torch.utils._python_dispatch); "
            "remat_capture needs PyTorch 1.13 or later")
    rec = Recording()

    def pack(t):
        if rec.ops:
            rec.ops[-1].note_history()
        rec.packs.append(PackEvent(len(rec.ops) - 1, t))
        return t

    def unpack(t):
        return t

    handles = []
    names = {m: n for n, m in module.named_modules()}

    def pre(m, _inputs):
        rec.module_stack.append(names.get(m, rec.module_stack[-1]))

    def post(_m, _inputs, _output):
        rec.module_stack.pop()

    for m in names:
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            with _Recorder(rec):
                result = run_step()
        if rec.ops:
            rec.ops[-1].note_history()
    finally:
        for h in handles:
            h.remove()
    return rec, result
