#!/usr/bin/env python3
"""Why does the judge's worker read Python-launched kernels slower on the events
and sync tiers than a plain process does? (results/judge-check/20261123-H100-session3)

Runs on a GPU machine, from the repository root::

    python scripts/events_probe.py [--batch 1] [--calls 300]

It times fla-recurrent's ``run`` in THIS process (no judge) with the judge's own
events and sync loops (``harness.judge.timing``), under conditions the worker differs in,
one at a time, and prints per condition the events and sync medians and the
host time of ``run``:

* ``plain``: nothing else;
* ``idle-context``: another process holds a CUDA context on the same GPU and
  does nothing (the judge does, during a worker's tiers);
* ``busy-reader``: another process wakes up on every call (a pipe write per
  call, answered on another pipe, read only when 8 answers are pending: the
  worker's destination ring and the judge's thread per message);
* ``both``.

The same numbers from the judge come from ``run_local.py --algo fla-recurrent
--tiers events,sync -v``: each trace's events and sync figures carry
``host_call_us``. Where the plain process and a condition differ as the judge
does, that condition is the cause.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.judge.solutions import load_meta, load_solution  # noqa: E402
from harness.judge.timing import L2Flusher, TimingConfig, bench_events, bench_sync  # noqa: E402
from harness.paths import SOLUTIONS_DIR  # noqa: E402
from tools.tuning import random_inputs  # noqa: E402

RING = 8  # the worker's destination ring holds up to 8 sets


@contextmanager
def idle_context():
    """A child process that holds a CUDA context on this GPU and sleeps."""
    pid = os.fork()
    if pid == 0:
        torch.zeros(1, device="cuda")
        time.sleep(3600)
        os._exit(0)
    time.sleep(3)  # let it create its context
    try:
        yield
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


class BusyReader:
    """A child process answering a 16-byte message per call, as the judge answers ``Called``."""

    def __init__(self):
        self.to_child_r, self.to_child_w = os.pipe()
        self.to_parent_r, self.to_parent_w = os.pipe()
        self.pending = 0
        self.pid = os.fork()
        if self.pid == 0:
            while data := os.read(self.to_child_r, 16):
                os.write(self.to_parent_w, data)
            os._exit(0)

    def called(self) -> None:
        os.write(self.to_child_w, b"x" * 16)
        self.pending += 1
        if self.pending >= RING:  # the ring needs the oldest answer before it reuses a set
            os.read(self.to_parent_r, 16)
            self.pending -= 1

    def close(self) -> None:
        os.close(self.to_child_w)
        os.waitpid(self.pid, 0)


def measure(run, setup, flush, calls: int, after=lambda: None) -> tuple[float, float, float]:
    """(events µs, sync µs, host µs of ``run`` in the events tier): the judge's own tier loops
    (harness.judge.timing), here in a plain process."""
    config = TimingConfig(iters=calls, budget_s=60.0)
    events = bench_events(run, lambda index: setup(), flush, config, lambda index: after())
    sync = bench_sync(run, lambda index: setup(), flush, config, lambda index: after())
    return events.value_us, sync.value_us, events.extra["host_call_us"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    solution = load_solution(load_meta(SOLUTIONS_DIR / "fla-recurrent"))
    base = random_inputs(args.batch, "cuda", seed=args.batch)
    flush = L2Flusher("cuda")

    def setup():
        return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in base.items()}

    print(f"fla-recurrent B={args.batch}, {args.calls} calls, {torch.cuda.get_device_name()}")
    print(f"{'condition':14s} {'events µs':>10s} {'sync µs':>10s} {'host run() µs':>14s}")

    def row(name: str, after=lambda: None) -> None:
        events, sync, host = measure(solution.run, setup, flush, args.calls, after=after)
        print(f"{name:14s} {events:10.1f} {sync:10.1f} {host:14.1f}", flush=True)

    row("plain")
    with idle_context():
        row("idle-context")
    reader = BusyReader()
    row("busy-reader", reader.called)
    with idle_context():
        row("both", reader.called)
    reader.close()
    row("plain again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
