#!/usr/bin/env python3
"""remat_capture against PyTorch's own count and against remat.

For an MLP, torchvision's ResNet-18 and a GPT-2-style block with attention:
capture one training step into the JSON model format, then
- PyTorch's count of what autograd saves for backward, taken here on a fresh
  forward pass (saved_tensors_hooks, unique storages, parameters, buffers and
  the target left out), equals remat's saved_bytes of the captured file
  exactly;
- the file loads (`remat model`) and simulates under every strategy that
  takes no argument (`remat simulate`);
- ops with kernels run: the MLP, ResNet-18 and the GPT block are executable,
  `remat run` executes them and every strategy matches store-all bit for bit;
  the GPT block's step, rebuilt in PyTorch from `remat run --dump`
  (tests/exec/torch_crosscheck.py), agrees on the loss and every gradient;
- views are views: the GPT block's q, k, v are Slices and Transposes owning no bytes;
- with PyTorch 2.x, F.scaled_dot_product_attention's fused CPU kernel is one
  Attention op keeping q, k, v, itself and its logsumexp (aux), and the file's
  saved bytes equal PyTorch's count (check_sdpa, run by test_capture_sdpa.py:
  its own CTest test, so that a torch without the kernel shows as a skip);
- topk, sort, max and min over a dim keep their int64 indices as their own
  aux_bytes (check_kept_indices).
Also the command line: `python3 -m remat_capture FILE:FUNCTION --input ...`
writes the same model, and bad arguments exit 2 with one line.

  test_capture.py --remat PATH --out DIR
Exit 77 (CTest: skipped) without torch/torchvision, unless CI=true."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
try:
    import torch
    import torch.nn.functional as F
    import torchvision  # noqa: F401 - ResNet-18
except Exception as e:  # noqa: BLE001
    print(f"SKIP: torch/torchvision not importable with {sys.executable}: {e}")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

import remat_capture  # noqa: E402
from capture_models import MODELS  # noqa: E402

import harness  # noqa: E402
from harness import check, parse_args, simulated, summary  # noqa: E402
from torch_count import torch_count  # noqa: E402


def remat(args, *cmd, ok=True):
    """Here a command must succeed unless a check says otherwise."""
    return harness.remat(args, *cmd, ok=ok)


def check_run(args, name, path, executable):
    """Ops with kernels run: an executable capture runs under every strategy,
    bit-identical to store-all, its tracked peak the predicted one. One with
    kinds no backend runs yet is refused by `remat run` with one line naming
    the first of them (the same list `remat model` prints)."""
    if name == "mlp":
        check(executable, "mlp: every op has a kernel (Linear, ReLU, Dropout, Tanh, MSELoss)")
    if name == "resnet18":  # its cross-entropy keeps log-probabilities (aux), which the kernels write and read
        check(executable, "resnet18: every op has a kernel (Conv, BatchNorm, pools, the cross-entropy keeping log-probs)")
    if name == "gpt_block":  # constants with their values, the position table learned, clones as copies
        check(executable, "gpt_block: every op has a kernel (attention's scale, causal mask and clones included)")
    run = remat(args, "run", "--model", path, "--strategy", "all", "--repeat", "1", "--backend", "cpu", "--json",
                ok=False)
    if executable:
        check(run.returncode == 0, f"{name}: remat run exits 0 ({run.stderr.strip()[:200]})")
        if run.returncode == 0:
            res = json.loads(run.stdout)["strategies"]
            check(all(s["status"] == "ok" and s["matches_store_all"] for s in res),
                  f"{name}: every strategy ran and matches store-all bit for bit")
            check(all(s["tracked_peak_bytes"] == s["predicted_peak_bytes"] for s in res),
                  f"{name}: tracked peak == predicted peak")
        return
    listed = remat(args, "model", "--model", path).stdout
    line = next(l for l in listed.splitlines() if l.startswith("simulate-only ops"))
    first = line.split(": ", 1)[1].split(",")[0].strip()
    check(run.returncode == 2 and run.stderr.count("\n") == 1 and "simulate-only ops" in run.stderr
          and f"{first} (op " in run.stderr and not run.stdout,
          f"{name}: remat run refuses it in one line naming '{first}' ({run.stderr.strip()[:160]})")


def check_constants():
    """What a constant operand writes: x - c as x + (-c), infinities as the
    format's strings, a table computed from parameters as a learned AddConst,
    and nothing (simulate only) for a product with one."""
    from remat_capture._build import _const_values
    t = torch.tensor([1.0, float("inf"), -2.0])
    check(_const_values("sub", t) == {"values": [-1.0, "-inf", 2.0]}, "x - c is x + (-c), infinities included")
    check(_const_values("div", 4) == {"values": 4.0}, "a scalar divisor")
    p = torch.ones(2, requires_grad=True)
    check(_const_values("add", p) == {"values": [1.0, 1.0], "learned": True}, "a parameter's table added: learned")
    check(_const_values("mul", p) == {}, "a product with a parameter's table: no values, simulate only")


VIEW_KINDS = ("Reshape", "Transpose", "Slice", "Expand")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}


def file_saved_bytes(doc):
    """What the file says autograd keeps, counted here without remat: the
    storage of every op in a saved set once (a view is its input's storage,
    as PyTorch made it; a Reshape with copy owns its bytes), plus aux_bytes."""
    ops = doc["ops"]

    def owner(i):
        while ops[i]["kind"] in VIEW_KINDS and not ops[i].get("copy"):
            i = ops[i]["inputs"][0]
        return i

    def nbytes(op):
        n = 1
        for s in op["shape"]:
            n *= s
        return op.get("bytes", n * DTYPE_BYTES[op.get("dtype", "f32")])

    owners = {owner(s) for op in ops for s in op.get("saved", [])}
    return sum(nbytes(ops[o]) for o in owners) + sum(op.get("aux_bytes", 0) for op in ops)


def fused_sdpa():
    """Why F.scaled_dot_product_attention cannot be checked here (None: it can):
    torch without it, or one that runs it on the CPU as math ops instead of
    the fused aten._scaled_dot_product_flash_attention_for_cpu."""
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
    if not hasattr(F, "scaled_dot_product_attention"):
        return f"torch {torch.__version__} has no F.scaled_dot_product_attention"
    seen = []

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    with Names():
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    if "_scaled_dot_product_flash_attention_for_cpu" not in seen:
        return (f"torch {torch.__version__} runs F.scaled_dot_product_attention on the CPU as math ops "
                f"({', '.join(dict.fromkeys(seen))}), not the fused kernel")
    return None


def check_sdpa(args):
    """F.scaled_dot_product_attention's fused CPU kernel is one Attention op
    (causal, scale only when given) on the q, k, v views, keeping q, k, v and
    itself, its f32 logsumexp (4 bytes per output row) as its own aux_bytes,
    and nothing of it charged to another op; the file's saved bytes, and
    remat's, equal PyTorch's count (its output laid out in q's order, the
    heads' merge after it is a view, as in PyTorch). remat runs it under every
    strategy, and the step rebuilt in PyTorch from the dump agrees. With an
    attn_mask (a boolean buffer, which PyTorch turns into an additive float
    mask and keeps) it is one Attention op whose constant is that additive
    mask (0 and -inf), the float mask PyTorch keeps its aux too, and it runs
    and agrees the same way."""
    from capture_models import sdpa_block
    why = fused_sdpa()
    if why:
        print(f"SKIP: sdpa_block: {why}")
        return
    B, H, T, C = 2, 4, 16, 32
    for variant, kw in (("causal", {"is_causal": True}), ("scale", {"is_causal": False, "scale": 0.5}),
                        ("mask", {"is_causal": False, "mask": torch.ones(T, T, dtype=torch.bool).tril()})):
        name = f"sdpa_block ({variant})"
        net, x, loss_fn, target = sdpa_block(**kw)
        want = torch_count(net, x, loss_fn, target)
        doc = remat_capture.capture(net, x, loss_fn, name="sdpa_block")
        ops = doc["ops"]
        check(remat_capture.torch_saved_bytes(doc) == want, f"{name}: the file's description quotes {want}")
        got = file_saved_bytes(doc)
        check(got == want, f"{name}: the file's saved bytes {got} == PyTorch's count {want}")
        fused = [op for op in ops if op["kind"] == "Attention"]
        check(len(fused) == 1, f"{name}: exactly one Attention op (got {len(fused)})")
        if len(fused) != 1:
            continue
        att = fused[0]
        a = att["id"]
        check(att["causal"] is (variant == "causal") and att.get("scale") == kw.get("scale"),
              f"{name}: causal {att['causal']}, scale {att.get('scale')} (written only when given)")
        check(not any(k in att for k in ("fwd_flops", "bwd_flops", "simulate_only")),
              f"{name}: no FLOP estimates, not simulate-only (remat derives them)")

        def source(i):  # q, k, v: Transpose <- Reshape <- Slice <- Reshape of the qkv Linear's output
            chain = []
            while ops[i]["kind"] in VIEW_KINDS:
                chain.append(ops[i])
                i = ops[i]["inputs"][0]
            return chain, i

        chains = [c for c, _ in map(source, att["inputs"])]
        linears = {ops[end]["kind"] + ":" + ops[end].get("name", "") for _, end in map(source, att["inputs"])}
        check(len(att["inputs"]) == 3 and linears == {"Linear:qkv.linear"}
              and [[op["kind"] for op in c[:3]] for c in chains] == [["Transpose", "Reshape", "Slice"]] * 3
              and [c[2]["start"] for c in chains] == [0, C, 2 * C]
              and all(c[0]["shape"] == [B, H, T, C // H] for c in chains),
              f"{name}: its inputs are the q, k, v views of the qkv Linear, in order")
        check(sorted(att["saved"]) == sorted(att["inputs"] + [a]), f"{name}: it keeps q, k, v and itself: {att['saved']}")
        mask_bytes = T * T * 4 if variant == "mask" else 0  # the additive float mask PyTorch makes and keeps
        check(att.get("aux_bytes") == B * H * T * 4 + mask_bytes,
              f"{name}: its logsumexp, B*H*T*4 = {B * H * T * 4} bytes (+ {mask_bytes} of float mask), "
              f"is its aux_bytes (got {att.get('aux_bytes')})")
        if variant == "mask":
            additive = [0.0 if j <= i else "-inf" for i in range(T) for j in range(T)]
            check(att.get("const_shape") == [T, T] and att.get("values") == additive,
                  f"{name}: its constant is the additive mask, 0 on and below the diagonal, -inf above")
        others = [op for op in ops if op["id"] != a and (a in op.get("saved", []) or op.get("aux_bytes"))]
        check(not others, f"{name}: no other op keeps its output or has private bytes "
                          f"({[(op['id'], op['kind']) for op in others]})")
        path = os.path.join(args.out, f"sdpa_{variant}.json")
        remat_capture.save(doc, path)
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json").stdout)
        check(sim["model"]["saved_bytes"] == want, f"{name}: remat saved_bytes {sim['model']['saved_bytes']} == {want}")
        check_run(args, name, path, sim["model"]["executable"])
        check(sim["model"]["executable"], f"{name}: executable")
        cross = subprocess.run([sys.executable, os.path.join(HERE, "..", "exec", "torch_crosscheck.py"),
                                "--remat", args.remat, "--model", path, "--strategy", "sqrt"],
                               capture_output=True, text=True)
        check(cross.returncode == 0, f"{name}: the step rebuilt in PyTorch from remat's dump agrees "
                                     f"({(cross.stdout + cross.stderr).strip()[-300:]})")


def check_kept_indices():
    """Ops returning (values, indices) whose backward keeps the indices
    (max and min over a dim, sort: grad_fn._saved_indices) have them as
    their own aux_bytes, not charged to the op after them (topk's are a
    TopK op that the Gather of its values keeps); max() over all
    elements still keeps its input and result; the totals equal PyTorch's."""
    class Router(torch.nn.Module):  # a mixture-of-experts router's top-2, and reductions
        def __init__(self):
            super().__init__()
            self.gate, self.out = torch.nn.Linear(16, 16), torch.nn.Linear(2, 4)

        def forward(self, x):
            h = self.gate(x)
            top, _ = h.topk(2, dim=-1)
            hi, _ = h.max(dim=-1, keepdim=True)
            lo, _ = h.min(dim=-1, keepdim=True)
            srt, _ = h.sort(dim=-1)
            return self.out(torch.relu(top) * hi + lo + srt[:, :2]) + h.max()

    torch.manual_seed(3)
    net, x = Router(), torch.rand(8, 16)
    target = torch.rand(8, 4)

    def loss_fn(y):
        return (y - target).square().mean()

    want = torch_count(net, x, loss_fn, target)
    doc = remat_capture.capture(net, x, loss_fn, name="router")
    ops = doc["ops"]
    check(file_saved_bytes(doc) == want, f"router: the file's saved bytes {file_saved_bytes(doc)} == PyTorch's {want}")
    by = {}
    for op in ops:
        by.setdefault(op.get("comment", op["kind"]), []).append(op)
    # topk runs: its indices are a TopK op (int64, 8x2), and its values a
    # Gather by them that keeps them, as topk's node does (issue 28's MoE).
    topk = [op for op in ops if op["kind"] == "TopK"]
    values = [op for op in ops if op["kind"] == "Gather"]
    check(len(topk) == 1 and topk[0]["shape"] == [8, 2] and topk[0]["dtype"] == "i64" and len(values) == 1
          and values[0]["inputs"][1] == topk[0]["id"] and values[0]["saved"] == [topk[0]["id"]]
          and "aux_bytes" not in values[0],
          f"router: topk keeps its int64 indices (8x2, {8 * 2 * 8} bytes): a TopK op its values' Gather keeps")
    expect = {"aten.sort": 8 * 16 * 8}
    for name, aux in expect.items():
        got = [op.get("aux_bytes") for op in by.get(name, [])]
        check(got == [aux], f"router: {name} keeps its int64 indices as its own aux_bytes ({aux}; got {got})")
    got = sorted(op.get("aux_bytes", 0) for op in by.get("aten.max", []) + by.get("aten.min", []))
    check(got == [0, 64, 64], f"router: max and min over a dim keep 8x1 int64 indices each, max() none ({got})")
    full_max = [op for op in by.get("aten.max", []) if not op.get("aux_bytes")]
    check(len(full_max) == 1 and full_max[0]["id"] in full_max[0]["saved"],
          f"router: max() over all elements keeps its result ({full_max and full_max[0]['saved']})")
    named = {"aten.topk", "aten.max", "aten.min", "aten.sort"}
    others = [(op["id"], op.get("comment", op["kind"])) for op in ops
              if op.get("aux_bytes") and op.get("comment") not in named]
    check(not others, f"router: no other op has private bytes ({others})")


def simulated_doc(args, name, doc, want):
    """The captured `doc` saved and simulated (harness.simulated)."""
    path = os.path.join(args.out, name + ".json")
    remat_capture.save(doc, path)
    return simulated(args, name, path, want, "store-all,sqrt")


def check_combined_losses(args):
    """A loss made of several terms, as CLIP (the cross-entropy of the
    similarities both ways, averaged) and a VAE (a reconstruction loss minus
    a KL term) write it: the file loads (each loss kind another op reads, and
    the last op, are scalar Generic ops without the attributes of the kind they
    came from), simulates with PyTorch's saved bytes, and is called
    simulate-only, with a note saying why."""
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 6), torch.nn.Linear(8, 6)

        def forward(self, x):
            return self.a(x) @ self.b(x).t()

    class Vae(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = torch.nn.Linear(8, 8), torch.nn.Linear(4, 8)

        def forward(self, x):
            mu, logvar = self.enc(x).chunk(2, -1)
            return self.dec(mu + torch.exp(0.5 * logvar)), mu, logvar

    torch.manual_seed(5)
    x, labels = torch.randn(4, 8), torch.arange(4)

    def both_ways(logits):
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    def elbo(out):
        y, mu, logvar = out
        return F.mse_loss(y, x) - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    # The VAE's reconstruction loss against the input (an activation) is a
    # Generic op from the start; CLIP's two cross-entropies are made Generic.
    for name, net, loss_fn, demoted, terms in (("clip_pair", Pair(), both_ways, 2, 2), ("vae", Vae(), elbo, 0, 1)):
        want = torch_count(net, x, loss_fn, labels)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        model = simulated_doc(args, name, doc, want)
        if model is None:
            continue
        check(not model["executable"], f"{name}: simulate-only (remat runs one loss)")
        ops = doc["ops"]
        scalars = [op for op in ops if op["kind"] == "Generic" and op["shape"] == [1]]
        check(ops[-1]["kind"] == "Generic" and ops[-1]["shape"] == [1] and "fn" not in ops[-1],
              f"{name}: the last op is a scalar Generic op without a Pointwise's fn ({ops[-1]})")
        check(not any(op["kind"] in ("MSELoss", "SoftmaxCELoss") for op in ops),
              f"{name}: no loss kind is read by another op ({[op['kind'] for op in ops]})")
        check(len(scalars) == terms + 1, f"{name}: its {terms} loss term(s) and the last op are scalar Generic ops "
                                 f"({[op['name'] for op in scalars]})")
        said = f"the loss combines {demoted} loss op(s)" in doc["description"]
        check(said == (demoted > 0), f"{name}: the capture's notes say why loss kinds were made Generic "
                                     f"({doc['description'][-160:]})")


def check_16_bit_cross_entropy(args):
    """A cross-entropy on bf16 logits outside torch.autocast (the forward under
    autocast, the loss after it): PyTorch keeps bf16 log-probabilities and sums
    the loss in bf16, which remat's SoftmaxCELoss does not run. The file loads
    (it was refused: "keeps 58 bytes of aux and not its logits"), simulates
    with PyTorch's saved bytes, and is simulate-only, with a note saying how to
    make it run; the same loss inside autocast stays a SoftmaxCELoss and runs."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(10, 16), torch.nn.Linear(16, 5)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.b(F.gelu(self.a(x)))

    torch.manual_seed(6)
    x, labels = torch.randn(4, 10), torch.randint(0, 5, (4,))

    def outside(logits, eps=0.0):
        return F.cross_entropy(logits, labels, label_smoothing=eps)

    def inside(logits):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(logits, labels)

    for name, loss_fn, runs in (("ce_bf16_outside", outside, False),
                                ("ce_bf16_outside_smoothed", lambda t: outside(t, 0.1), False),
                                ("ce_bf16_inside", inside, True)):
        net = Net()
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        # PyTorch's saved bytes as the capture counted them with saved_tensors_hooks,
        # autocast's casts of the weights left out with the weights (torch_count keeps them).
        want = int(re.search(r"autograd saved (\d+) bytes", doc["description"]).group(1))
        model = simulated_doc(args, name, doc, want)
        if model is None:
            continue
        check(model["executable"] == runs and (doc["ops"][-1]["kind"] == "SoftmaxCELoss") == runs,
              f"{name}: {'a SoftmaxCELoss that runs' if runs else 'a simulate-only Generic loss'} "
              f"({doc['ops'][-1]['kind']}, executable {model['executable']})")
        said = "outside torch.autocast" in doc["description"]
        check(said != runs, f"{name}: the note says why, and how to run it, only where it cannot ({doc['description'][-120:]})")


def main():
    args = parse_args()
    check_constants()
    check_kept_indices()
    check_combined_losses(args)
    check_16_bit_cross_entropy(args)

    for name, builder in MODELS.items():
        net, x, loss_fn, target = builder()
        want = torch_count(net, x, loss_fn, target)
        doc = remat_capture.capture(net, x, loss_fn, name=name)
        path = os.path.join(args.out, name + ".json")
        remat_capture.save(doc, path)
        sim = json.loads(remat(args, "simulate", "--model", path, "--strategy", "store-all,recompute-all,sqrt",
                               "--json").stdout)
        got = sim["model"]["saved_bytes"]
        check(got == want, f"{name}: remat saved_bytes {got} == PyTorch's count {want}")
        check(remat_capture.torch_saved_bytes(doc) == want, f"{name}: the file's description quotes {want}")
        check(all("peak_bytes" in s for s in sim["strategies"]), f"{name}: simulates under store-all, recompute-all, sqrt")
        kinds = [op["kind"] for op in doc["ops"]]
        check(kinds[0] == "Input", f"{name}: op 0 is the Input")
        check_run(args, name, path, sim["model"]["executable"])
        if name == "mlp":
            check(kinds == ["Input", "Linear", "ReLU", "Dropout", "Linear", "Tanh", "Linear", "MSELoss"],
                  f"mlp: one op per layer: {kinds}")
            # Linear saves its input, ReLU and Tanh their output, the CPU's
            # dropout its float noise (4 bytes per element), MSE its input.
            saved = [op.get("saved") for op in doc["ops"][1:]]
            check(saved == [[0], [2], [], [3], [5], [5], [6]], f"mlp: saved sets {saved}")
            check(doc["ops"][3].get("aux_bytes") == 8 * 128 * 4 and abs(doc["ops"][3]["p"] - 0.1) < 1e-9,
                  "mlp: dropout p 0.1 with its 4-byte noise as aux")
        if name == "resnet18":
            for kind, n in (("Conv", 20), ("BatchNorm", 20), ("MaxPool", 1), ("GlobalAvgPool", 1), ("Add", 8),
                            ("ReLU", 17), ("Linear", 1), ("Reshape", 1), ("SoftmaxCELoss", 1)):
                check(kinds.count(kind) == n, f"resnet18: {n} {kind} ops (got {kinds.count(kind)})")
            check("Generic" not in kinds, "resnet18: every op has a kind remat knows")
        if name == "gpt_block":
            ops = doc["ops"]
            views = [op for op in ops if op["kind"] in ("Reshape", "Transpose", "Slice", "Expand") and not op.get("copy")]
            check(len([op for op in views if op["kind"] == "Slice"]) >= 3, "gpt_block: split into q, k, v Slices")
            check(all("bytes" not in op for op in views), "gpt_block: views own no bytes")
            for kind in ("Embedding", "LayerNorm", "MatMul", "Softmax", "MaskedFill", "GELU", "Dropout", "AddConst",
                         "SoftmaxCELoss"):
                check(kind in kinds, f"gpt_block: has {kind}")
            check("Generic" not in kinds, "gpt_block: every op has a kind remat knows")
            by_kind = {}
            for op in ops:
                by_kind.setdefault(op["kind"], []).append(op)
            pos = by_kind["AddConst"][0]
            check(pos.get("learned") is True and pos.get("const_shape") == [32, 64] and len(pos.get("values", [])) == 32 * 64,
                  "gpt_block: wpe(arange) is a learned AddConst with the table's 32x64 values")
            check([op.get("values") for op in by_kind["MulConst"]] == [0.25], "gpt_block: attention's scale 1/sqrt(16)")
            mask = by_kind["MaskedFill"][0]
            check(mask.get("values") == "causal" and mask.get("fill") == "-inf", "gpt_block: the causal mask, filled with -inf")
            clones = [op for op in by_kind["Reshape"] if op.get("copy")]
            check([ops[op["inputs"][0]]["kind"] for op in clones] == ["Expand", "Expand", "Expand", "Transpose"],
                  "gpt_block: clones are copies: matmul's of its 3 expanded operands, contiguous() of the heads' transpose")
            cross = subprocess.run([sys.executable, os.path.join(HERE, "..", "exec", "torch_crosscheck.py"),
                                    "--remat", args.remat, "--model", path, "--strategy", "sqrt"],
                                   capture_output=True, text=True)
            check(cross.returncode == 0, f"gpt_block: the step rebuilt in PyTorch from remat's dump agrees "
                                         f"({(cross.stdout + cross.stderr).strip()[-300:]})")
            model = remat(args, "model", "--model", path).stdout
            check(f"{len(views)} view(s) owning none" in model,
                  f"gpt_block: remat model loads it and counts its {len(views)} views")

    # The command line writes what capture() returns.
    cli_path = os.path.join(args.out, "cli_mlp.json")
    out = subprocess.run([sys.executable, "-m", "remat_capture", os.path.join(HERE, "capture_models.py") + ":build",
                          "-o", cli_path, "--name", "mlp"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python")))
    check(out.returncode == 0, f"python3 -m remat_capture exits 0 ({out.stderr.strip()[:200]})")
    if out.returncode == 0:
        with open(cli_path) as f:
            cli_doc = json.load(f)
        with open(os.path.join(args.out, "mlp.json")) as f:
            api_doc = json.load(f)
        check(cli_doc["ops"] == api_doc["ops"], "the CLI's file has the same ops as capture()'s")
    models_py = os.path.join(HERE, "capture_models.py")
    bad_out = os.path.join(args.out, "bad_capture.json")
    for argv, says, what in ((["nope.py:build", "--input", "2,x"], "nope.py", "a missing file"),
                             ([models_py + ":build", "--input", "2,x"], "--input '2,x'", "a shape that is not integers"),
                             ([models_py + ":build", "--input", "2,4:int64:many"], "'many'", "an id range that is not a number"),
                             ([models_py + ":no_such", "--input", "2,4"], "no_such", "a missing function"),
                             ([models_py + ":Block"], "no example input", "a module without an example input")):
        bad = subprocess.run([sys.executable, "-m", "remat_capture", *argv, "-o", bad_out], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python")))
        check(bad.returncode == 2 and bad.stderr.count("\n") == 1 and says in bad.stderr
              and not os.path.exists(bad_out), f"{what}: exit 2, one line, no file ({bad.stderr.strip()})")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
