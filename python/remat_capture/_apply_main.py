"""python3 -m remat_capture apply FILE.py:FUNCTION plan.json [--input SHAPE] [--check]

Puts the plan `remat export --torch-plan` wrote on the module FUNCTION()
returns (as for capturing: the module, or (module, input[, loss_fn])) and
says how: which regions, with which checkpointing. With --check it runs one
training step with the plan and one without, and prints what PyTorch kept at
the end of the forward pass, the peak of live activations, the ops it
recomputed, the step time and whether the gradients agree, beside remat's
prediction. Exit codes: 0 applied (and, with --check, every figure agrees),
1 a figure disagrees, 2 bad arguments or a plan this PyTorch cannot apply."""
import argparse
import sys

import torch

from . import _apply, _measure


def _fail(msg):
    print(f"remat_capture apply: error: {msg}", file=sys.stderr)
    sys.exit(2)


def default_loss(out):
    """What capture() uses without a loss_fn: the output if scalar, else MSE
    against a seeded random target."""
    if out.dim() == 0:
        return out
    g = torch.Generator().manual_seed(0)
    return torch.nn.functional.mse_loss(out, torch.randn(out.shape, generator=g, dtype=out.dtype))


def check(module, applied, make_input, loss_fn, plan, out=sys.stdout):
    """One step without the plan and one with it; prints the comparison and
    returns whether every figure agrees (kept bytes exactly, the peak within
    2 %, the recomputed ops, the gradients allclose)."""
    base = _measure.measure_step(module, make_input, loss_fn)
    got = _measure.measure_step(applied, make_input, loss_fn, module=module)
    pred = plan["predicted"]
    recomputed = len(_measure.recomputed_ops(plan, got["recomputed"]))
    t_base = _measure.timed_step(module, make_input, loss_fn)
    t_plan = _measure.timed_step(applied, make_input, loss_fn, module=module)
    worst = max((float((got["grads"][n] - g).abs().max()) for n, g in base["grads"].items()), default=0.0)
    same = all(torch.allclose(got["grads"][n], g, rtol=1e-5, atol=1e-6) for n, g in base["grads"].items())
    peak_err = (got["peak"] - pred["peak_bytes"]) / pred["peak_bytes"] if pred["peak_bytes"] else 0.0
    rows = [("kept at forward end (B)", f"{got['kept']:,}", f"{pred['forward_end_bytes']:,}",
             got["kept"] == pred["forward_end_bytes"]),
            ("peak of live activations (B)", f"{got['peak']:,}", f"{pred['peak_bytes']:,}",
             abs(peak_err) <= 0.02),
            ("recomputed ops", f"{recomputed}", f"{pred['recompute_steps']}", recomputed == pred["recompute_steps"])]
    print(f"{'':30} {'PyTorch':>14} {'remat':>14}", file=out)
    for name, a, b, ok in rows:
        print(f"{name:30} {a:>14} {b:>14}  {'ok' if ok else 'DIFFERS'}", file=out)
    print(f"{'without the plan: kept, peak':30} {base['kept']:>14,} {base['peak']:>14,}", file=out)
    print(f"peak: {peak_err * 100:+.2f} % of remat's; step time {t_plan * 1e3:.2f} ms with the plan, "
          f"{t_base * 1e3:.2f} ms without; gradients {'allclose' if same else 'DIFFER'} "
          f"(largest difference {worst:.3g})", file=out)
    return all(ok for *_, ok in rows) and same


def main(argv):
    from .__main__ import load_module
    ap = argparse.ArgumentParser(prog="python3 -m remat_capture apply", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("function", help="FILE.py:FUNCTION returning the module (as for capturing)")
    ap.add_argument("plan", help="the plan: remat export --torch-plan FILE.json")
    ap.add_argument("--input", help="example input: SHAPE[:DTYPE[:HIGH]] (as for capturing)")
    ap.add_argument("--check", action="store_true", help="run a step with and without the plan and compare")
    ap.add_argument("--plain", action="store_true",
                    help="plain checkpoint regions even where selective checkpointing is available")
    args = ap.parse_args(argv)
    try:
        plan = _apply.load_plan(args.plan)
    except (OSError, ValueError) as e:
        _fail(f"'{args.plan}': {e}")
    module, example, loss_fn = load_module(args.function, args.input, fail=_fail)
    try:
        applied = _apply.apply(module, plan, selective=False if args.plain else None)
    except _apply.PlanError as e:
        _fail(str(e))
    print(applied.describe())
    if not args.check:
        return 0
    if example is None:
        _fail("--check needs an example input: give --input SHAPE or return (module, input) from the function")
    module.train()
    ok = check(module, applied, lambda: example.clone(), loss_fn or default_loss, plan)
    return 0 if ok else 1
