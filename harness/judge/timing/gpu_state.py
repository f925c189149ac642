"""The GPU's state before a timed call: a cold L2 (:class:`L2Flusher`) and a warm clock.

Every GPU tier first keeps the GPU busy (flush, call, back to back): an idle
H100 sits at a low SM clock (345 MHz seen) and needs tens of milliseconds of
work to reach its boost clock, so a tier that starts cold measured µs kernels
up to 2x slow (results/proof, first attempt). The full ``warm_s`` is spent
once, when this process has not kept the GPU busy for :data:`IDLE_S`; a tier
that follows another closely makes one untimed call first, or tops the clock up
for ``keep_warm_s`` if one is set (:class:`ClockWarmth`): 0.2 s before each of
three tiers of every workload was most of a fast solution's time on the GPU
(issue #17), and after a warm-up the clock held through idle gaps of up to 5 s
(results/speed/20261123-H100/clock_idle_probe.log: only the first call of a
series was slow, with or without a 0.03 s top-up).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import stop_rule
from harness.judge.timing.settings import IDLE_S, WARM_MAX_CALLS, TimingConfig


#: The least the sync and events tiers' flush zeroes: flashinfer-bench 0.1.2's ``time_runnable``, the
#: sync tier's named timer, zeroes 256 MB before every call; and the events tier's lead of five flushes
#: (harness/judge/core/gdn_core.c) outlasts a Python launch only if one flush is this long on a GPU
#: with a small L2 (results/proof/20261126-H100-events-rerun).
MIN_FLUSH_BYTES = 256 * 1024 * 1024


def flush_bytes_for(l2_bytes: int, tier: str | None = None) -> int:
    """Bytes a flush before a call of ``tier`` zeroes on a GPU with an L2 of ``l2_bytes``: what the
    timer the tier names zeroes. The cupti tier: twice the L2, as FlashInfer's
    ``bench_gpu_time_with_cupti(cold_l2_cache=True)`` does (flashinfer/testing/utils.py, 0.7.2.post1;
    on an H100 the 256 MB read B = 8 kernels one or two CUPTI ticks under it,
    results/proof/20261127-H100-idle-start). Any other tier (or None): twice the L2, at least
    :data:`MIN_FLUSH_BYTES`."""
    return 2 * l2_bytes if tier == Tier.CUPTI else max(2 * l2_bytes, MIN_FLUSH_BYTES)


class L2Flusher:
    """Evicts the GPU's L2 by zeroing a buffer of twice its size, at least 256 MB, as int32 (flashinfer-bench
    0.1.2's ``_clear_cache``), so each timed call starts with a cold L2. :meth:`for_tier` zeroes what one
    tier's named timer zeroes (:func:`flush_bytes_for`), from the same buffer and, for the cupti tier, as
    its named timer does; :func:`~harness.judge.timing.measure` asks for it."""

    def __init__(self, device):
        self.l2_bytes = self.l2_size(device)
        self.nbytes = flush_bytes_for(self.l2_bytes)
        self.buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    @staticmethod
    def l2_size(device) -> int:
        """``device``'s L2 in bytes, as PyTorch reports it (0 where it does not)."""
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)

    @staticmethod
    def size(device, tier: str | None = None) -> int:
        """Bytes zeroed per flush before a call of ``tier`` on ``device`` (:func:`flush_bytes_for`)."""
        return flush_bytes_for(L2Flusher.l2_size(device), tier)

    def __call__(self) -> None:
        self.buffer.zero_()

    def for_tier(self, tier: str) -> Callable[[], None]:
        """The flush before a call of ``tier``: the first :func:`flush_bytes_for` bytes of the buffer zeroed;
        for the cupti tier as int8, as FlashInfer's ``bench_gpu_time_with_cupti`` zeroes its buffer
        (``torch.empty(2 x L2, dtype=torch.int8).zero_()``, flashinfer/testing/utils.py 0.7.2.post1). Why the
        dtype: torch's int32 fill and its int8 fill of the same bytes leave the L2 so that a following
        B = 8 call reads up to three CUPTI ticks apart (results/proof/20261128-H100-idle-start-modes)."""
        nbytes = flush_bytes_for(self.l2_bytes, tier)
        if tier == Tier.CUPTI:
            return self.buffer.view(torch.int8)[:nbytes].zero_
        return self if nbytes >= self.nbytes else self.buffer[:nbytes // 4].zero_


class ClockWarmth:
    """When this process last kept the GPU busy, so a tier warms the clock only as long as it must.

    One per process (:data:`CLOCKS`): the judge's copy floors and a worker's tiers each keep
    their own. A solution can only make its own worker warm longer or shorter, which moves its
    own figures, all of which the judge bounds (docs/judging.md).
    """

    def __init__(self):
        self.last_busy = -math.inf  # time.monotonic() at the end of the last GPU tier

    def seconds(self, config: TimingConfig) -> float:
        """``warm_s`` after an idle spell of over :data:`IDLE_S`, else ``keep_warm_s``."""
        return config.keep_warm_s if time.monotonic() - self.last_busy < IDLE_S else config.warm_s

    def warm(self, fn: Callable, setup: Callable, flush: Callable, config: TimingConfig) -> int:
        """:func:`warm_gpu_clocks` for :meth:`seconds`; returns the calls made."""
        calls = warm_gpu_clocks(fn, setup, flush, self.seconds(config))
        self.busy()
        return calls

    def busy(self) -> None:
        """The GPU was kept busy until now (the end of a tier)."""
        self.last_busy = time.monotonic()


CLOCKS = ClockWarmth()


def warm_gpu_clocks(fn: Callable, setup: Callable, flush: Callable, seconds: float) -> int:
    """Run flush + call back to back for ``seconds`` of wall time (at least one
    call) so the GPU reaches its working clock before anything is timed.
    Returns the number of calls made (at most :data:`WARM_MAX_CALLS`)."""
    calls, deadline = 0, time.perf_counter() + seconds
    while calls == 0 or (time.perf_counter() < deadline and calls < WARM_MAX_CALLS):
        args = setup(None)
        flush()
        fn(args)
        calls += 1
        if calls % 16 == 0:  # keep the launch queue short, so the deadline means GPU time
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return calls


def warm_then_estimate(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig, warmup: int) -> float:
    """Warm the clock (:data:`CLOCKS`), then the wall seconds of one call, to plan a GPU tier by.

    A call that alone outlasted the warm-up window, and a tenth of the budget (so the estimate
    would make no warm-up call for it), is not made again to be timed: that one warm-up call (its
    setup and flush included, so the estimate errs long, toward fewer calls) is the estimate. The per-head reference loop at B = 64 (~0.12 s a call on the H100) made
    two untimed calls a tier before its five timed ones without this (issue #17).
    """
    window = CLOCKS.seconds(config)
    began = time.perf_counter()
    calls = warm_gpu_clocks(fn, setup, flush, window)
    elapsed = time.perf_counter() - began
    CLOCKS.busy()
    if calls == 1 and elapsed >= max(window, 0.1 * config.budget_s):  # estimate_call_s would only time it again
        return elapsed
    return stop_rule.estimate_call_s(fn, setup, torch.cuda.synchronize, warmup, config.budget_s)


def gpu_tier_unavailable_reason(device: str) -> str | None:
    """Why GPU tiers cannot run on ``device`` (None if they can)."""
    if not str(device).startswith("cuda"):
        return f"device is {device}: GPU tiers need --device cuda"
    if not torch.cuda.is_available():
        return "no CUDA device visible to PyTorch"
    return None
