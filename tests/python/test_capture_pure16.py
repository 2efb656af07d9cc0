#!/usr/bin/python3
"""Models trained in pure bf16 (`model.to(torch.bfloat16)`, no autocast),
captured on the CPU: a LayerNorm MLP, CNNs with GroupNorm, BatchNorm and
InstanceNorm (a BatchNorm of one sample in PyTorch), and with PyTorch 2.x an
attention block through F.scaled_dot_product_attention (its fused CPU
kernel on bf16; 1.13 has none: that model is skipped, a failure under
REMAT_REQUIRE_TORCH2=1).
PyTorch's CPU norms keep their statistics (mean and rstd, or the batch mean
and inverse std) in bf16, which the capture records (aux: 2 bytes a
statistic) and remat runs (docs/memory-model.md#mixed-precision-autocast).
For each model:

- every norm's aux holds its statistics in bf16, remat's saved_bytes equals
  PyTorch's own count (saved_tensors_hooks), and the file is executable;
- `remat run --strategy all` on the CPU: each strategy bit for bit
  store-all's, the tracked peak the predicted one;
- remat's sqrt step (`remat run --dump`) against the module itself on
  remat's weights, input and labels: the exact step (float64) is the
  reference, and remat's bf16 step must be as close to it as PyTorch's own
  bf16 step on the CPU is (module.to(bfloat16), the weights rounded), within
  a factor 2 and one bf16 rounding of the tensor's largest element: per
  gradient tensor, max|remat − f64| ≤ 2·max|torch_bf16 − f64| + 2⁻⁸·max|f64|;
  the loss likewise.

  test_capture_pure16.py --remat PATH --out DIR

Exit 77 (CTest skip) without torch."""
import copy
import json
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
from harness import check, not_bitwise, not_exact, parse_args, remat, run_every_strategy, summary  # noqa: E402
from step_check import UNIT, bound_ratios, load_weights, parameter_map, read_dump  # noqa: E402
from torch_count import torch_count  # noqa: E402

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc(self.ln(x))))


class LayerNormMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Sequential(Block(32), Block(32))
        self.ln = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.ln(self.b(x)).mean(1))


class NormCnn(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.n1 = norm(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.n2 = norm(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.n1(self.c1(x)))
        x = x + F.relu(self.n2(self.c2(x)))
        return self.head(x.mean((2, 3)))


class SdpaBlock(nn.Module):
    """F.scaled_dot_product_attention (PyTorch 2.x; its fused CPU kernel on
    bf16 q, k, v keeps an f32 logsumexp) between LayerNorms."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in self.qkv(self.ln(x)).split(d, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return self.head(self.ln2(x).mean(1))


def models():
    torch.manual_seed(0)
    yield "layernorm_mlp", LayerNormMlp(), torch.randn(4, 8, 32), torch.randint(0, 10, (4,))
    yield "groupnorm_cnn", NormCnn(lambda c: nn.GroupNorm(4, c)), torch.randn(2, 3, 8, 8), torch.randint(0, 10, (2,))
    yield "batchnorm_cnn", NormCnn(nn.BatchNorm2d), torch.randn(4, 3, 6, 6), torch.randint(0, 10, (4,))
    # PyTorch runs an InstanceNorm as a BatchNorm of one sample (affine=False, its default).
    if hasattr(F, "scaled_dot_product_attention"):
        yield "sdpa_block", SdpaBlock(), torch.randn(2, 16, 32), torch.randint(0, 10, (2,))
    else:
        print(("FAIL: " if os.environ.get("REMAT_REQUIRE_TORCH2") == "1" else "skip  ") +
              f"sdpa_block: torch {torch.__version__} has no F.scaled_dot_product_attention")
        if os.environ.get("REMAT_REQUIRE_TORCH2") == "1":
            check(False, "sdpa_block: F.scaled_dot_product_attention")
    yield "instancenorm_cnn", NormCnn(nn.InstanceNorm2d), torch.randn(2, 3, 6, 6), \
        torch.randint(0, 10, (2,))


def stat_count(op):
    """How many of each statistic a norm keeps (0 for other ops)."""
    if op["kind"] == "LayerNorm":
        n = 1
        for d in op["shape"][:-1]:
            n *= d
        return n
    if op["kind"] == "GroupNorm":
        return op["shape"][0] * op["groups"]
    if op["kind"] == "BatchNorm":
        return op["shape"][1]
    return 0


def step(net, x, labels, dtype):
    """The module's training step in `dtype` (its weights cast to it): the loss and
    each parameter's gradient, float64."""
    net = copy.deepcopy(net).to(dtype)
    net.train()
    net.zero_grad()
    loss = F.cross_entropy(net(x.to(dtype)).double(), labels)
    loss.backward()
    return loss.item(), {k: p.grad.double() for k, p in net.named_parameters()}


def check_against_module(name, net, doc, t):
    mapped, problems = parameter_map(doc, t)
    check(not problems, f"{name}: each of remat's {len(mapped)} parameter tensors is one module parameter "
                        f"({'; '.join(problems)})")
    net = copy.deepcopy(net).double()
    load_weights(net, mapped, t)
    x, labels = t["input"], t["labels"]
    loss64, g64 = step(net, x, labels, torch.float64)
    loss16, g16 = step(net, x, labels, torch.bfloat16)
    loss_ratio, worst, where = bound_ratios(mapped, [(t, (loss64, g64), (loss16, g16))], UNIT[torch.bfloat16])
    check(loss_ratio <= 1.0, f"{name}: loss remat {float(t['loss']):.6g}, exact {loss64:.6g}, PyTorch bf16 "
                             f"{loss16:.6g} ({loss_ratio:.3f} of the bound)")
    check(worst <= 1.0, f"{name}: every gradient as close to the exact step as PyTorch's bf16 step (worst "
                        f"{worst:.3f} of the bound, at {where})")


def main():
    args = parse_args()
    for name, net, x, labels in models():
        net = net.to(torch.bfloat16)
        x = x.to(torch.bfloat16)
        loss_fn = (lambda lab: lambda out: F.cross_entropy(out.float(), lab))(labels)
        want = torch_count(copy.deepcopy(net), x, loss_fn, labels)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        generic = [op.get("comment") for op in doc["ops"] if op["kind"] == "Generic"]
        check(not generic, f"{name}: every op has a kind remat runs (Generic: {generic})")
        if name == "sdpa_block":
            check(sum(op["kind"] == "Attention" and op["dtype"] == "bf16" for op in doc["ops"]) == 1,
                  f"{name}: the fused attention is one bf16 Attention")
        norms = [op for op in doc["ops"] if stat_count(op)]
        check(norms and all(op["dtype"] == "bf16" and op.get("aux_bytes") == 4 * stat_count(op) for op in norms),
              f"{name}: its {len(norms)} norms keep their statistics in bf16 "
              f"({[(op['kind'], op.get('aux_bytes')) for op in norms]})")
        sim = remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json")
        if sim.returncode != 0:
            check(False, f"{name}: remat simulate exits 0 ({sim.stderr.strip()[:300]})")
            continue
        model = json.loads(sim.stdout)["model"]
        check(model["saved_bytes"] == want, f"{name}: remat saved_bytes {model['saved_bytes']} == PyTorch's count {want}")
        why = [ln for ln in remat(args, "model", "--model", path).stdout.splitlines() if "simulate-only" in ln or "why" in ln]
        check(model["executable"], f"{name}: executable ({why})")
        run, res = run_every_strategy(args, path)
        check(run.returncode == 0, f"{name}: remat run --strategy all exits 0 ({run.stderr.strip()[:300]})")
        if res is not None:
            check(not not_bitwise(res), f"{name}: {len(res)} strategies bit-identical to store-all")
            check(not not_exact(res), f"{name}: tracked peak == predicted under every strategy")
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "dump")
            d = remat(args, "run", "--model", path, "--strategy", "sqrt", "--repeat", "1", "--backend", "cpu",
                      "--seed", "3", "--dump", dump)
            check(d.returncode == 0, f"{name}: remat run --dump exits 0 ({d.stderr.strip()[:300]})")
            if d.returncode == 0:
                check_against_module(name, net, doc, read_dump(os.path.join(dump, "tensors.safetensors")))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
