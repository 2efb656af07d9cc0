"""remat's low-precision step against the module itself, shared by the checks
of 16-bit training (test_capture_pure16.py: pure bf16; test_zoo_autocast.py:
the zoo under torch.autocast).

remat's step comes from `remat run --dump` (read_dump): its weights, input,
labels or target, loss and each parameter's gradient. The module is run on
those weights and that input twice more: in float64 (the exact step, the
reference) and the way PyTorch itself trains it in 16 bits (the caller's
step). remat's 16-bit step must be as close to the exact one as PyTorch's own
is, within a factor 2 and one rounding of the 16-bit type at the tensor's
largest element: per gradient tensor

    max|remat − f64| ≤ 2·max|torch16 − f64| + u·max|f64|

(u the type's unit roundoff: 2⁻⁸ for bf16, 2⁻¹¹ for f16), and the loss
likewise. Two correct 16-bit steps round at different places (remat rounds
a sum PyTorch keeps in f32, or the other way round), so neither is the
other's bits; but each rounding costs at most u relative, and where
PyTorch's own error is tiny (a gradient that 16 bits pin down well) the u
term is one rounding of the largest element."""
import json
import struct

import torch

UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}  # the unit roundoff (half an ulp at 1)


def read_dump(path):
    """remat's safetensors dump as torch tensors (float64, BF16 included; labels,
    masks and integer inputs int64)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    kinds = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I32": torch.int32,
             "I64": torch.int64, "U8": torch.uint8}
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + e])
        x = torch.frombuffer(raw, dtype=kinds[t["dtype"]]).reshape(t["shape"]) if raw else \
            torch.zeros(t["shape"], dtype=kinds[t["dtype"]])
        out[name] = x.long() if not x.dtype.is_floating_point else x.double()
    return out


def parameter_map(doc, t):
    """remat's parameter tensors ("op.name") -> the module parameter each is, and
    what stops the module from running on remat's weights: a tensor that is no
    module parameter, or a module parameter remat holds several copies of (an
    RNN's hidden weights, one per step: remat draws each copy its own values,
    which no module parameter can take)."""
    mapped = {e["tensor"]: e["param"] for e in doc["parameters"]}
    dumped = sorted(k[len("param."):] for k in t if k.startswith("param."))
    problems = []
    if sorted(mapped) != dumped:
        problems.append(f"remat's parameter tensors {sorted(set(dumped) - set(mapped))} are no module parameter")
    copies = {}
    for tensor, pname in mapped.items():
        copies.setdefault(pname, []).append(tensor)
    shared = sorted(p for p, ts in copies.items() if len(ts) > 1)
    if shared:
        problems.append(f"remat holds {sum(len(copies[p]) for p in shared)} copies of {len(shared)} module "
                        f"parameters ({shared[0]}, ...), each with its own values")
    return mapped, problems


def load_weights(net, mapped, t):
    """Copies remat's weights into the module's parameters (in their dtype)."""
    params = dict(net.named_parameters())
    with torch.no_grad():
        for tensor, pname in mapped.items():
            params[pname].copy_(t["param." + tensor].reshape(params[pname].shape))


def bound_ratios(mapped, steps, unit):
    """How far remat's step is from the exact one, as a fraction of the bound
    (≤ 1 passes): (the loss's, the worst gradient's, where). steps: one
    (dump, exact, theirs) per seed, exact and theirs (loss, {param: gradient})
    of the float64 step and of PyTorch's 16-bit one on that dump's weights.
    Over several seeds the errors and the bounds are summed (each side of
    the bound summed over the seeds' steps): a 16-bit step's error in one
    gradient tensor is a few roundings' luck, so in one step remat's can be
    twice PyTorch's where PyTorch's was lucky, both correct; summed over
    seeds that luck evens out, while a defect (an extra rounding, a
    wrong dtype) costs remat on every seed."""
    loss_err = loss_bound = 0.0
    err, bound = {}, {}
    for t, (loss64, g64), (loss16, g16) in steps:
        loss_err += abs(float(t["loss"]) - loss64)
        loss_bound += 2 * abs(loss16 - loss64) + unit * abs(loss64)
        for tensor, pname in mapped.items():
            ref = g64[pname].reshape(-1)
            err[tensor] = err.get(tensor, 0.0) + (t["grad." + tensor].reshape(-1) - ref).abs().max().item()
            bound[tensor] = bound.get(tensor, 0.0) + 2 * (g16[pname].reshape(-1) - ref).abs().max().item() + \
                unit * ref.abs().max().item()
    worst, where = 0.0, ""
    for tensor, pname in mapped.items():
        ratio = err[tensor] / max(bound[tensor], 1e-30)
        if ratio > worst:
            worst, where = ratio, f"{tensor} ({pname})"
    return loss_err / max(loss_bound, 1e-30), worst, where
