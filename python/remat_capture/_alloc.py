"""One training step measured from the allocator's own events, the way
remat counts it: every allocation and free of the step's device, in order (on
CUDA the caching allocator's trace, torch.cuda.memory._record_memory_history;
on the CPU the profiler's allocation events, torch.profiler with
profile_memory=True), summed from the step's start (0: the parameters, the
caller's batch target, the loss's seed are allocated before it).

remat's baseline holds every parameter's gradient buffer and writes each
gradient into its buffer. PyTorch does not: the backward node makes the
gradient as a new tensor (the mm of a Linear's weight), and AccumulateGrad
(torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad) then
- steals it when .grad is None (it becomes .grad: no copy), or
- adds it into .grad in place when .grad is defined (`variable_grad +=
  new_grad`, the zero_grad(set_to_none=False) loop), so the new tensor is a
  transient of the parameter's size, alive from its node's output to the add.
So the step runs with .grad None (set_to_none, PyTorch 2's default) and the
storages that end as .grad are left out of the sum (their bytes are remat's
baseline), as is the loss (the caller's): what is left is what remat's peak
and forward-end count. grads="zeroed" runs the other loop and also says how
much of its peak is AccumulateGrad's transients (the gradients it added in
place, seen by hooks on the parameters).
"""
import torch

__all__ = ["allocator_step"]


def _ptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


def _nbytes(t):
    return t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else t.storage().nbytes()


class _CpuEvents:
    """The CPU allocator's events, from the profiler: (address, +bytes or -bytes)."""

    def __init__(self):
        from torch.profiler import ProfilerActivity, profile
        self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)

    def __enter__(self):
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        return False

    def events(self):
        found = []
        stack = list(self.prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            e = stack.pop()
            stack.extend(e.children)
            f = e.extra_fields
            if type(f).__name__ == "_ExtraFields_Allocation" and f.device.type == "cpu":
                found.append((e.start_time_ns, f.id, f.ptr, f.alloc_size))
        found.sort(key=lambda t: (t[0], t[1]))
        return [(ptr, size) for _, _, ptr, size in found]


class _CudaEvents:
    """The CUDA caching allocator's trace of this device: alloc and
    free_requested (when memory_allocated() drops), each free as large as its
    alloc (the trace may give the requested or the rounded size: the same one
    both ways)."""

    def __enter__(self):
        mem = torch.cuda.memory
        mem._record_memory_history(enabled=None)
        mem._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10_000_000)
        self.device = torch.cuda.current_device()
        self.first = len(mem._snapshot()["device_traces"][self.device])
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.trace = torch.cuda.memory._snapshot()["device_traces"][self.device][self.first:]
        torch.cuda.memory._record_memory_history(enabled=None)
        return False

    def events(self):
        out, size = [], {}
        for e in self.trace:
            if e["action"] == "alloc":
                size[e["addr"]] = e["size"]
                out.append((e["addr"], e["size"]))
            elif e["action"] == "free_requested" and e["addr"] in size:
                out.append((e["addr"], -size.pop(e["addr"])))
        return out


def _timeline(events, excluded):
    """The sum after each event, less the last allocation at each address of
    `excluded` (the storages that outlive the step: the gradients, the loss)
    and its free."""
    last = {}
    for i, (ptr, size) in enumerate(events):
        if size > 0 and ptr in excluded:
            last[ptr] = i
    skip = set(last.values())
    freed = set()
    run, sums = 0, []
    for i, (ptr, size) in enumerate(events):
        if i in skip:
            freed.add(ptr)
        elif size < 0 and ptr in freed:
            freed.discard(ptr)
        else:
            run += size
        sums.append(run)
    return sums


_MARK = 7_777_777  # bytes


def _transients(events, marks):
    """The events of the gradients AccumulateGrad added in place, as
    (alloc index, free index), and the indices of the marks' own events.
    marks: per hook call, in order, (the gradient's address, the mark's): the
    hook allocates and frees the mark at once, so its two events pin where
    the hook ran; the gradient is the last allocation at its address before.
    The mark's size is one no tensor of a step has (_MARK; on CUDA the trace
    may round it to 512 B)."""
    found, own, i = [], set(), 0
    sizes = (_MARK, -(-_MARK // 512) * 512)
    for gptr, mptr in marks:
        while not (events[i][0] == mptr and events[i][1] in sizes and events[i + 1] == (mptr, -events[i][1])):
            i += 1
        own |= {i, i + 1}
        a = max(j for j in range(i) if events[j][0] == gptr and events[j][1] > 0)
        f = next(j for j in range(i + 2, len(events)) if events[j][0] == gptr and events[j][1] < 0)
        found.append((a, f))
        i += 2
    return found, own


def allocator_step(model, make_input, loss_fn, module=None, grads="none"):
    """One training step of `model` (a module or remat_capture.apply's
    wrapper; `module`: the one whose parameters get gradients, default model)
    on make_input(), measured from the allocator (see the module docstring).
    grads="none": .grad set to None first, the gradients' storages left out;
    "zeroed": .grad allocated (if None) and zeroed in place, in the baseline.
    Returns {"peak", "forward_end", "transient", "peak_less_transients", "grads"}:
    bytes above the step's start, the loss left out; "peak_less_transients":
    the peak of the sum without the gradients AccumulateGrad adds in place
    (grads="zeroed"; with "none" there are none), "transient": how much they
    raise the peak."""
    module = module if module is not None else model
    params = [p for p in module.parameters() if p.requires_grad]
    cuda = params[0].device.type == "cuda"
    for p in params:
        if grads == "zeroed":
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad.zero_()
        else:
            p.grad = None
    marks = []

    def hook(g):  # before AccumulateGrad adds g into .grad: where, and when
        m = torch.empty(_MARK, dtype=torch.uint8, device=g.device)
        marks.append((_ptr(g), _ptr(m)))

    hooks = [p.register_hook(hook) for p in params] if grads == "zeroed" else []
    try:
        rec = _CudaEvents() if cuda else _CpuEvents()
        with rec:
            loss = loss_fn(model(make_input()))
        fwd = rec.events()
        seed = torch.ones_like(loss)  # the caller's, as the target is: before the backward's recording
        rec = _CudaEvents() if cuda else _CpuEvents()
        with rec:
            loss.backward(seed)
        events = fwd + rec.events()
    finally:
        for h in hooks:
            h.remove()
    excluded = {_ptr(loss)}
    if grads != "zeroed":
        excluded |= {_ptr(p.grad) for p in params if p.grad is not None}
    pairs, own = _transients(events, marks)
    events = [(ptr, 0 if i in own else size) for i, (ptr, size) in enumerate(events)]
    sums = _timeline(events, excluded)
    peak = max([0] + sums)
    delta = [0] * (len(events) + 1)  # the transients' bytes alive after each event
    for a, f in pairs:
        delta[a] += events[a][1]
        delta[f] -= events[a][1]
    alive, less = 0, 0
    for i, s in enumerate(sums):
        alive += delta[i]
        less = max(less, s - alive)
    return {"peak": peak, "forward_end": sums[len(fwd) - 1] if fwd else 0, "transient": peak - less,
            "peak_less_transients": less,
            "grads": {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}}
