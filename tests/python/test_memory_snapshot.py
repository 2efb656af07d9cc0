#!/usr/bin/env python3
"""`remat export --memory-snapshot` checked with the installed PyTorch's own
tooling (torch.cuda._memory_viz: with PyTorch 2.x segsum, trace, trace_plot,
segments and memory on the snapshot dict; with 1.13, whose functions take the
list of segments, stats, segments and memory) and with a replay of the trace
by the rules of PyTorch's web viewer: the active-memory curve's maximum is
remat's predicted peak to the byte, live blocks never overlap, blocks tile
their segment. The pickle loads with Python's pickle and equals the .json
export; --measured writes what the executor allocated.

  test_memory_snapshot.py --remat PATH --out DIR"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_replay import check_tiling, replay  # noqa: E402

try:
    import torch
    import torch.cuda._memory_viz as memory_viz
except Exception as e:  # noqa: BLE001
    print(f"SKIP: torch not importable with {sys.executable}: {e}")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

from harness import check, parse_args, remat, summary  # noqa: E402


def simulate(args, model, strategy):
    out = remat(args, "simulate", "--model", model, "--strategy", strategy, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["strategies"][0]


def verify_with_torch(snap, name):
    """The installed PyTorch's _memory_viz functions on the snapshot; returns their names."""
    ran = []
    identity = lambda lines: lines  # noqa: E731 - no flamegraph.pl download: the lines themselves
    if hasattr(memory_viz, "segsum"):  # PyTorch 2.x: the dict
        memory_viz.segsum(snap)        # asserts free + allocated == reserved per segment
        text = memory_viz.trace(snap)
        check(f"{len(snap['device_traces'][0])} entries" in text, f"{name}: _memory_viz.trace reads every entry")
        check("<html>" in memory_viz.trace_plot(snap).lower() or "html" in memory_viz.trace_plot(snap).lower(),
              f"{name}: _memory_viz.trace_plot makes the viewer page")
        lines = memory_viz.segments(snap, format_flamegraph=identity)
        memory_viz.memory(snap, format_flamegraph=identity)
        ran += ["segsum", "trace", "trace_plot", "segments", "memory"]
    else:  # PyTorch 1.13: the functions take the list of segments
        st = memory_viz.stats(snap["segments"])  # asserts total_size == sum of the blocks
        check(st["total_size"].value == sum(s["total_size"] for s in snap["segments"]),
              f"{name}: _memory_viz.stats adds up the segments")
        lines = memory_viz.segments(snap["segments"], format_flamegraph=identity)
        memory_viz.memory(snap["segments"], format_flamegraph=identity)
        ran += ["stats", "segments", "memory"]
    total = sum(int(line.rsplit(" ", 1)[1]) for line in lines.splitlines() if line)
    check(total == sum(s["total_size"] for s in snap["segments"]),
          f"{name}: _memory_viz.segments accounts for every byte of the segments")
    return ran


def main():
    args = parse_args()
    print(f"PyTorch {torch.__version__}")
    cases = [("mlp:4:64:8", "sqrt"), ("mlp:4:64:8", "recompute-all"), ("gpt:1:32:2:16:1:f32:40", "sqrt"),
             ("resnet:10:8:32:2", "recompute-all")]
    for model, strategy in cases:
        name = f"{model} {strategy}"
        base = os.path.join(args.out, model.replace(":", "_") + "_" + strategy)
        out = remat(args, "export", "--model", model, "--strategy", strategy, "--memory-snapshot", base + ".pickle")
        check(out.returncode == 0, f"{name}: export exits 0 ({out.stderr.strip()})")
        out = remat(args, "export", "--model", model, "--strategy", strategy, "--memory-snapshot", base + ".json")
        check(out.returncode == 0, f"{name}: export .json exits 0 ({out.stderr.strip()})")
        with open(base + ".pickle", "rb") as f:
            raw = f.read()
        check(raw[:2] == b"\x80\x04", f"{name}: pickle protocol 4")
        snap = pickle.loads(raw)
        with open(base + ".json") as f:
            check(json.load(f) == snap, f"{name}: the .json export holds the same snapshot")
        sim = simulate(args, model, strategy)
        curve, peak = replay(snap)
        check(peak == sim["peak_bytes"], f"{name}: the viewer's active-memory maximum {peak} == predicted peak {sim['peak_bytes']}")
        check_tiling(snap)
        ran = verify_with_torch(snap, name)
        print(f"      verified with torch.cuda._memory_viz.{', '.join(ran)} of PyTorch {torch.__version__}")
        allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
        recomputed = [e for e in allocs if e["frames"][0]["name"].startswith("fwd ") and "(recompute)" in e["frames"][0]["name"]]
        if model.startswith("mlp"):
            # No views, no aux: every fwd allocates one block, so recomputes are counted exactly.
            check(len(recomputed) == sim["recompute_steps"],
                  f"{name}: {len(recomputed)} allocations labelled '(recompute)' == recompute steps {sim['recompute_steps']}")

    # --measured: what the executor allocated, labelled by instruction.
    base = os.path.join(args.out, "mlp_measured")
    out = remat(args, "export", "--model", "mlp:4:64:8", "--strategy", "sqrt", "--memory-snapshot", base + ".pickle",
                "--measured", "--backend", "cpu")
    check(out.returncode == 0, f"--measured exits 0 ({out.stderr.strip()})")
    remat(args, "export", "--model", "mlp:4:64:8", "--strategy", "sqrt", "--memory-snapshot", base + "_pred.pickle")
    with open(base + ".pickle", "rb") as f:
        measured = pickle.load(f)
    with open(base + "_pred.pickle", "rb") as f:
        predicted = pickle.load(f)
    m_allocs = [(e["size"], e["frames"][0]["name"]) for e in measured["device_traces"][0] if e["action"] == "alloc"]
    p_allocs = [(e["size"], e["frames"][0]["name"]) for e in predicted["device_traces"][0] if e["action"] == "alloc"]
    check(m_allocs == p_allocs, "--measured: the executor allocated what the prediction says, in order, same labels")
    times = [e["time_us"] for e in measured["device_traces"][0] if "time_us" in e]
    check(len(times) > 0 and times == sorted(times), "--measured: entries carry measured times, in order")
    verify_with_torch(measured, "--measured")

    for bad, says in ((os.path.join(args.out, "bad.txt"), ".pickle"),
                      (os.path.join(args.out, "no", "such", "s.pickle"), "does not exist")):
        out = remat(args, "export", "--model", "mlp:4:64:8", "--memory-snapshot", bad, "--measured", "--backend", "cpu")
        check(out.returncode == 2 and out.stderr.count("\n") == 1 and says in out.stderr and not os.path.exists(bad),
              f"--memory-snapshot {os.path.relpath(bad, args.out)}: exit 2, one line, no file ({out.stderr.strip()})")
    # --measured of a model no backend runs: refused before any file.
    # (chain:8's byte-sized tensors are marked simulate-only.)
    out = remat(args, "export", "--model", "chain:8", "--memory-snapshot", base + "_chain.pickle",
                "--measured", "--backend", "cpu")
    check(out.returncode == 2 and "simulate-only" in out.stderr and not os.path.exists(base + "_chain.pickle"),
          f"--measured of a simulate-only model: exit 2, no file ({out.stderr.strip()[:120]})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
