#!/usr/bin/env python3
"""`remat compare-snapshot` on a snapshot built here in the format
torch.cuda.memory._dump_snapshot() writes (PyTorch 2.x: a dict of
'segments' and 'device_traces' whose entries are alloc / free_requested /
free_completed with addr, size, stream and frames), pickled by Python's own
pickle (protocols 2 and 4, with shared frame lists, as PyTorch's are) and as
JSON. No GPU is needed: the file format is what is tested. Every expected
figure is derived here from the events written.

  test_compare_snapshot.py --remat PATH --out DIR"""
import json
import os
import pickle
import subprocess
import sys

from harness import check, parse_args, summary  # noqa: E402


FWD = [{"filename": "/home/u/train.py", "line": 12, "name": "forward"},
       {"filename": "/home/u/train.py", "line": 30, "name": "step"}]
BWD = [{"filename": "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", "line": 200, "name": "backward"},
       {"filename": "/home/u/train.py", "line": 31, "name": "step"}]


def build_snapshot():
    """A recorded step: parameters allocated before recording (still active),
    a batch freed during it, four forward allocations, then a backward pass."""
    base = 0x7F00_0000_0000
    params, batch = 1 << 20, 4096
    events, addr = [], base + (2 << 20)
    sizes_fwd = [8192, 8192, 16384, 1000]
    blocks = []
    for s in sizes_fwd:
        events.append({"action": "alloc", "addr": addr, "size": s, "stream": 0, "frames": FWD})  # shared list
        blocks.append((addr, s))
        addr += (s + 511) // 512 * 512
    # Backward: a gradient, then the activations go, then the gradient.
    events.append({"action": "alloc", "addr": addr, "size": 20000, "stream": 0, "frames": BWD})
    grad = (addr, 20000)
    for a, s in reversed(blocks):
        events.append({"action": "free_requested", "addr": a, "size": s, "stream": 0, "frames": BWD})
        events.append({"action": "free_completed", "addr": a, "size": s, "stream": 0, "frames": BWD})
    events.append({"action": "free_requested", "addr": base + params, "size": batch, "stream": 0, "frames": BWD})
    events.append({"action": "free_completed", "addr": base + params, "size": batch, "stream": 0, "frames": BWD})
    events.append({"action": "free_completed", "addr": grad[0], "size": grad[1], "stream": 0, "frames": BWD})
    total = 4 << 20
    segment = {"device": 0, "address": base, "total_size": total, "allocated_size": params, "active_size": params,
               "requested_size": params - 100, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": [],
               "blocks": [{"address": base, "size": params, "requested_size": params - 100,
                           "state": "active_allocated", "frames": FWD},
                          {"address": base + params, "size": total - params, "requested_size": 0,
                           "state": "inactive", "frames": []}]}
    snap = {"segments": [segment], "device_traces": [events], "allocator_settings": {"max_split_size": -1}}
    # Expected, from the events: what lived before recording is the
    # parameters' block (as asked) and the batch freed without an alloc.
    start = (params - 100) + batch
    cur, curve = start, []
    for e in events:
        if e["action"] == "alloc":
            cur += e["size"]
        elif e["action"] == "free_completed":
            cur -= e["size"]
        else:
            continue
        curve.append(cur)
    return snap, start, max(curve) - start, len(sizes_fwd)


def main():
    args = parse_args()
    snap, start, peak_above, first_bwd = build_snapshot()
    sim = json.loads(subprocess.run([args.remat, "simulate", "--model", "mlp:4:64:8", "--strategy", "store-all",
                                     "--json"], capture_output=True, text=True, check=True).stdout)["strategies"][0]
    paths = {}
    for proto in (2, 4):
        paths[f"pickle protocol {proto}"] = os.path.join(args.out, f"snap_p{proto}.pickle")
        with open(paths[f"pickle protocol {proto}"], "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    paths["json"] = os.path.join(args.out, "snap.json")
    with open(paths["json"], "w") as f:
        json.dump(snap, f)
    for what, path in paths.items():
        svg = os.path.join(args.out, f"cmp_{os.path.basename(path)}.svg")
        out = subprocess.run([args.remat, "compare-snapshot", "--model", "mlp:4:64:8", "--strategy", "store-all", path,
                              "--json", "--svg", svg], capture_output=True, text=True)
        check(out.returncode == 0, f"{what}: exits 0 ({out.stderr.strip()})")
        if out.returncode:
            continue
        c = json.loads(out.stdout)
        check(c["measured_start_bytes"] == start, f"{what}: active when recording began {c['measured_start_bytes']} == {start}")
        check(c["measured_peak_bytes"] == peak_above, f"{what}: recorded peak above it {c['measured_peak_bytes']} == {peak_above}")
        check(c["predicted_peak_bytes"] == sim["peak_bytes"], f"{what}: predicted peak == remat simulate's")
        check(c["difference_bytes"] == peak_above - sim["peak_bytes"], f"{what}: difference")
        # The backward pass starts at the first entry under autograd's backward:
        # it is mapped onto the first bwd instruction of the prediction.
        xs = c["measured_x"]
        check(len(xs) == 4 + 1 + 4 + 2, f"{what}: one point per alloc and free_completed ({len(xs)})")
        check(xs[first_bwd] == c["predicted_backward_instruction"] and xs[first_bwd - 1] < xs[first_bwd],
              f"{what}: the recording's backward starts on the prediction's first bwd")
        check(any("autograd's backward" in line for line in c["explanation"]), f"{what}: says how the phases were split")
        rounding = snap["segments"][0]["blocks"][0]["size"] - snap["segments"][0]["blocks"][0]["requested_size"]
        check(any("rounding" in line and f" {rounding} bytes " in line for line in c["explanation"]),
              f"{what}: names the allocator rounding of the active blocks ({rounding} bytes)")
        with open(svg) as f:
            text = f.read()
        check(text.count("<polyline") == 2 and "backward" in text, f"{what}: the SVG draws both curves and the phases")

    table = subprocess.run([args.remat, "compare-snapshot", "-m", "mlp:4:64:8", paths["pickle protocol 4"]],
                           capture_output=True, text=True)
    check(table.returncode == 0 and "difference:" in table.stdout, "the table form prints the explanation")

    # A pickle holding a Python object is refused without running anything.
    evil = os.path.join(args.out, "evil.pickle")
    with open(evil, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[]], "x": os.path.join}, f, protocol=4)
    out = subprocess.run([args.remat, "compare-snapshot", "-m", "mlp:4:64:8", evil], capture_output=True, text=True)
    check(out.returncode == 2 and "Python object" in out.stderr and out.stderr.count("\n") == 1,
          f"a pickled function: exit 2, one line ({out.stderr.strip()})")
    # Bad input: one line, exit 2, no --svg file left behind.
    cut = os.path.join(args.out, "cut.pickle")
    with open(paths["pickle protocol 4"], "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:200])
    old = os.path.join(args.out, "old.pickle")
    with open(old, "wb") as f:
        pickle.dump(snap["segments"], f)
    no_trace = os.path.join(args.out, "no_trace.pickle")
    with open(no_trace, "wb") as f:
        pickle.dump({"segments": snap["segments"]}, f, protocol=4)
    for path, says, what in ((cut, "at byte 200", "a truncated pickle"),
                             (old, "_record_memory_history", "a list of segments (PyTorch 1.x, no trace)"),
                             (no_trace, "no 'device_traces'", "a snapshot without device_traces")):
        svg = os.path.join(args.out, "bad_input.svg")
        out = subprocess.run([args.remat, "compare-snapshot", "-m", "mlp:4:64:8", path, "--svg", svg],
                             capture_output=True, text=True)
        check(out.returncode == 2 and out.stderr.count("\n") == 1 and says in out.stderr and path in out.stderr
              and not os.path.exists(svg), f"{what}: exit 2, one line naming the file, no SVG ({out.stderr.strip()})")
    for svg, says in ((os.path.join(args.out, "picture.png"), "ending in .svg"),
                      (os.path.join(args.out, "no", "such", "x.svg"), "does not exist")):
        out = subprocess.run([args.remat, "compare-snapshot", "-m", "mlp:4:64:8", paths["json"], "--svg", svg],
                             capture_output=True, text=True)
        check(out.returncode == 2 and out.stderr.count("\n") == 1 and "--svg" in out.stderr and says in out.stderr
              and not os.path.exists(svg), f"--svg {os.path.relpath(svg, args.out)}: exit 2, no file ({out.stderr.strip()})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
