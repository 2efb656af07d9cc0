#!/usr/bin/env python3
"""Fails when CTest skipped a test that CI must run.

Under CI=true a test that needs a tool (PyTorch, torchvision, ONNX, ldd...)
must fail when the tool is missing, not report "skipped": tools/setup.sh runs
this after ctest. The skips allowed there are the GPU suites' (CI has no GPU),
the checks labelled torch2 (PyTorch 2.x, which Debian 12 lacks;
tools/torch2-check.sh runs and requires them) and the two tests of another
build variant (ALLOWED_NAMES).

  tools/ci-skips.py BUILD_DIR JUNIT_XML
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

ALLOWED_LABELS = {"gpu", "torch2"}
# Tests whose skip is the build variant's, not a missing tool: each runs in
# the variant it checks.
ALLOWED_NAMES = {
    # test_exec again under AddressSanitizer (tools/setup.sh's build-asan).
    "BackendContract.ReadOfAReleasedTensorIsCaughtUnderAddressSanitizer",
    # a build without ONNX support (-DREMAT_ONNX=OFF, as the GPU machine's).
    "OnnxCases.WithoutOnnxSupportTheErrorSaysSo",
}


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
    bad = [name for name in skipped if not labels.get(name, set()) & ALLOWED_LABELS and name not in ALLOWED_NAMES]
    for name in bad:
        print(f"FAIL: {name} was skipped; under CI=true a missing tool is a failure")
    print(f"ci-skips: {len(skipped)} skipped, {len(skipped) - len(bad)} allowed (labels gpu, torch2; build variants), {len(bad)} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
