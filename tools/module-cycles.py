#!/usr/bin/env python3
"""Shows the project's module graph and fails on a cycle or a broken layer.

A module is a header and its source (core/sim/schedule.h + .cpp); module A
depends on B when any file of A includes a header of B. A cycle among modules
means neither can be read, tested or moved without the other. The layers are
the architecture's (docs/architecture.md): core/ includes no Qt, no CUDA and
nothing of gpu/, widgets/ or app/; gpu/ nothing of widgets/ or app/; widgets/
nothing of app/.

  tools/module-cycles.py            the check (exit 1 with each cycle or breach)
  tools/module-cycles.py --folders  also the folder-to-folder dependency counts
"""
import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ("core", "gpu", "widgets", "app")
EXTENSIONS = (".h", ".hpp", ".cuh", ".cpp", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
# What a layer must never include, by include path prefix.
FORBIDDEN = {
    "core": ("widgets/", "app/", "gpu/", "Q", "cuda", "cublas", "cudnn"),
    "gpu": ("widgets/", "app/", "Q"),
    "widgets": ("app/",),
}


def module_of(path):
    return os.path.splitext(path)[0]


def scan(root):
    """(module -> set of modules it includes, list of layer breaches)."""
    files = []
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(EXTENSIONS)]
    known = {module_of(f) for f in files}
    deps = defaultdict(set)
    breaches = []
    for f in sorted(files):
        mod = module_of(f)
        deps[mod]  # every module is a node, even one that includes nothing
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        layer = f.split("/")[0]
        for bracket, inc in INCLUDE.findall(text):
            for prefix in FORBIDDEN.get(layer, ()):
                # Qt's headers are <QWidget>, <QtCore/...>; CUDA's <cuda_runtime.h>.
                if inc.startswith(prefix) and (bracket == '"' or prefix[0] in "Qc"):
                    breaches.append(f"{f}: includes <{inc}> ({layer}/ may not)")
            if bracket == '"' and module_of(inc) in known and module_of(inc) != mod:
                deps[mod].add(module_of(inc))
    return deps, breaches


def cycles(deps):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # Iterative, so that long include chains do not hit Python's recursion limit.
        work = [(v, iter(sorted(deps[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(deps[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def folder_counts(deps):
    counts = defaultdict(int)
    for a, bs in deps.items():
        for b in bs:
            fa, fb = os.path.dirname(a), os.path.dirname(b)
            if fa != fb:
                counts[(fa, fb)] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folders", action="store_true", help="print folder-to-folder include counts")
    ap.add_argument("--root", default=ROOT, help="the checkout to scan (default: this one)")
    args = ap.parse_args()
    deps, breaches = scan(args.root)
    found = cycles(deps)
    if args.folders:
        for (a, b), n in sorted(folder_counts(deps).items()):
            print(f"{a} -> {b}: {n}")
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
    for b in breaches:
        print("layer: " + b)
    edges = sum(len(v) for v in deps.values())
    print(f"{len(deps)} modules, {edges} dependencies, {len(found)} cycles, {len(breaches)} layer breaches")
    return 1 if found or breaches else 0


if __name__ == "__main__":
    sys.exit(main())
