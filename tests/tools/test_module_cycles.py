#!/usr/bin/env python3
"""tools/module-cycles.py on planted trees: a clean one passes, a cycle between
two modules and a core file including Qt each fail with the offender named.

  test_module_cycles.py PATH/TO/module-cycles.py"""
import os
import subprocess
import sys
import tempfile


def tree(files):
    root = tempfile.mkdtemp(prefix="remat-cycles-")
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return root


def run(tool, root):
    r = subprocess.run([sys.executable, tool, "--root", root], capture_output=True, text=True)
    return r.returncode, r.stdout


def main():
    tool = sys.argv[1]
    failures = 0

    def expect(cond, what, out):
        nonlocal failures
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures += 1
            print(out)

    clean = {"core/a.h": '#include "core/b.h"\n', "core/a.cpp": '#include "core/a.h"\n', "core/b.h": "#include <vector>\n"}
    rc, out = run(tool, tree(clean))
    expect(rc == 0 and "0 cycles, 0 layer breaches" in out, "a clean tree passes", out)

    # b.cpp includes a.h: the modules core/a and core/b depend on each other.
    cyclic = dict(clean, **{"core/b.cpp": '#include "core/b.h"\n#include "core/a.h"\n'})
    rc, out = run(tool, tree(cyclic))
    expect(rc == 1 and "cycle: core/a <-> core/b" in out, "a cycle through a source file is found and named", out)

    qt = dict(clean, **{"core/c.cpp": "#include <QString>\n"})
    rc, out = run(tool, tree(qt))
    expect(rc == 1 and "core/c.cpp: includes <QString>" in out, "Qt in core/ is a layer breach", out)

    up = dict(clean, **{"gpu/k.cu": '#include "widgets/view.h"\n', "widgets/view.h": ""})
    rc, out = run(tool, tree(up))
    expect(rc == 1 and "gpu/k.cu: includes <widgets/view.h>" in out, "gpu/ including widgets/ is a layer breach", out)

    print(f"{failures} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
