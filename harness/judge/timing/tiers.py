"""The one interface of the in-process timers: every tier is a :class:`Timer`, looked up in
:data:`TIMERS`; :func:`measure` runs one, refusing GPU tiers where no GPU is; and
:func:`describe_timer` says, for the trace, which timer made a figure (the timing core's loop
or one of these) and with what settings."""

from __future__ import annotations

import math
from typing import Callable, Protocol

from harness.facts import LIBRARY_TIERS, Tier
from harness.judge.core import MAX_SETS, SET_BYTES
from harness.judge.timing.contest import bench_contest
from harness.judge.timing.cupti import bench_cupti
from harness.judge.timing.events import bench_events
from harness.judge.timing.gpu_state import MIN_FLUSH_BYTES, L2Flusher, gpu_tier_unavailable_reason
from harness.judge.timing.settings import (CONTEST_SETTINGS, CONTEST_TRIALS, SYNC_ITERS, SYNC_WARMUP,
                                           TimingConfig)
from harness.judge.timing.stats import TierUnavailable, TimingStats, nothing_after
from harness.judge.timing.stop_rule import STOP_MIN_SAMPLES
from harness.judge.timing.sync import bench_sync
from harness.judge.timing.wallclock import bench_wallclock


class Timer(Protocol):
    """A tier's timer: ``fn(setup(index))`` timed, ``flush()`` before each call where the tier
    wants a cold L2, ``after(index)`` after each timed call (outside the timed region).
    ``entry``: the positional DPS entry ``fn`` spreads, for a timer that hands the arguments
    over itself (the library timers of :data:`LIBRARY_TIERS`); the others ignore it."""

    def __call__(self, fn: Callable, setup: Callable, flush: Callable | None, config: TimingConfig,
                 after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats | TierUnavailable: ...


#: Each tier's timer.
TIMERS: dict[str, Timer] = {Tier.WALLCLOCK: bench_wallclock, Tier.EVENTS: bench_events, Tier.SYNC: bench_sync,
                            Tier.CUPTI: bench_cupti, Tier.CONTEST: bench_contest}


def spread(entry: Callable) -> Callable:
    """A call on setup's dict of a positional entry (the DPS entry), whose order the dict keeps."""
    return lambda args: entry(*args.values())


def measure(tier: str, fn: Callable, setup: Callable, flush: Callable | None, device: str,
            config: TimingConfig, after: Callable = nothing_after, positional: bool = False) -> TimingStats | TierUnavailable:
    """Run one tier; GPU tiers on a CPU run come back unavailable with the reason.

    ``setup(index)`` makes the arguments of one call outside the timed region:
    ``index`` numbers the timed calls 0, 1, ... and is None for warm-up and
    estimate calls. ``after(index)`` runs after each timed call, also outside
    the timed region (the judge's worker ships sampled outputs from there).
    ``positional``: ``fn`` takes the values of setup's dict as positional arguments,
    in its order (a DPS entry), instead of the dict. ``flush``: an :class:`L2Flusher` zeroes what
    the tier's named timer zeroes (:meth:`L2Flusher.for_tier`); any other callable is called as is.

    Raises:
        KeyError: ``tier`` is no tier of :data:`TIMERS`.
    """
    entry = fn if positional else None
    fn = spread(fn) if positional else fn
    flush = flush.for_tier(tier) if isinstance(flush, L2Flusher) else flush  # what the tier's named timer zeroes
    reason = gpu_tier_unavailable_reason(device) if tier != Tier.WALLCLOCK else None
    if reason:
        return TierUnavailable(tier, reason)
    return TIMERS[tier](fn, setup, flush, config, after, entry)


#: What each tier's loop is, where the timing core makes it (a solution's cupti, events and wallclock
#: tiers: harness/judge/core/gdn_core.c) and where an in-process timer does (the copy floor, the
#: tools: this package); the library tiers (:data:`LIBRARY_TIERS`) run the library's timer in both.
_CORE_SETS = (f"the calls take up to {MAX_SETS} buffer sets in turn, within {SET_BYTES >> 30} GiB "
              "(harness.judge.core.buffer_sets)")
_CORE_LOOPS = {
    Tier.CUPTI: "timing core: CUPTI records of every kernel, memcpy and memset in the call's window but the core's "
             "own, durations summed; fresh inputs, then the flush, then the call on an idle GPU; "
             f"{_CORE_SETS}",
    Tier.EVENTS: "timing core: a CUDA event pair around the call on its stream; fresh inputs, then the flush and "
              "three more (a lead of ~0.3 ms on an H100), then one on the call's stream as FlashInfer's events "
              f"timer flushes, the GPU still busy with them while the call launches; {_CORE_SETS}",
    Tier.WALLCLOCK: "timing core: the host's monotonic clock around the call (CPU runs); fresh inputs",
}
_IN_PROCESS_LOOPS = {
    Tier.CUPTI: "in-process: CUPTI records of the call's kernels, memcpys and memsets by external correlation "
             "(harness/judge/cupti_recorder.py), durations summed",
    Tier.EVENTS: "in-process: a CUDA event pair around the call, the flush before it, no synchronize inside a chunk",
    Tier.WALLCLOCK: "in-process: perf_counter around the call",
}
#: How the cupti tier's flush zeroes its bytes, by the core's loop (True) or in process (False). FlashInfer's timer
#: uses torch's int8 fill; the in-process loop does too (L2Flusher.for_tier); the core, which cannot call torch
#: safely, a memset, which read B = 8 kernels up to two CUPTI ticks over it on an H100
#: (results/proof/20261128-H100-idle-start-modes). A graph of torch's fill launched by the core was tried and
#: taken back: with it in the worker the core's events tier read 21-40% high at B = 1
#: (results/proof/20261128-H100-flush-graph-ab).
_CUPTI_FILL = {True: "but by cuMemsetD32Async (the core), not its int8 fill", False: "by torch's int8 fill, as it does"}
#: What a zero fill leaves in the L2, and what the call then pays (docs/timing.md, "The flush's dirty lines"): on an
#: H200 0.20-0.27 µs at fp32 B = 1, 2.6-3.4 µs at bf16 B = 128 (results/ablation/20261128-H200-dirty-l2).
_DIRTY_LINES = " (the call then starts among dirty lines and pays their write-back)"
_CONTEST_LOOP = ("FlashInfer's bench_gpu_time_with_cupti as flashinfer-bench main's time_runnable calls it "
                 "(since #196, 0cd5b6e): the span of each call's kernels; each trial on an input set of its own, "
                 "the same inputs every call of a trial, as its evaluator makes one a trial")
_SYNC_LOOP = ("flashinfer-bench 0.1.2's time_runnable loop, called, not re-implemented: its do_bench with its "
              f"clone setup, so before each call 256 MB zeroed{_DIRTY_LINES}, every argument cloned (outside the "
              "timed region), torch.cuda.synchronize(), a CUDA event pair around the call")
_CLAIM = ("a solution's figure is timed in its own process (the worker), so it is a claim, believed only down "
          "to the timing core's CUPTI figure of the same workload (the bracket check) and the copy floor")


def describe_timer(tier: str, config: TimingConfig, by_core: bool, sets: int = 1) -> str:
    """Which timer made a tier's figure and with what settings, in words, for the trace
    (``TierFigure.timer``): the loop (the timing core's, an in-process timer's or, for the
    :data:`LIBRARY_TIERS`, the library's wherever it runs), the buffer sets its calls took in turn
    (the core's rule; ``sets`` for an in-process loop), the L2 flush, the counts and how the
    samples became the figure.

    Raises:
        KeyError: an unknown tier.
    """
    flush = (f"L2 flush: 2 x L2 zeroed, as FlashInfer's CUPTI timer, {_CUPTI_FILL[by_core]}" if tier == Tier.CUPTI
             else f"L2 flush: max(2 x L2, {MIN_FLUSH_BYTES >> 20} MB) zeroed") + _DIRTY_LINES
    if tier == Tier.CONTEST:
        return (f"{_CONTEST_LOOP}; {CONTEST_SETTINGS}; its cold-L2 flush: 2 x L2 zeroed{_DIRTY_LINES}; "
                f"{CONTEST_TRIALS} trials of "
                f"{CONTEST_SETTINGS['repeat_iters']} calls, mean of the trial medians; where those trials would "
                f"outlast the {config.budget_s} s budget at one call's measured time, 1 dry run and as many timed "
                f"calls a trial as the budget holds, at least {config.min_iters}")
    if tier == Tier.SYNC:
        least = math.ceil(config.min_iters / max(config.trials, 1))
        return (f"{_SYNC_LOOP}; per trial one input set, {SYNC_WARMUP} warm-up and up to {SYNC_ITERS} timed calls "
                f"(fewer, at least {least}, only past the {config.budget_s} s budget), the mean of its calls; "
                f"{config.trials} trials, mean of the trial means; {_CLAIM}")
    loop = (_CORE_LOOPS if by_core else _IN_PROCESS_LOOPS)[tier]
    if not by_core and tier != Tier.WALLCLOCK:
        loop += f"; the calls take {sets} buffer set{'s' if sets > 1 else ''} in turn"
    warm = "" if tier == Tier.WALLCLOCK else f"; clock warmed {config.warm_s} s after an idle spell"
    return (f"{loop}{'' if tier == Tier.WALLCLOCK else '; ' + flush}{warm}; median of up to {config.iters} timed "
            f"calls, at least {config.min_iters}, stopping once the median is known to +-{config.max_noise:.2%} "
            f"(from {STOP_MIN_SAMPLES} calls on) or past the {config.budget_s} s budget")
