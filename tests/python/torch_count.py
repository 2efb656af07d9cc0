"""PyTorch's own count of what a training step saves for backward, taken
independently of remat_capture: the unique storages of every tensor autograd
packs during forward and loss (saved_tensors_hooks), parameters, buffers and
the target left out. The bridge's tests compare remat's saved_bytes with it.

Under torch.autocast a lowered op (a Linear, a convolution) saves the 16-bit
copy of its weight that autocast casts (and caches for the step): memory the
step holds, but as many bytes as the weights in that dtype whatever the
strategy, so remat counts it with the weights, in the baseline
(docs/memory-model.md#mixed-precision-autocast). weight_casts=False leaves
those out too: a saved tensor (or a view of one) that autograd made by
_to_copy straight from a parameter (ToCopyBackward, whose next function
accumulates into that parameter's grad)."""
import torch


def storage(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def is_weight_cast(t, params):
    """t, or the tensor it views, is a cast of one of params (ids), as autograd recorded it."""
    base = t._base if t._base is not None else t
    fn = base.grad_fn
    if fn is None or not type(fn).__name__.startswith("ToCopyBackward") or len(fn.next_functions) != 1:
        return False
    source = getattr(fn.next_functions[0][0], "variable", None)
    return source is not None and id(source) in params


def torch_count(net, x, loss_fn, target, weight_casts=True):
    net.train()
    excluded = {storage(t).data_ptr() for t in list(net.parameters()) + list(net.buffers()) + [target]}
    params = {id(p) for p in net.parameters()}
    seen, casts = {}, set()

    def pack(t):
        s = storage(t)
        if s.data_ptr() not in excluded:
            seen[s.data_ptr()] = s.nbytes()
            if not weight_casts and is_weight_cast(t, params):
                casts.add(s.data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(net(x))
    loss.backward()
    return sum(n for k, n in seen.items() if k not in casts)
