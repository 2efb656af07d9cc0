#!/usr/bin/env python3
"""torch 2.4+'s nn.RMSNorm (and F.rms_norm) captured and run. On the CPU
F.rms_norm is a composite: pow, mean, add_ (eps, in place), rsqrt, mul, the
mul by the weight, and under a 16-bit input the casts to f32 and back; the
capture maps each to remat's ops (Pointwise, GlobalAvgPool, AddConst) with
what its autograd node saved. Models (tests/python/family_models.py's
Llama-style decoder with nn.RMSNorm in place of its written-out RMSNorm):

- llama_f32: the decoder in f32;
- llama_autocast: the same under torch.autocast("cpu", bfloat16), forward
  and loss (its residual stream, so every norm's input, stays f32);
- llama_no_affine: nn.RMSNorm(elementwise_affine=False), no weight;
- qk_norm_autocast: F.rms_norm called directly, eps left to its default, on
  bf16 query and key projections under autocast (a QK-norm): the upcast to
  f32, the f32 statistics, the cast back and a bf16·f32 weight product;
- on_input_f32 / on_input_bf16: nn.RMSNorm on the model's input (f32; pure
  bf16, whose norm casts to f32 and back), where autograd differentiates
  nothing before the weight and saves nothing for the statistics.

For each:
- the norm's aten ops are ops remat runs (no Generic op);
- remat's saved_bytes equals PyTorch's own count (saved_tensors_hooks,
  tests/python/torch_count.py; under autocast, its casts of the weights left
  out as the weights are);
- `remat run --strategy all` on the CPU: every strategy bit for bit
  store-all's, the tracked peak the predicted one;
- remat's step (`remat run --dump`) against the module itself on remat's
  weights, input and labels, the module's float64 step the reference: in
  bf16 (autocast, pure) remat's must be as close to it as PyTorch's own bf16
  step, within a factor 2 and one bf16 rounding of the tensor's largest
  element (test_capture_pure16.py's bound), the loss likewise; in f32 within
  torch_crosscheck.py's tolerance (1e-5·max + 1e-4·|ref| per gradient
  element, 1e-4 of the loss), and the step rebuilt in PyTorch from the dump
  agrees (torch_crosscheck.py --float32 4, as test_zoo.py).

A torch without nn.RMSNorm (1.13) skips, exit 77; tools/torch2-check.sh sets
REMAT_REQUIRE_TORCH2=1, where that is a failure.

  test_capture_rmsnorm.py --remat PATH --out DIR"""
import copy
import os
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import remat_capture  # noqa: E402
import family_models  # noqa: E402
from harness import check, crosscheck, not_bitwise, not_exact, parse_args, remat, run_every_strategy, simulated, summary  # noqa: E402
from test_capture_pure16 import read_dump  # noqa: E402
from torch_count import torch_count  # noqa: E402

# bf16's unit roundoff (test_capture_pure16.py's bound).
UNIT = {"bf16": 2.0 ** -8}
# What F.rms_norm records on the CPU (torch 2.6), whatever the precision.
COMPOSITE = {"pow", "mean", "add_", "rsqrt", "mul"}


class Autocast(nn.Module):
    """net's forward under torch.autocast("cpu", bfloat16) while `on` (off:
    the float64 reference, which autocast would leave alone anyway)."""

    def __init__(self, net):
        super().__init__()
        self.net, self.on = net, True

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.on):
            return self.net(x)


def rms_norm(d, **kw):
    """nn.RMSNorm with a weight away from ones (the module starts at ones,
    which would hide a weight applied wrongly)."""
    n = nn.RMSNorm(d, **kw)
    if n.weight is not None:
        with torch.no_grad():
            n.weight.add_(0.1 * torch.randn(d))
    return n


class QkNorm(nn.Module):
    """A block that normalises its query and key heads (Qwen3, OLMo 2) with
    F.rms_norm called directly, eps its default (f32's machine epsilon)."""

    def __init__(self, d=16, heads=2, classes=5):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.q_w = nn.Parameter(1 + 0.1 * torch.randn(self.hd))
        self.k_w = nn.Parameter(1 + 0.1 * torch.randn(self.hd))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        q = F.rms_norm(q, (self.hd,), self.q_w)
        k = F.rms_norm(k, (self.hd,), self.k_w)
        att = torch.softmax(q @ k.transpose(-2, -1) / self.hd ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.head(y.mean(1))


class OnInput(nn.Module):
    """nn.RMSNorm first, on the model's input (nothing before it needs a gradient)."""

    def __init__(self, d=16, classes=5):
        super().__init__()
        self.norm = rms_norm(d)
        self.fc = nn.Linear(d, 32)
        self.norm2 = rms_norm(32)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.norm2(F.silu(self.fc(self.norm(x)))).mean(1))


def models():
    """(name, module, input, labels, precision: f32, autocast or bf16 (pure))."""
    torch.manual_seed(0)
    ids, lm_labels = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (16,))
    yield "llama_f32", family_models.Llama(norm=lambda d: rms_norm(d, eps=1e-6)), ids, lm_labels, "f32"
    yield "llama_autocast", Autocast(family_models.Llama(norm=lambda d: rms_norm(d, eps=1e-6))), ids, lm_labels, \
        "autocast"
    yield "llama_no_affine", family_models.Llama(norm=lambda d: rms_norm(d, eps=1e-6, elementwise_affine=False)), \
        ids, lm_labels, "f32"
    x, labels = torch.randn(2, 6, 16), torch.randint(0, 5, (2,))
    yield "qk_norm_autocast", Autocast(QkNorm()), x, labels, "autocast"
    yield "on_input_f32", OnInput(), x, labels, "f32"
    yield "on_input_bf16", OnInput().to(torch.bfloat16), x.to(torch.bfloat16), labels, "bf16"


def loss_of(precision, labels):
    """Cross-entropy over the labels: under autocast inside it (f32 log-probabilities,
    as PyTorch computes them there), on f32 logits for a pure bf16 module."""
    def loss_fn(out):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast"):
            return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), labels)
    return loss_fn


def saved_count(net, x, loss_fn, labels, precision):
    """PyTorch's count; under autocast its casts of the weights are left out,
    as the weights are (the cast of a parameter: ToCopyBackward0 on the
    parameter's AccumulateGrad, or a view of it), which torch_count would keep."""
    if precision != "autocast":
        return torch_count(copy.deepcopy(net), x, loss_fn, labels)
    net = copy.deepcopy(net)
    params = {id(p) for p in net.parameters()}
    excluded = {t.untyped_storage().data_ptr() for t in list(net.parameters()) + list(net.buffers()) + [labels]}
    seen = {}

    def weight_cast(t):  # the cast, or a view of it (mm keeps the transposed weight)
        g = (t._base if t._base is not None else t).grad_fn
        if g is None or type(g).__name__ != "ToCopyBackward0":
            return False
        src = g.next_functions[0][0]
        return src is not None and id(getattr(src, "variable", None)) in params

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in excluded and not weight_cast(t):
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(net(x))
    loss.backward()
    return sum(seen.values())


def step(net, x, labels, precision, dtype=None):
    """The module's training step: in float64 (dtype), or as the model trains
    (precision); the loss and each parameter's gradient, float64."""
    net = copy.deepcopy(net)
    if isinstance(net, Autocast):
        net.on = dtype is None
    if dtype is not None:
        net = net.to(dtype)
        x = x.to(dtype) if x.is_floating_point() else x
    net.train()
    net.zero_grad()
    loss = loss_of(precision if dtype is None else "f32", labels)(net(x))
    loss.backward()
    return loss.item(), {k: p.grad.double() for k, p in net.named_parameters()}


def check_against_module(name, net, doc, t, precision):
    """remat's dumped step against the module's, float64 the reference."""
    mapped = {e["tensor"]: e["param"] for e in doc["parameters"]}
    dumped = sorted(k[len("param."):] for k in t if k.startswith("param."))
    check(sorted(mapped) == dumped, f"{name}: each of remat's {len(dumped)} parameter tensors is a module parameter")
    params = dict(net.named_parameters())
    check(sorted(set(mapped.values())) == sorted(params),
          f"{name}: remat's parameters are the module's {len(params)} ({sorted(set(mapped.values()))})")
    net = copy.deepcopy(net)
    params = dict(net.named_parameters())
    with torch.no_grad():
        for tensor, pname in mapped.items():
            params[pname].copy_(t["param." + tensor].reshape(params[pname].shape))
    x, labels = t["input"], t["labels"]
    x = x.to(next(net.parameters()).dtype) if x.is_floating_point() else x
    loss64, g64 = step(net, x, labels, precision, torch.float64)
    loss_p, g_p = step(net, x, labels, precision)
    loss = float(t["loss"])
    if precision == "f32":
        # float32: torch_crosscheck.py's tolerance (1e-4 of the loss; per gradient
        # element 1e-5 of the tensor's largest plus 1e-4 of its own): PyTorch's
        # own f32 error can be near 0 by luck, no scale for remat's.
        bound = 1e-4 * abs(loss64)
    else:
        bound = 2 * abs(loss_p - loss64) + UNIT["bf16"] * abs(loss64)
    check(abs(loss - loss64) <= bound,
          f"{name}: loss remat {loss:.9g}, exact {loss64:.9g}, PyTorch {loss_p:.9g} (|remat − exact| "
          f"{abs(loss - loss64):.3g} ≤ {bound:.3g})")
    worst, where = 0.0, ""
    for tensor, pname in mapped.items():
        ref = g64[pname].reshape(-1)
        mine = t["grad." + tensor].reshape(-1)
        theirs = g_p[pname].reshape(-1)
        if precision == "f32":
            bound = 1e-5 * ref.abs().max() + 1e-4 * ref.abs()
            ratio = ((mine - ref).abs() / bound.clamp_min(1e-30)).max().item()
        else:
            bound = 2 * (theirs - ref).abs().max().item() + UNIT["bf16"] * ref.abs().max().item()
            ratio = (mine - ref).abs().max().item() / max(bound, 1e-30)
        if ratio > worst:
            worst, where = ratio, f"{tensor} ({pname})"
    within = "within 1e-5·max + 1e-4·|ref| of" if precision == "f32" else \
        f"as close as PyTorch's {precision} step to"
    check(worst <= 1.0, f"{name}: every gradient {within} the exact step (worst {worst:.3f} of the bound, at {where})")


def main():
    args = parse_args()
    if not hasattr(nn, "RMSNorm"):
        why = f"torch {torch.__version__} has no nn.RMSNorm (2.4+)"
        print(("FAIL: " if os.environ.get("REMAT_REQUIRE_TORCH2") == "1" else "SKIP: ") + why)
        return 1 if os.environ.get("REMAT_REQUIRE_TORCH2") == "1" else 77
    for name, net, x, labels, precision in models():
        net.train()
        loss_fn = loss_of(precision, labels)
        want = saved_count(net, x, loss_fn, labels, precision)
        doc = remat_capture.capture(copy.deepcopy(net), x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        ops = doc["ops"]
        generic = [op.get("comment") for op in ops if op["kind"] == "Generic"]
        check(not generic, f"{name}: every op has a kind remat runs (Generic: {generic})")
        recorded = {op["torch"]["aten"].split(".")[1] for op in ops if "aten" in op["torch"]}
        check(COMPOSITE <= recorded, f"{name}: the capture saw F.rms_norm's composite ({sorted(recorded)})")
        model = simulated(args, name, path, want)
        if model is None:
            continue
        why = [ln.strip() for ln in remat(args, "model", "--model", path).stdout.splitlines()
               if "simulate-only" in ln or "saved set" in ln][:3]
        check(model["executable"], f"{name}: executable ({why})")
        if not model["executable"]:
            continue
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            check(not not_bitwise(res), f"{name}: {len(res)} strategies bit-identical to store-all "
                                        f"(not: {not_bitwise(res)})")
            check(not not_exact(res), f"{name}: tracked peak == predicted under every strategy (not: {not_exact(res)})")
        if precision == "f32":
            cross = crosscheck(args, path, "4")
            check(cross.returncode == 0, f"{name}: PyTorch autograd on remat's dump agrees "
                                         f"({(cross.stdout + cross.stderr).strip()[-300:]})")
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "dump")
            d = remat(args, "run", "--model", path, "--strategy", "sqrt", "--repeat", "1", "--backend", "cpu",
                      "--seed", "3", "--dump", dump)
            check(d.returncode == 0, f"{name}: remat run --dump exits 0 ({d.stderr.strip()[:300]})")
            if d.returncode == 0:
                check_against_module(name, net, doc, read_dump(os.path.join(dump, "tensors.safetensors")), precision)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
