#!/usr/bin/python3
"""torch_crosscheck.py's summation floor on gradients that are 0 exactly
(tests/exec/models/zero_beta.json: bn1's β and conv2's bias, each followed by
another batch norm, which removes any shift):

- PyTorch's float64 gradient there is 0 up to float64's rounding of its
  terms (|ref| <= 1e-12 * sum|terms|), so the float32 value remat sums is
  rounding noise;
- remat's value is outside atol * max|ref| + rtol * |ref| (the check without
  the floor could not pass it);
- it is within 2^-23 * sum|terms| (float32's epsilon: the floor), element by element;
- torch_crosscheck.py itself passes the model (every gradient, the loss).

  summation_floor_check.py --remat PATH

Exit 77 (CTest skip) without torch."""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIP: cannot import torch/numpy with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_crosscheck as tc  # noqa: E402

MODEL = os.path.join(HERE, "models", "zero_beta.json")
ZERO = ["2.beta", "3.bias"]  # 0 exactly: a shift the next batch norm removes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    a = ap.parse_args()
    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "dump")
        subprocess.run([a.remat, "run", "--model", MODEL, "--strategy", "sqrt", "--backend", "cpu", "--repeat", "1",
                        "--seed", "3", "--dump", d], check=True, capture_output=True)
        t, meta = tc.read_safetensors(os.path.join(d, "tensors.safetensors"))
        ops = tc.load_graph(d, meta)
    records = []
    loss, leaves = tc.rebuild(ops, t, records=records)
    loss.backward()
    floor = tc.summation_floor(records, leaves)
    terms = {f"{op['id']}.{tc.added_param(op)[0]}": y.grad.abs() for op, y in records}
    for key in ZERO:
        ref = leaves[key].grad.numpy()
        got = t["grad." + key].astype(np.float64)
        g = terms[key]
        total = g.sum(dim=[d for d in range(g.dim()) if d != 1]).numpy()
        check(np.all(np.abs(ref) <= 1e-12 * total), f"{key}: PyTorch's float64 gradient is 0 up to its rounding "
                                                    f"(max |ref| {np.abs(ref).max():.1e}, sum|terms| {total.min():.2e}..)")
        old = np.abs(ref).max() * 1e-5 + 1e-4 * np.abs(ref)
        check(np.any(np.abs(got - ref) > old), f"{key}: remat's float32 sum (up to {np.abs(got).max():.1e}) is outside "
                                               f"the relative tolerance alone")
        check(np.array_equal(floor[key], 2.0 ** -23 * total), f"{key}: the floor is 2^-23 * sum|terms| per channel")
        worst = float(np.max(np.abs(got - ref) / floor[key]))
        check(worst <= 1.0, f"{key}: every element within the floor (worst at {worst:.3f} of it)")
    cross = subprocess.run([sys.executable, os.path.join(HERE, "torch_crosscheck.py"), "--remat", a.remat,
                            "--model", MODEL, "--strategy", "sqrt"], capture_output=True, text=True)
    check(cross.returncode == 0, f"torch_crosscheck.py passes the model ({cross.stdout.strip()[-300:]})")
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
