#!/usr/bin/python3
"""The zoo (zoo_models.py) the way people train it: forward and loss inside
torch.autocast("cpu", dtype=torch.bfloat16) (a wrapper module runs the net
under autocast, and the loss runs under it too), and with PyTorch 2.x also
under torch.autocast("cpu", dtype=torch.float16). Each model is captured
with remat_capture and checked:

- saved bytes: remat's saved_bytes (`remat simulate`) equals PyTorch's own
  count, torch_count.py's, taken apart from the capture with
  saved_tensors_hooks: the unique storages autograd packs during forward and
  loss, less parameters, buffers, the target, and autocast's 16-bit casts of
  the weights (weight_casts=False: a saved tensor that autograd's
  ToCopyBackward made straight from a parameter). Those casts are real
  memory (a Linear saves the bf16 copy of its weight it multiplied by), but
  they are the weights once more in 16 bits, whatever the strategy, so
  remat charges them with the weights in the baseline
  (docs/memory-model.md#mixed-precision-autocast), as the capture's own
  figure ("autograd saved N bytes" in the file's description) leaves them
  out; that figure must equal the count too. With the casts the count is
  larger by exactly their bytes (torch_count's default, which the f32 zoo
  uses: without autocast there are none);
- `remat model` says executable exactly when `remat run` accepts the model;
- the ones in RUNS run under every strategy on the CPU, each bit for bit
  store-all's loss and gradients, the tracked peak the predicted one;
- the module itself on remat's weights, input and labels (`remat run
  --dump`; dropout and stochastic depth draw remat's masks): the float64
  step is the reference, and remat's 16-bit step must be as close to it as
  PyTorch's own autocast step on the CPU is (step_check.py, the bound of
  test_capture_pure16): per gradient tensor
  max|remat − f64| ≤ 2·max|torch_autocast − f64| + u·max|f64|
  (u = 2⁻⁸ for bf16, 2⁻¹¹ for f16), the loss likewise, each side summed
  over three seeds' steps (SEEDS): in one step of a deep model a tensor's
  error is a few roundings' luck (remat's twice PyTorch's where PyTorch's
  happened to be small, and the other way round on the next seed, both
  correct), which the sum evens out, while a defect costs remat on every
  seed. Replacing PyTorch's step by the exact one (its error 0) fails the
  check (llama 3.98, espcn 1.22 of the bound). NOT_BOUND leaves out the
  tensors where a ReLU's input lies so near 0 that the 16-bit steps put
  it on either side (VGG's head), with the measurements; the table shows
  their ratios. A model with parameters remat holds several copies of (an
  RNN's hidden weights, one a step, each drawn its own values) cannot run
  the module on remat's weights: the table says so and the check is left
  out for it;
- the others are refused, and the table says by what. A model that starts
  to run fails the test until it joins RUNS, so the table stays true;
- OPEN names failures known and not understood yet (torch 2.6: five models'
  steps a little further from float64 than the bound), each by the text it
  fails with: shown in the table, not counted, and a failure once it no
  longer happens.

Some models fail inside PyTorch itself under CPU autocast: PyTorch 1.13's
LayerNorm and GroupNorm of a bf16 input with f32 weights raise "expected
scalar type BFloat16 but found Float" (TORCH_FAILS). Those are skipped on
that version only, with the reason, and only while PyTorch still fails:
one that starts to run fails the test until it leaves TORCH_FAILS. PyTorch
1.13 has no float16 autocast on the CPU (it warns and runs in f32): the f16
pass needs 2.x (tools/torch2-check.sh, which sets REMAT_REQUIRE_TORCH2=1 and
so fails where the pass cannot run).

  test_zoo_autocast.py --remat PATH --out DIR

REMAT_ZOO=name,name runs only those models; REMAT_ZOO_PART=k/n the k-th of n
parts (CTest runs six); REMAT_ZOO_DTYPES=bf16,f16 only those passes.

Exit 77 (CTest skip) without torch/torchvision."""
import copy
import json
import os
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torchvision  # noqa: F401
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError as e:
    print(f"SKIP: cannot import torch/torchvision with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import remat_capture  # noqa: E402
from harness import not_bitwise, not_exact, parse_args, remat, run_every_strategy  # noqa: E402
from step_check import UNIT, bound_ratios, load_weights, parameter_map, read_dump  # noqa: E402
from torch_count import torch_count  # noqa: E402
import zoo_models  # noqa: E402
from zoo_models import MODELS  # noqa: E402

MAJOR = torch.__version__.split(".")[0]
# What runs today, per autocast dtype: all of them (but those TORCH_FAILS
# skips), except with 2.x the LSTM in bf16 (the table says why).
RUNS = {
    torch.bfloat16: set(MODELS),
    torch.float16: set(MODELS),
}
if MAJOR != "1":
    # nn.LSTM: 2.x records it under bf16 autocast as a bf16 mkldnn_rnn_layer,
    # which the capture maps in f32 alone (Generic: simulate-only); in f16
    # PyTorch's own step fails (TORCH_FAILS).
    RUNS[torch.bfloat16] -= {"lstm"}
# Failures known and not fixed yet, (torch major, dtype, model) -> (what the
# failure says, why): shown in the table, not counted; when that failure no
# longer happens the test fails until the entry goes.
OPEN = {
    # Not understood yet (torch 2.6): remat's step further from float64 than
    # the bound allows, in the tensors and by the ratios measured (summed over
    # the three seeds). In f16 remat trains with a loss scale (2^16, halved
    # while gradients overflow) and PyTorch's step here with none.
    ("2", "bf16", "efficientnet_b0"): ("further from the float64 one", "squeeze-excitation fc1's bias at 1.03 of the bound"),
    ("2", "f16", "efficientnet_b0"): ("further from the float64 one", "a projection's weight at 1.03 of the bound"),
    ("2", "f16", "mobilenet_v3"): ("further from the float64 one", "a batch norm's gamma at 1.54 of the bound"),
    ("2", "f16", "squeezenet"): ("further from the float64 one", "an expand3x3 bias at 1.54 of the bound"),
    ("2", "f16", "googlenet"): ("further from the float64 one", "the loss at 1.27 of the bound: remat's f16 loss "
                                "2 to 5 times further from float64 than PyTorch's on each seed"),
}
# Gradient tensors left out of the bound against the module, with why: a
# ReLU whose input the 16-bit steps put on either side of 0.
NOT_BOUND = {
    # VGG's head at batch 2 after eight batch norms over 2x2 to 32x32 pixels:
    # with seed 3 a pre-activation of classifier.4 is -0.0097 in float64 and
    # -0.0046 in PyTorch's bf16 step, and remat's bf16 step puts it above 0,
    # so that row of the weight's gradient and that element of the bias's
    # take a sample PyTorch's drop (remat's error in the weight's 0.20, its
    # largest element 0.27: 13.6 times the bound on that seed, 0.2 to 0.5 on
    # seeds 4 and 5; over the three, the weight's 1.14 of the bound, the bias's 0.95).
    ("vgg11_bn", torch.bfloat16): {"net.classifier.4.weight", "net.classifier.4.bias"},
}
# Where PyTorch's own autocast step raises (the version, the dtype): skipped there, with the reason.
LN_GN = "PyTorch 1.13's CPU LayerNorm/GroupNorm of a bf16 input with f32 weights raises"
TORCH_FAILS = {
    ("1", torch.bfloat16): {name: LN_GN for name in ("convnext", "groupnorm", "moe", "maxvit", "swin_t",
                                                    "convnext_smoothed")},
    # On this machine's CPU (no native f16): "could not create a primitive
    # descriptor for the LSTM forward propagation primitive".
    ("2", torch.float16): {"lstm": "PyTorch 2.6's oneDNN has no f16 LSTM forward here"},
}
NAMES = {torch.bfloat16: "bf16", torch.float16: "f16"}
SEEDS = (3, 4, 5)  # remat run --seed: the weights, input, labels and masks of each step compared


class Autocast(nn.Module):
    """The net's forward under torch.autocast on the CPU in `dtype` (None: off,
    the float64 reference step)."""

    def __init__(self, net, dtype):
        super().__init__()
        self.net = net
        self.dtype = dtype

    def forward(self, x):
        with torch.autocast("cpu", dtype=self.dtype or torch.bfloat16, enabled=self.dtype is not None):
            return self.net(x)


def autocast_loss(loss_fn, dtype):
    def loss(out):
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            return loss_fn(out)
    return loss


def cpu_autocasts(dtype):
    """Whether torch.autocast on the CPU lowers a product to dtype (1.13 has
    bfloat16 alone: it warns and turns autocast off, or raises)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autocast("cpu", dtype=dtype):
                return torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == dtype
        except RuntimeError:
            return False


class RematNoise(TorchDispatchMode):
    """The module's dropout and stochastic depth draw remat's masks: each
    bernoulli_ (PyTorch's CPU dropout draws its noise so, as does torchvision's
    StochasticDepth) gets the next of `masks` in the model's op order, which
    must have its number of elements."""

    def __init__(self, masks):
        super().__init__()
        self.masks = list(masks)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in ("bernoulli_", "native_dropout"):
            if not self.masks:
                raise RuntimeError(f"the module drew more noise ({name}) than remat's model has masks")
            x = args[0]
            mask = self.masks.pop(0)
            if mask.numel() != x.numel() and name == "bernoulli_":
                raise RuntimeError(f"remat's next mask has {mask.numel()} elements, the module's noise {x.numel()}")
            if name == "bernoulli_":
                return x.copy_(mask.reshape(x.shape).to(x.dtype))
            keep = mask.reshape(x.shape).to(x.dtype)
            return x * keep * (1.0 / (1.0 - float(args[1]))), keep.bool()
        return func(*args, **kwargs)


def noise_masks(doc, t):
    """remat's masks in op order: each Dropout's (mask.V) and each stochastic
    depth's, a product with the per-sample noise the capture kept as a constant
    (const.V: 0 where a sample was dropped)."""
    masks = []
    for op in doc["ops"]:
        if op["kind"] == "Dropout":
            masks.append(t[f"mask.{op['id']}"].double())
        elif op["kind"] == "Pointwise" and op.get("fn") == "mul" and "const_shape" in op and \
                op.get("torch", {}).get("module", "").endswith("stochastic_depth"):
            n = 1
            for d in op["const_shape"]:
                n *= d
            masks.append((t[f"const.{op['id']}"].reshape(-1)[:n] != 0).double())
    return masks


def module_step(build, mapped, t, dtype, masks):
    """The zoo model's step on remat's weights, input and labels (target): under
    autocast in dtype, or in float64 (dtype None): (loss, {param: gradient})."""
    torch.manual_seed(0)
    net, x, loss_fn, target = build()
    wide = torch.float64 if dtype is None else torch.float32
    net = Autocast(net, dtype).to(wide)
    load_weights(net, mapped, t)
    x = t["input"].reshape(x.shape).to(wide if x.is_floating_point() else x.dtype)
    given = t["labels"] if "labels" in t else t["target"]
    target.data = given.reshape(target.shape).to(wide if target.is_floating_point() else target.dtype)
    net.train()
    net.zero_grad()
    with RematNoise(masks) as mode:
        loss = autocast_loss(loss_fn, dtype)(net(x))
    if mode.masks:
        raise RuntimeError(f"the module drew less noise than remat's model has masks ({len(mode.masks)} left)")
    loss.backward()
    return loss.item(), {k: p.grad.double() for k, p in net.named_parameters() if p.grad is not None}


def against_module(args, name, path, build, doc, dtype):
    """remat's dumped step against the module's float64 and autocast steps, on
    the weights, input and labels of each of SEEDS: a cell of the table, and a
    failure or None."""
    steps = []
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "dump")
            d = remat(args, "run", "--model", path, "--strategy", "sqrt", "--repeat", "1", "--backend", "cpu",
                      "--seed", str(seed), "--dump", dump)
            if d.returncode != 0:
                return "dump FAILED", f"remat run --dump exits {d.returncode} ({d.stderr.strip()[-300:]})"
            t = read_dump(os.path.join(dump, "tensors.safetensors"))
        mapped, problems = parameter_map(doc, t)
        if problems:
            return "module: not compared (" + "; ".join(problems) + ")", None
        masks = noise_masks(doc, t)
        steps.append((t, module_step(build, mapped, t, None, masks), module_step(build, mapped, t, dtype, masks)))
    left_out = NOT_BOUND.get((name, dtype), set())
    held = {k: p for k, p in mapped.items() if p not in left_out}
    loss_ratio, worst, where = bound_ratios(held, steps, UNIT[dtype])
    cell = f"module: loss {loss_ratio:.2f}, worst gradient {worst:.2f} of the bound ({where})"
    if left_out:
        outs = [(bound_ratios({k: p}, steps, UNIT[dtype])[1], k) for k, p in mapped.items() if p in left_out]
        cell += "; left out: " + ", ".join(f"{k} at {r:.2f}" for r, k in sorted(outs, reverse=True))
        if len(held) == len(mapped):
            return "FAIL " + cell, f"NOT_BOUND names {sorted(left_out)}, no parameter of it"
    if loss_ratio > 1 or worst > 1:
        losses = ", ".join(f"{float(t['loss']):.6g} / {e[0]:.6g} / {o[0]:.6g}" for t, e, o in steps)
        return "FAIL " + cell, (f"remat's {NAMES[dtype]} step is further from the float64 one than twice "
                                f"PyTorch's autocast step and one rounding: {cell} (loss remat / exact / PyTorch "
                                f"per seed: {losses})")
    return "ok " + cell, None


def check_model(args, name, build, dtype, failures):
    """One model under one autocast dtype: its row of the table."""
    tag = NAMES[dtype]
    row = {"name": name, "dtype": tag, "ops": "", "torch": "", "remat": "", "runs": False, "cell": ""}
    torch.manual_seed(0)
    net, x, loss_fn, target = build()
    wrapped, lf = Autocast(net, dtype), autocast_loss(loss_fn, dtype)
    known = TORCH_FAILS.get((MAJOR, dtype), {}).get(name)
    try:
        want = torch_count(wrapped, x, lf, target, weight_casts=False)
    except RuntimeError as e:
        if known:
            row["cell"] = f"skipped on torch {torch.__version__}: {known} ({str(e).splitlines()[0][:80]})"
        else:
            row["cell"] = f"FAIL: PyTorch's own autocast step raises: {str(e).splitlines()[0][:100]}"
            failures.append(f"{name} {tag}: PyTorch's own step raises ({e}); list it in TORCH_FAILS with the reason")
        return row
    if known:
        failures.append(f"{name} {tag}: PyTorch {torch.__version__} runs it now: take it out of TORCH_FAILS")
    with_casts = torch_count(copy.deepcopy(wrapped), x, lf, target)
    row["torch"] = want
    net.zero_grad()
    doc = remat_capture.capture(wrapped, x, lf, name=f"{name}_{tag}")
    path = os.path.join(args.out, f"{name}_{tag}.json")
    remat_capture.save(doc, path)
    row["ops"] = len(doc["ops"])
    quoted = remat_capture.torch_saved_bytes(doc)
    if quoted != want:
        failures.append(f"{name} {tag}: the capture quotes {quoted} bytes, PyTorch's count (weight casts "
                        f"left out) is {want} ({with_casts} with them)")
    sim = remat(args, "simulate", "--model", path, "--strategy", "store-all", "--json")
    if sim.returncode != 0:
        row["cell"] = "simulate FAILED: " + (sim.stderr.strip().splitlines() or [""])[-1][:120]
        failures.append(f"{name} {tag}: remat simulate exits {sim.returncode} ({sim.stderr.strip()[-300:]})")
        return row
    model = json.loads(sim.stdout)["model"]
    row["remat"] = got = model["saved_bytes"]
    if got != want:
        failures.append(f"{name} {tag}: remat saved_bytes {got}, PyTorch's {want} (weight casts left out; "
                        f"{with_casts} with them)")
    run, res = run_every_strategy(args, path)
    row["runs"] = run.returncode == 0
    if model["executable"] != row["runs"]:
        failures.append(f"{name} {tag}: remat model says executable={model['executable']}, remat run exits "
                        f"{run.returncode}")
    if res is not None:
        same, exact = not not_bitwise(res), not not_exact(res)
        row["cell"] = f"{len(res)}, {'bitwise' if same else 'DIFFER'}, peak {'exact' if exact else 'OFF'}; "
        if not same or not exact:
            failures.append(f"{name} {tag}: strategies bit-identical {same} (not: {not_bitwise(res)}), tracked "
                            f"peak == predicted {exact} (not: {not_exact(res)})")
        cell, failure = against_module(args, name, path, build, doc, dtype)
        row["cell"] += cell
        if failure:
            failures.append(f"{name} {tag}: {failure}")
    else:
        row["cell"] = (run.stderr.strip().splitlines() or [""])[-1][:160]
    if row["runs"] != (name in RUNS[dtype]):
        failures.append(f"{name} {tag}: runs {row['runs']}, expected {name in RUNS[dtype]} (update RUNS and the "
                        "table in docs/pytorch.md)")
    return row


def main():
    args = parse_args()
    failures, rows = [], []
    only = [n for n in os.environ.get("REMAT_ZOO", "").split(",") if n]
    passes = [n for n in os.environ.get("REMAT_ZOO_DTYPES", "bf16,f16").split(",") if n]
    dtypes = []
    for dtype in (torch.bfloat16, torch.float16):
        if NAMES[dtype] not in passes:
            continue
        if cpu_autocasts(dtype):
            dtypes.append(dtype)
        elif os.environ.get("REMAT_REQUIRE_TORCH2") == "1":
            failures.append(f"torch {torch.__version__} has no {NAMES[dtype]} autocast on the CPU")
        else:
            print(f"skip  the {NAMES[dtype]} pass: torch {torch.__version__} has no {NAMES[dtype]} autocast on "
                  "the CPU (PyTorch 2.x's pass, tools/torch2-check.sh)")
    for dtype in dtypes:
        for name, build in MODELS.items():
            if only and name not in only or not zoo_models.in_part(name):
                continue
            mine = []
            r = check_model(args, name, build, dtype, mine)
            known = OPEN.get((MAJOR, NAMES[dtype], name))
            if known:
                what, why = known
                if any(what in f for f in mine):
                    mine = [f for f in mine if what not in f]
                    r["cell"] += f"; OPEN: {why}"
                else:
                    mine.append(f"{name} {NAMES[dtype]}: OPEN expects '{what}' ({why}), which no longer fails: "
                                "take it out of OPEN")
            failures += mine
            rows.append(r)
            print(f"  {r['name']} {r['dtype']}: {'runs' if r['runs'] else 'does not run'}; {r['cell']}", flush=True)
    print(f"{'model':18} {'':4} {'ops':>4} {'PyTorch saved':>14} {'remat saved':>12}  runs  "
          "strategies; against the module, or why not")
    for r in rows:
        num = (lambda v: f"{v:,}" if isinstance(v, int) else str(v))
        print(f"{r['name']:18} {r['dtype']:4} {r['ops']:>4} {num(r['torch']):>14} {num(r['remat']):>12}  "
              f"{'yes ' if r['runs'] else 'no  '}  {r['cell']}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
