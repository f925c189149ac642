"""The one interface of the in-process timers: every tier is a :class:`Timer`, looked up in
:data:`TIMERS`; :func:`measure` runs one, refusing GPU tiers where no GPU is."""

from __future__ import annotations

from typing import Callable, Protocol

from harness.facts import Tier
from harness.judge.timing.contest import bench_contest
from harness.judge.timing.cupti import bench_cupti
from harness.judge.timing.events import bench_events
from harness.judge.timing.gpu_state import gpu_tier_unavailable_reason
from harness.judge.timing.settings import TimingConfig
from harness.judge.timing.stats import TierUnavailable, TimingStats, nothing_after
from harness.judge.timing.sync import bench_sync
from harness.judge.timing.wallclock import bench_wallclock


class Timer(Protocol):
    """A tier's timer: ``fn(setup(index))`` timed, ``flush()`` before each call where the tier
    wants a cold L2, ``after(index)`` after each timed call (outside the timed region).
    ``entry``: the positional DPS entry ``fn`` spreads, for a timer that hands the arguments
    over itself (the contest tier's FlashInfer timer); the others ignore it."""

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
    in its order (a DPS entry), instead of the dict.

    Raises:
        KeyError: ``tier`` is no tier of :data:`TIMERS`.
    """
    entry = fn if positional else None
    fn = spread(fn) if positional else fn
    reason = gpu_tier_unavailable_reason(device) if tier != Tier.WALLCLOCK else None
    if reason:
        return TierUnavailable(tier, reason)
    return TIMERS[tier](fn, setup, flush, config, after, entry)
