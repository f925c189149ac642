"""The host's speed over time, beside a measurement: one CPU runs the sync tier's pure-Python
stand-in back to back and logs each 20-ms block's median with its wall-clock start (issue #29).

    python -m tools.host_speed_log --out FILE [--cpu N] [--seconds S]

Why: a cross-check's two sides read the host's speed in their own processes
(``harness.judge.timing.host_speed``), and the worker read it slow more often than the plain process
(results/proof/20261127-H100-parity-trials-df1fce0). A stand-in that never stops, pinned to one CPU,
says how slow the machine was at the same moments, so a gap that is the machine's moment can be
told from one that is the worker's (``tools/tier_parity.py --speed-log``). Each line of FILE:
``<epoch seconds> <median µs>``. Runs until ``--seconds`` pass, or until it is terminated.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

from harness.judge.timing.host_speed import stand_in_s

#: Seconds of stand-ins a logged block takes the median of.
BLOCK_S = 0.02


def log(out: Path, seconds: float | None = None) -> int:
    """Log blocks into ``out`` (one line each, flushed) for ``seconds`` (None: until SIGTERM or
    SIGINT); returns the blocks logged."""
    stop = {"now": False}

    def ask_to_stop(*_):
        stop["now"] = True

    signal.signal(signal.SIGTERM, ask_to_stop)
    signal.signal(signal.SIGINT, ask_to_stop)
    end = float("inf") if seconds is None else time.time() + seconds
    blocks = 0
    with out.open("w") as file:
        while not stop["now"] and time.time() < end:
            began, until, readings = time.time(), time.perf_counter() + BLOCK_S, []
            while time.perf_counter() < until:
                readings.append(stand_in_s())
            file.write(f"{began:.3f} {statistics.median(readings) * 1e6:.2f}\n")
            file.flush()
            blocks += 1
    return blocks


def read_log(path: Path) -> list[tuple[float, float]]:
    """``[(epoch seconds, median µs)]`` of a log :func:`log` wrote; a line cut short by the end of
    the logger is left out.

    Raises:
        OSError: the file cannot be read.
    """
    blocks = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 2:
            try:
                blocks.append((float(fields[0]), float(fields[1])))
            except ValueError:
                continue
    return blocks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: not pinned)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: when terminated)")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        try:
            os.sched_setaffinity(0, {args.cpu})
        except OSError as exc:
            print(f"error: --cpu {args.cpu}: {exc}", file=sys.stderr)
            return 2
    if not args.out.parent.is_dir():
        print(f"error: --out {args.out}: no folder {args.out.parent} to write it in", file=sys.stderr)
        return 2
    log(args.out, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
