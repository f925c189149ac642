#!/usr/bin/env python3
"""Check and time GDN decode solutions on this machine.

    python run_local.py --algo pt-reference --device cpu
    python run_local.py --algo all --workloads contest-v2 --tiers cupti,events,sync

Exits non-zero only when the harness itself fails (bad arguments, malformed
dataset: 2) or is stopped (Ctrl-C, SIGINT, SIGTERM or SIGHUP: 130, after writing what
finished); a failing solution is a status in the results, not an exit code.
"""

import sys

from harness import interrupts

if __name__ == "__main__":
    interrupts.install()  # first: torch's import takes a second, and a Ctrl-C then is a stop like any other
    try:
        from harness.cli import install_signal_handlers, main
    except KeyboardInterrupt:
        print("interrupted before the run began: nothing was judged or written", file=sys.stderr)
        sys.exit(130)
    install_signal_handlers()
    sys.exit(main(sys.argv[1:]))
