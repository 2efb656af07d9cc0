"""Replays a memory snapshot's trace the way PyTorch's viewer does
(torch/utils/viz/MemoryViz.js, process_alloc_data and MemoryView): blocks
allocated before the trace, then alloc and free_completed in order; checks
that live blocks never overlap and lie inside a segment. Shared by the tests."""


def replay(snap, device=0):
    """(active bytes after each alloc/free, max) with the viewer's rules."""
    trace = snap["device_traces"][device]
    segs = [s for s in snap["segments"] if s.get("device", 0) == device]
    ranges = [(s["address"], s["address"] + s["total_size"]) for s in segs]
    for e in trace:
        if e["action"] == "segment_alloc":
            ranges.append((e["addr"], e["addr"] + e["size"]))
    live = {}
    active, curve = 0, []
    for e in trace:
        if e["action"] == "alloc":
            a, size = e["addr"], e["size"]
            assert a not in live, f"address {a:#x} allocated twice"
            end = a + max(512, (size + 511) // 512 * 512)
            assert any(lo <= a and end <= hi for lo, hi in ranges), f"block {a:#x} outside every segment"
            for b, bend in live.values():
                assert end <= b or bend <= a, f"block {a:#x} overlaps a live block at {b:#x}"
            live[a] = (a, end)
            active += size
            curve.append(active)
        elif e["action"] == "free_completed":
            assert e["addr"] in live, f"free of {e['addr']:#x}, never allocated"
            del live[e["addr"]]
            active -= e["size"]
            curve.append(active)
    return curve, max(curve) if curve else 0


def check_tiling(snap):
    """Blocks of each segment cover it exactly, from its address on."""
    for s in snap["segments"]:
        addr = s["address"]
        for b in s["blocks"]:
            if "address" in b:
                assert b["address"] == addr, f"block at {b['address']:#x}, expected {addr:#x}"
            addr += b["size"]
        assert addr == s["address"] + s["total_size"], "blocks do not add up to the segment"
