#!/usr/bin/env python3
"""test_capture.py's check_sdpa as a test of its own: F.scaled_dot_product_attention
captured as one fused Attention op, with PyTorch 2.x. A torch without the
fused CPU kernel (Debian 12's 1.13) skips it, exit 77 with the reason, so
that CTest shows a skip instead of a pass; tools/torch2-check.sh sets
REMAT_REQUIRE_TORCH2=1, where its absence is a failure.

  test_capture_sdpa.py --remat PATH --out DIR"""
import os
import sys

import test_capture
from harness import parse_args, summary


def main():
    args = parse_args()
    why = test_capture.fused_sdpa()
    if why:
        print(("FAIL: " if os.environ.get("REMAT_REQUIRE_TORCH2") == "1" else "SKIP: ") + why)
        return 1 if os.environ.get("REMAT_REQUIRE_TORCH2") == "1" else 77
    test_capture.check_sdpa(args)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
