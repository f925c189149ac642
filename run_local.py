#!/usr/bin/env python3
"""Check and time GDN decode solutions on this machine.

    python run_local.py --algo pt-reference --device cpu
    python run_local.py --algo all --workloads contest-v2 --tiers cupti,events,sync

Exits non-zero only when the harness itself fails (bad arguments, malformed
dataset); a failing solution is a status in the results, not an exit code.
"""

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
