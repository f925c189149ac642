"""How fast the host's CPU runs Python right now: a fixed pure-Python stand-in, timed.

Why: a timer whose figure holds the host's launch path (the sync tier, and the events tier, for a
kernel launched from Python) reads the CPU's speed as much as the kernel. On the GPU machines
here one vCPU at a time runs single-threaded Python about 2x slower for 20 ms to seconds, with
no steal time reported, and the vCPUs do so independently of each other
(results/proof/20261127-H100-host-path-6470d35: the stand-in about 6-7.8 µs at full speed,
10-14 µs in those episodes; a Triton solution's host time of one call moves with it, correlation
0.87). So the sync tier records this beside its figure (``host_probe_us``): a reader can tell a
slow host from a slow launch, and tools/tier_parity.py compares the sync tier on the repeats that
ran at full speed (results/proof/20261127-H100-parity-speed-7bf32b9: a repeat read slow went with
the higher sync figure in 10 of 10 pairs).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: Multiply-adds of one stand-in: about 6.5 µs on the GPU machines' CPUs at full speed.
STAND_IN_STEPS = 200
#: Stand-ins a reading takes the median of (about 0.3 ms at full speed).
READINGS = 50


def stand_in_s() -> float:
    """Seconds (``time.perf_counter``) of :data:`STAND_IN_STEPS` pure-Python multiply-adds: no
    CUDA, no torch, the interpreter's own loop and small integers only."""
    began = time.perf_counter()
    total = 0
    for step in range(STAND_IN_STEPS):
        total += step * step
    return time.perf_counter() - began


def host_probe_s(readings: int = READINGS) -> float:
    """The median of ``readings`` stand-ins (:func:`stand_in_s`), in seconds: the host CPU's
    single-thread speed on this thread, now. Larger is slower; a figure in µs is comparable
    only between readings of this same stand-in.

    Raises:
        ValueError: ``readings`` < 1.
    """
    if readings < 1:
        raise ValueError(f"host_probe_s needs at least one reading, got {readings}")
    return statistics.median(stand_in_s() for _ in range(readings))


def speed_beside(work: Callable[[], T]) -> tuple[T, float]:
    """``(work(), seconds)``: ``work`` run between two :func:`host_probe_s` readings, and their mean,
    the host's speed beside it. The sync tier reads each trial's loop so, and tools/tier_parity.py
    the plain loop it sets beside it: one function, so the two sides read the host alike."""
    before = host_probe_s()
    result = work()
    return result, statistics.mean((before, host_probe_s()))
