"""PyTorch's own count of what a training step saves for backward, taken
independently of remat_capture: the unique storages of every tensor autograd
packs during forward and loss (saved_tensors_hooks), parameters, buffers and
the target left out. The bridge's tests compare remat's saved_bytes with it."""
import torch


def storage(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def torch_count(net, x, loss_fn, target):
    net.train()
    excluded = {storage(t).data_ptr() for t in list(net.parameters()) + list(net.buffers()) + [target]}
    seen = {}

    def pack(t):
        s = storage(t)
        if s.data_ptr() not in excluded:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(net(x))
    loss.backward()
    return sum(seen.values())
