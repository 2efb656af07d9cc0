#!/usr/bin/env python3
"""Fails when CTest skipped a test that CI must run.

Under CI=true a test that needs a tool (PyTorch, torchvision, ONNX, ldd...)
must fail when the tool is missing, not report "skipped": tools/setup.sh runs
this after ctest. The skips allowed there are the GPU suites' (CI has no GPU)
and the checks labelled torch2 (PyTorch 2.x, which Debian 12 lacks;
tools/torch2-check.sh runs and requires them).

  tools/ci-skips.py BUILD_DIR JUNIT_XML
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

ALLOWED_LABELS = {"gpu", "torch2"}


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    build, junit = sys.argv[1], sys.argv[2]
    skipped = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.get("status") == "skipped" or case.find("skipped") is not None:
            skipped.append(case.get("name"))
    listing = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                                        capture_output=True, text=True).stdout)
    labels = {}
    for t in listing.get("tests", []):
        for prop in t.get("properties", []):
            if prop.get("name") == "LABELS":
                labels[t["name"]] = set(prop.get("value", []))
    bad = [name for name in skipped if not labels.get(name, set()) & ALLOWED_LABELS]
    for name in bad:
        print(f"FAIL: {name} was skipped; under CI=true a missing tool is a failure")
    print(f"ci-skips: {len(skipped)} skipped, {len(skipped) - len(bad)} allowed (labels gpu, torch2), {len(bad)} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
