"""python3 -m remat_capture FILE.py:FUNCTION --input SHAPE[:DTYPE[:HIGH]] -o model.json
python3 -m remat_capture apply FILE.py:FUNCTION plan.json [--check]   (see _apply_main.py)

FUNCTION() returns the nn.Module, or (module, example_input), or
(module, example_input, loss_fn). --input makes the example input when the
function gives none: a comma-separated shape, float32 normal values by default,
or integer ids in [0, HIGH) with :int64:HIGH (token ids for an embedding).
Exit codes: 0 written, 2 bad arguments or a model that cannot be captured."""
import argparse
import importlib.util
import os
import sys

import torch

from . import capture, save


def fail(msg):
    print(f"remat_capture: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load_function(spec):
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        fail(f"'{spec}': expected FILE.py:FUNCTION")
    if not os.path.isfile(path):
        fail(f"'{path}': no such file")
    mod_spec = importlib.util.spec_from_file_location("_remat_user_model", path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: say what failed
        fail(f"'{path}' raised {type(e).__name__}: {e}")
    if not hasattr(module, func):
        fail(f"'{path}' has no function '{func}'")
    return getattr(module, func)


def load_module(function, input_text, fail=fail):
    """What FILE.py:FUNCTION builds, as (module, example input or None,
    loss function or None): it returns a module, or (module, input[,
    loss_fn]); --input, when given, replaces the example. `fail` reports a
    bad one (capture's and apply's own messages)."""
    built = load_function(function)()
    loss_fn, example = None, None
    if isinstance(built, tuple):
        if len(built) not in (2, 3):
            fail(f"{function} returned a tuple of {len(built)}; expected (module, input[, loss_fn])")
        module, example = built[0], built[1]
        loss_fn = built[2] if len(built) == 3 else None
    else:
        module = built
    if not isinstance(module, torch.nn.Module):
        fail(f"{function} returned {type(module).__name__}, not a torch.nn.Module")
    if input_text:
        example = parse_input(input_text)
    return module, example, loss_fn


def parse_input(text):
    parts = text.split(":")
    try:
        shape = [int(s) for s in parts[0].split(",")]
    except ValueError:
        fail(f"--input '{text}': the shape must be comma-separated integers, e.g. 8,3,224,224")
    if not shape or any(s < 1 for s in shape):
        fail(f"--input '{text}': every dimension must be at least 1")
    dtype = parts[1] if len(parts) > 1 else "float32"
    g = torch.Generator().manual_seed(0)
    if dtype in ("float32", "f32"):
        return torch.randn(shape, generator=g)
    if dtype in ("int64", "i64", "int32", "i32"):
        if len(parts) < 3:
            fail(f"--input '{text}': integer ids need their range, e.g. 2,1024:int64:50257")
        try:
            high = int(parts[2])
        except ValueError:
            high = 0
        if high < 1:
            fail(f"--input '{text}': the id range '{parts[2]}' must be a positive integer")
        t = torch.randint(0, high, shape, generator=g)
        return t if dtype in ("int64", "i64") else t.int()
    fail(f"--input '{text}': dtype '{dtype}' (expected float32, int64 or int32)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "apply":
        from . import _apply_main
        return _apply_main.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python3 -m remat_capture", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("function", help="FILE.py:FUNCTION returning the module (see above)")
    ap.add_argument("--input", help="example input: SHAPE[:DTYPE[:HIGH]], e.g. 8,3,224,224 or 2,1024:int64:50257")
    ap.add_argument("-o", "--output", required=True, help="model file to write (.json)")
    ap.add_argument("--name", help="model name (default: the module's class)")
    args = ap.parse_args(argv)
    module, example, loss_fn = load_module(args.function, args.input)
    if example is None:
        fail("no example input: give --input SHAPE or return (module, input) from the function")
    try:
        doc = capture(module, example, loss_fn, name=args.name)
    except (ValueError, RuntimeError) as e:
        fail(str(e))
    save(doc, args.output)
    print(f"wrote {args.output}: {len(doc['ops'])} ops ({doc['description']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
