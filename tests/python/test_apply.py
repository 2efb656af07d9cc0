"""The loop capture -> plan -> apply -> verify (docs/pytorch.md, "Applying a
plan"): each model of apply_models.py is captured, `remat export --torch-plan`
writes each strategy's plan, remat_capture.apply puts it on the module, and one
training step measured from PyTorch itself (_measure.py: every storage an aten
op makes, followed by weak references) is compared with remat's prediction:

- the bytes PyTorch keeps when the forward pass ends equal remat's resident
  activation bytes then, exactly;
- the peak of live activations over the step is within 2 % of remat's peak;
- the ops PyTorch's checkpoint regions recompute are as many as remat's
  recompute steps;
- the gradients are allclose to the unwrapped module's.

Which plans apply depends on the PyTorch: with selective activation
checkpointing (2.4 and later) a region may hold kept ops; without it (1.13) a
region is recomputed whole, so fewer plans are expressible. The test lists,
per PyTorch, exactly which strategies apply and which are refused, and checks
each refusal's reason. Then the bad input: a model that was not captured, a
nested, offload or compress plan, the CLI's `apply --check`."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import apply_models  # noqa: E402
import remat_capture  # noqa: E402
from harness import check, parse_args, summary  # noqa: E402
from remat_capture import _measure, _replay  # noqa: E402

STRATEGIES = apply_models.STRATEGIES  # per model, in order
# Per checkpointing: the plans checkpoint regions hold (a module's forward,
# or a run of nn.Sequential children, per phase). Every other checkpoint-set
# plan of STRATEGIES is replayed op by op (_replay.py), and the nested plans
# of REFUSED are refused with a PlanError.
REGIONS = {
    "selective": {"mlp": {"store-all", "manual:1,6,11,16,21", "manual:1,11,21", "auto", "blocks",
                          "attention-core"},
                  "resnet": {"store-all", "manual:3,10,17,24,31", "attention-core"},
                  "gpt_block": {"store-all", "selective", "attention-core"},
                  "llama_block": {"store-all", "selective", "attention-core"}},
    "plain": {"mlp": {"store-all", "manual:1,6,11,16,21", "blocks", "attention-core"},
              "resnet": {"store-all", "manual:3,10,17,24,31", "attention-core"},
              "gpt_block": {"store-all", "selective", "attention-core"},
              "llama_block": {"store-all", "selective", "attention-core"}},
}
REFUSED = {"mlp": {"recompute-all"}, "resnet": {"optimal:800000:60"}}
# Plans that keep checkpoints converted: replayed with a cast in the pack
# hook. Their gradients carry the rounding: the norm of the difference from
# the unwrapped module's, relative to its norm, stays under these bounds.
COMPRESSED = {"sqrt+compress:bf16": 0.05, "sqrt+compress:f16": 0.02}


def remat_json(remat, *args):
    p = subprocess.run([remat, *args], capture_output=True, text=True)
    return p


def buffers_of(net):
    return {n: b.detach().clone() for n, b in net.named_buffers()}


def run_model(args, name, selective, regions, measured):
    net, make, loss_fn = apply_models.MODELS[name]()
    model_path = os.path.join(args.out, f"{name}.json")
    remat_capture.save(remat_capture.capture(net, make(), loss_fn, name=name), model_path)
    # Every step starts from these weights' buffers (batch norm's running
    # statistics), so each step's updates can be compared with the unwrapped one's.
    state = {k: v.clone() for k, v in net.state_dict().items()}
    base = _measure.measure_step(net, make, loss_fn)
    base_buffers = buffers_of(net)
    mode = "selective" if selective else "plain"
    for spec in STRATEGIES[name] + list(COMPRESSED):
        plan_path = os.path.join(args.out, f"{name}.{spec.replace(':', '_').replace(',', '-')}.plan.json")
        p = remat_json(args.remat, "export", "--model", model_path, "--strategy", spec, "--torch-plan", plan_path)
        check(p.returncode == 0 and os.path.isfile(plan_path), f"{name} {spec}: remat export --torch-plan ({p.stderr.strip()})")
        if p.returncode != 0:
            continue
        plan = remat_capture.load_plan(plan_path)
        pred = plan["predicted"]
        try:
            applied = remat_capture.apply(net, plan, selective=selective)
        except remat_capture.PlanError as e:
            print(f"      {name} {spec} ({mode}): refused: {e}")
            check(spec in REFUSED.get(name, ()) and "more than once" in str(e),
                  f"{name} {spec} ({mode}): refused as expected (a nested plan)")
            measured.append((name, spec, mode, "refused", None, pred))
            continue
        how = "regions" if spec in regions.get(name, ()) else "cast" if spec in COMPRESSED else "replay"
        check(spec not in REFUSED.get(name, ()) and (how != "regions") == isinstance(applied, _replay.Replayed),
              f"{name} {spec} ({mode}): applies with {how} ({applied.describe()})")
        net.load_state_dict(state)
        got = _measure.measure_step(applied, make, loss_fn, module=net)
        recomputed = len(_measure.recomputed_ops(plan, got["recomputed"]))
        measured.append((name, spec, mode, how, got, pred))
        check(got["kept"] == pred["forward_end_bytes"],
              f"{name} {spec} ({mode}): PyTorch keeps {got['kept']} B at the end of the forward pass, "
              f"remat {pred['forward_end_bytes']} B")
        err = (got["peak"] - pred["peak_bytes"]) / pred["peak_bytes"]
        check(abs(err) <= 0.02, f"{name} {spec} ({mode}): peak {got['peak']} B, remat {pred['peak_bytes']} B "
                                f"({err * 100:+.2f} %)")
        check(recomputed == pred["recompute_steps"],
              f"{name} {spec} ({mode}): {recomputed} ops recomputed, remat {pred['recompute_steps']}")
        if spec in COMPRESSED:
            num = sum(float((got["grads"][n] - g).pow(2).sum()) for n, g in base["grads"].items())
            den = sum(float(g.pow(2).sum()) for g in base["grads"].values())
            rel = (num / den) ** 0.5
            check(set(got["grads"]) == set(base["grads"]) and 0 < rel < COMPRESSED[spec],
                  f"{name} {spec} ({mode}): gradients differ from the unwrapped module's by {rel:.2e} "
                  f"(relative norm, under {COMPRESSED[spec]}): the cast's rounding")
        else:
            same = all(torch.allclose(got["grads"][n], g, rtol=1e-5, atol=1e-6) for n, g in base["grads"].items())
            check(same and set(got["grads"]) == set(base["grads"]),
                  f"{name} {spec} ({mode}): gradients allclose to the unwrapped module's")
        after = buffers_of(net)
        once = all(torch.allclose(after[n], b, rtol=1e-5, atol=1e-6) for n, b in base_buffers.items())
        reruns_bn = how == "regions" and any(op["kind"] == "BatchNorm" and op["phase"] >= 0 for op in plan["ops"])
        if reruns_bn:  # torch.utils.checkpoint's own behaviour (docs/pytorch.md)
            check(not once, f"{name} {spec} ({mode}): checkpoint regions run batch norm again in training mode: "
                            "its running statistics are updated twice")
        else:
            check(once, f"{name} {spec} ({mode}): buffers (running statistics) updated as without the plan, once")
    net.load_state_dict(state)
    return base, model_path


def _ptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


def _hook(ptrs, key):  # keeps only the address: holding the tensor would change what autograd may reuse
    return lambda g: ptrs.__setitem__(key, _ptr(g))


def add_shares_gradient():
    """What PyTorch itself does with an Add's gradient, the rule remat's
    memory model follows (docs/memory-model.md, "An Add's gradient"):
    AddBackward hands the very tensor it received to both inputs (one
    storage for G(z), G(x), G(y)); alpha != 1 gives the second input a
    tensor of its own; and a part added to a gradient whose storage another
    input's gradient still shares goes out of place, into a new storage."""
    a = torch.randn(4, 8, requires_grad=True)
    b = torch.randn(4, 8, requires_grad=True)
    seed = torch.randn(4, 8)
    ptrs = {}
    x, y = a * 2, b * 3  # non-leaf inputs, as in a residual block
    x.register_hook(_hook(ptrs, "x"))
    y.register_hook(_hook(ptrs, "y"))
    z = x + y
    z.register_hook(_hook(ptrs, "z"))
    z.backward(seed)
    check(ptrs["x"] == ptrs["y"] == ptrs["z"],
          "PyTorch's AddBackward gives both inputs G(x + y)'s own storage (remat's model: G(v)'s storage, shared)")
    x, y = a * 2, b * 3
    x.register_hook(_hook(ptrs, "x"))
    y.register_hook(_hook(ptrs, "y"))
    torch.add(x, y, alpha=0.5).backward(seed)  # the second input's gradient is scaled: a tensor of its own
    check(ptrs["x"] != ptrs["y"], "torch.add(x, y, alpha=0.5): two gradient storages (the sharing is the plain Add's)")
    # z = x + y with x also feeding a tanh whose backward runs first: G(y)
    # still shares G(z)'s storage when tanh's part for x arrives, so G(x)
    # ends in a storage of its own (remat: out of place).
    x, y = a * 2, b * 3
    t = x.tanh()
    z = x + y
    x.register_hook(_hook(ptrs, "x"))
    y.register_hook(_hook(ptrs, "y"))
    z.register_hook(_hook(ptrs, "z"))
    ((z * z).sum() + (t * t).sum()).backward()
    check(ptrs["y"] == ptrs["z"] and ptrs["x"] != ptrs["z"],
          "an added part goes out of place while another input's gradient shares the storage")


def view_shares_gradient():
    """What PyTorch does with a view's gradient (docs/memory-model.md, "A
    Reshape's gradient"): view, reshape, flatten and unsqueeze hand their
    input G reshaped, the same storage, and so does clone (.contiguous() of a
    strided tensor) and a Linear on a 3-D input (_unsafe_view of an mm);
    a transpose hands a strided view of G (the same storage), after which a
    view's reshape copies; a slice and an expand make a new tensor."""
    a = torch.randn(2, 4, 8, requires_grad=True)
    ptrs = {}

    def grads(make):
        """Storages of G(x) and of G(out) for out = make(x), x = a * 2."""
        ptrs.clear()
        x = a * 2
        x.register_hook(_hook(ptrs, "x"))
        out = make(x)
        out.register_hook(_hook(ptrs, "out"))
        # G(out) made by a matmul: dense in out's shape, as attention's q
        # gets it (a pointwise kernel would follow out's strides).
        (out @ torch.ones(out.shape[-1], 3)).tanh().sum().backward()
        return ptrs["x"], ptrs["out"]

    for what, make in (("view(8, 8)", lambda x: x.view(8, 8)), ("reshape(2, 32)", lambda x: x.reshape(2, 32)),
                       ("flatten(0, 1)", lambda x: x.flatten(0, 1)), ("unsqueeze(1)", lambda x: x.unsqueeze(1)),
                       ("transpose(1, 2).contiguous()", lambda x: x.transpose(1, 2).contiguous()),
                       ("transpose(1, 2).reshape(2, 32)", lambda x: x.transpose(1, 2).reshape(2, 32))):
        gx, gout = grads(make)
        check(gx == gout, f"x.{what}: G(x) is G(out)'s storage (remat: a Reshape's input, view or copy, shares it)")
    gx, gout = grads(lambda x: x.transpose(1, 2))
    check(gx == gout, "x.transpose(1, 2): G(x) is a strided view of G(out)'s storage (remat: a tensor of its "
                      "own, its gradients are dense)")
    for what, make in (("x[:, 1:3]", lambda x: x[:, 1:3]), ("x.expand(3, 2, 4, 8)", lambda x: x.expand(3, 2, 4, 8)),
                       ("x.view(2, 4, 2, 4).transpose(1, 2)", lambda x: x.view(2, 4, 2, 4).transpose(1, 2))):
        gx, gout = grads(make)
        check(gx != gout, f"{what}: G(x) is a new storage (the view of a strided G copies)"
              if "transpose" in what else f"{what}: G(x) is a new storage")
    # A Linear on a 3-D input (a view, an addmm, a view): the backward's mm
    # for the input reads G(y)'s storage (G of the addmm, reshaped) and
    # writes the storage G(x) is (G of the first view, reshaped).
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mms(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.mm.default:
                self.calls.append(([_ptr(t) for t in args], _ptr(out)))
            return out

    lin = torch.nn.Linear(8, 16)
    ptrs.clear()
    x = a * 2
    x.register_hook(_hook(ptrs, "x"))
    y = lin(x)
    y.register_hook(_hook(ptrs, "y"))
    mms = Mms()
    with mms:
        y.tanh().sum().backward()
    check(any(ptrs["y"] in ins and out == ptrs["x"] for ins, out in mms.calls),
          "Linear on a 3-D input: the input's gradient is the mm's output and the mm reads G(y)'s storage "
          f"(mm calls: {len(mms.calls)})")


def main():
    args = parse_args()
    have = remat_capture.has_selective_checkpointing()
    print(f"PyTorch {torch.__version__}; selective activation checkpointing: {'yes' if have else 'no'}")
    measured = []
    models = {}
    for name in STRATEGIES:
        modes = [True, False] if have else [False]
        for selective in modes:
            mode = "selective" if selective else "plain"
            base, path = run_model(args, name, selective, REGIONS[mode], measured)
            models[name] = path
        # Without any plan, PyTorch keeps what the capture counted.
        pred = json.load(open(os.path.join(args.out, f"{name}.store-all.plan.json")))["predicted"]
        check(base["kept"] == pred["saved_bytes"],
              f"{name}: without a plan PyTorch keeps {base['kept']} B, remat's saved_bytes {pred['saved_bytes']} B")

    print("\n model        strategy               checkpointing  how      PyTorch kept   remat kept   PyTorch peak"
          "   remat peak  recomputed")
    for name, spec, mode, how, got, pred in measured:
        if got is None:
            print(f" {name:12} {spec:22} {mode:13} refused")
            continue
        print(f" {name:12} {spec:22} {mode:13} {how:8} {got['kept']:>12,} {pred['forward_end_bytes']:>12,} "
              f"{got['peak']:>14,} {pred['peak_bytes']:>12,} {pred['recompute_steps']:>10}")

    add_shares_gradient()
    view_shares_gradient()
    in_place(args)
    bad_input(args, models)
    return summary()


def in_place(args):
    """Ops that overwrite their input (torchvision's `out += identity`,
    ReLU(inplace=True)): a plan that recomputes them with their input
    applies; one that recomputes such an op but keeps the input it
    overwrites is refused (that storage holds the op's result by then)."""
    net, make, loss_fn = apply_models.inplace_mlp()
    path = os.path.join(args.out, "inplace.json")
    remat_capture.save(remat_capture.capture(net, make(), loss_fn, name="inplace"), path)
    base = _measure.measure_step(net, make, loss_fn)
    for spec in ("blocks", "sqrt"):
        plan_path = os.path.join(args.out, f"inplace.{spec}.plan.json")
        p = remat_json(args.remat, "export", "--model", path, "--strategy", spec, "--torch-plan", plan_path)
        check(p.returncode == 0, f"in-place MLP {spec}: remat export --torch-plan ({p.stderr.strip()})")
        plan = remat_capture.load_plan(plan_path)
        pred = plan["predicted"]
        try:
            applied = remat_capture.apply(net, plan)
        except remat_capture.PlanError as e:
            check(spec == "sqrt" and "whose storage it overwrites" in str(e),
                  f"in-place MLP {spec}: refused, naming the in-place op and the input it overwrites ({e})")
            continue
        got = _measure.measure_step(applied, make, loss_fn, module=net)
        recomputed = len(_measure.recomputed_ops(plan, got["recomputed"]))
        same = all(torch.allclose(got["grads"][n], g, rtol=1e-5, atol=1e-6) for n, g in base["grads"].items())
        check(spec == "blocks" and got["kept"] == pred["forward_end_bytes"]
              and abs(got["peak"] - pred["peak_bytes"]) <= 0.02 * pred["peak_bytes"]
              and recomputed == pred["recompute_steps"] > 0 and same,
              f"in-place MLP {spec}: replayed with its in-place ReLUs: kept {got['kept']} B (remat "
              f"{pred['forward_end_bytes']}), peak {got['peak']} B (remat {pred['peak_bytes']}), {recomputed} ops "
              f"recomputed (remat {pred['recompute_steps']}), gradients allclose: {same}")


def bad_input(args, models):
    out = args.out
    # A model that was not captured: a preset, a hand-written JSON file.
    for model in ("mlp:4", os.path.join(HERE, "..", "exec", "models", "attention_small.json")):
        path = os.path.join(out, "refused.plan.json")
        p = remat_json(args.remat, "export", "--model", model, "--strategy", "sqrt", "--torch-plan", path)
        check(p.returncode == 2 and "was not captured from PyTorch" in p.stderr and not os.path.exists(path),
              f"export --torch-plan of {os.path.basename(model)}: exit 2, 'was not captured', no file ({p.stderr.strip()})")
    p = remat_json(args.remat, "export", "--model", models["mlp"], "--strategy", "sqrt", "--torch-plan",
                   os.path.join(out, "plan.txt"))
    check(p.returncode == 2 and "--torch-plan" in p.stderr and ".json" in p.stderr,
          f"--torch-plan plan.txt: exit 2 naming the extension ({p.stderr.strip()})")
    # Plans no checkpoint region expresses: refused with the reason.
    net, _, _ = apply_models.mlp()
    for spec, words in (("recompute-all", "more than once"), ("offload:4", "save_on_cpu"),
                        ("sqrt+compress:int8", "no single cast")):
        path = os.path.join(out, "refused.plan.json")
        p = remat_json(args.remat, "export", "--model", models["mlp"], "--strategy", spec, "--torch-plan", path)
        check(p.returncode == 0, f"export --torch-plan {spec} ({p.stderr.strip()})")
        if p.returncode != 0:
            continue
        try:
            remat_capture.apply(net, path)
            check(False, f"apply {spec}: refused")
        except remat_capture.PlanError as e:
            check(words in str(e), f"apply {spec}: refused, saying '{words}' ({e})")
    # Checkpoint regions cannot convert what they keep.
    try:
        remat_capture.apply(net, os.path.join(out, "mlp.sqrt+compress_bf16.plan.json"), how="regions")
        check(False, "apply sqrt+compress:bf16 with how='regions': refused")
    except remat_capture.PlanError as e:
        check("no checkpoint region converts" in str(e), f"apply sqrt+compress:bf16 with how='regions': refused ({e})")
    try:
        remat_capture.apply(net, {"format": "something else"})
        check(False, "apply of a dict that is no plan: refused")
    except remat_capture.PlanError as e:
        check("not a remat torch plan" in str(e), f"apply of a dict that is no plan: refused ({e})")
    # The command line: apply --check prints the comparison and exits 0.
    plan = os.path.join(out, "mlp.manual_1-6-11-16-21.plan.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    p = subprocess.run([sys.executable, "-m", "remat_capture", "apply", os.path.join(HERE, "apply_models.py:build"),
                        plan, "--check"], capture_output=True, text=True, env=env)
    print(p.stdout + p.stderr)
    check(p.returncode == 0 and "kept at forward end" in p.stdout and "DIFFER" not in p.stdout,
          "python3 -m remat_capture apply apply_models.py:build PLAN --check: every figure agrees, exit 0")
    p = subprocess.run([sys.executable, "-m", "remat_capture", "apply", os.path.join(HERE, "apply_models.py:build"),
                        os.path.join(out, "missing.json")], capture_output=True, text=True, env=env)
    check(p.returncode == 2 and "missing.json" in p.stderr, f"apply with a missing plan: exit 2 ({p.stderr.strip()})")


if __name__ == "__main__":
    sys.exit(main())
