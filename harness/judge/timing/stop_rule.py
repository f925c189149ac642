"""The stop rule and the plan of a tier's calls: how many timed calls, and when the median is
known well enough to stop early (NVBench stops on its relative noise the same way;
docs/timing.md "When a tier stops"). The cupti, events and wallclock tiers stop early
(:data:`STOP_RULE_TIERS`); the sync and contest tiers keep the fixed counts of the timers they
reproduce."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

from harness.facts import Tier
from harness.judge.timing.settings import TimingConfig
from harness.judge.timing.stats import TimingStats, summarize

#: The tiers that stop early once their median is stable (the others keep the counts of the timers they reproduce).
STOP_RULE_TIERS = (Tier.CUPTI, Tier.EVENTS, Tier.WALLCLOCK)

#: Durations that differ by at most this many µs differ by the rounding of the timer's readings, not by
#: one of its steps: CUPTI converts the GPU's timestamps to whole nanoseconds, so durations on the
#: H100's 32 ns grid land a nanosecond either side of it (2.080 and 2.081 µs in one tier). Before this
#: was allowed for, 2 ns looked like the timer's step and the one-step clause of :func:`is_stable`
#: never held: 172 of 180 fast CUPTI tiers of contest-v1 ran all 100 calls (results/speed/20261124-H100).
TIMESTAMP_ROUNDING_US = 0.004
#: The stop rule's first check comes after this many timed calls (NVBench's default
#: ``--min-samples`` is 10; the median's confidence interval needs about 20 to be narrower
#: than the whole sample), and later checks every STOP_CHECK_EVERY calls.
STOP_MIN_SAMPLES, STOP_CHECK_EVERY = 20, 10
#: z of a two-sided 95% confidence interval (the median's, :func:`median_noise`).
_Z95 = 1.96


def plan_iterations(estimate_s: float, config: TimingConfig) -> int:
    """Timed iterations: ``config.iters``, cut so the loop fits ``budget_s``."""
    if estimate_s <= 0:
        return config.iters
    return max(config.min_iters, min(config.iters, int(config.budget_s / estimate_s)))


#: Calls an estimate times at least, where they fit in a tenth of the budget; it is the fastest.
#: One call is at the mercy of one hiccup: on an H100 (2026-11-26, contest-v1, results/speed/20261126-H100-v1-all)
#: pt-compiled's sync tier timed its one estimate call at ~3 ms, six times its usual, was cut to 33
#: calls a trial for it, finished in 0.12 s and was rejected as a cut tier faster than half its budget.
#: The median of three was not enough either: later that day fla-upstream's sync tier was cut to 47
#: calls a trial (an estimate of ~2 ms a call) and ran them in 0.091 s, 0.65 ms a call: rejected the
#: same way (results/judge-check/20261126-H100-v1-all-c0ca0ae).
ESTIMATE_CALLS = 3


def estimate_call_s(fn: Callable, setup: Callable, sync: Callable[[], None], warmup: int, budget_s: float) -> float:
    """Warm up and return the wall time of one call (setup excluded): the fastest of the calls timed.

    The first call is timed on its own; the ``warmup`` calls after it (at least
    :data:`ESTIMATE_CALLS` - 1) take at most a tenth of the budget at the first call's time, so a
    slow solution (like the per-head reference loop) gets few or none. The fastest, not the
    median: the estimate only plans a tier's calls, and the two ways of missing are not alike. Too
    long, and a fast solution's contest or sync tier is cut, runs in less than half its budget and
    is rejected by the judge (:func:`harness.judge.figures.check_cut`), an honest solution losing
    its figure; too short, and the tier runs past its budget. A host hiccup only ever lengthens a call.
    """
    def timed_call() -> float:
        args = setup(None)
        sync()
        start = time.perf_counter()
        fn(args)
        sync()
        return time.perf_counter() - start

    times = [timed_call()]
    for _ in range(min(max(warmup, ESTIMATE_CALLS - 1), int(0.1 * budget_s / max(times[0], 1e-9)))):
        times.append(timed_call())
    return min(times)


def median_interval(samples_us: list[float]) -> tuple[float, float]:
    """The distribution-free 95% confidence interval of the samples' median, µs.

    It runs between the order statistics of ranks ``n/2 - 1.96*sqrt(n)/2`` and
    ``1 + n/2 + 1.96*sqrt(n)/2`` (1-based, clamped to the sample; the normal approximation of the
    binomial interval for a quantile, e.g. Conover, *Practical Nonparametric Statistics*, 3rd
    ed., 3.2). It assumes nothing about the distribution of call times, which is skewed, and for
    fewer than ~20 samples spans the whole sample.

    Raises:
        ValueError: no samples.
    """
    if not samples_us:
        raise ValueError("no samples")
    s = sorted(samples_us)
    n, spread = len(s), _Z95 * math.sqrt(len(s)) / 2
    lo = min(n, max(1, math.floor(n / 2 - spread)))
    hi = min(n, max(1, math.ceil(1 + n / 2 + spread)))
    return s[lo - 1], s[hi - 1]


def median_noise(samples_us: list[float]) -> float:
    """How well the samples pin their median down: the half-width of :func:`median_interval`
    over the median (a fraction; 0.005 = ±0.5%). Infinite when the median is not positive.

    Raises:
        ValueError: no samples.
    """
    lo, hi = median_interval(samples_us)
    median = statistics.median(samples_us)
    return (hi - lo) / (2 * median) if median > 0 else math.inf


def timer_tick(samples_us: list[float]) -> float:
    """The timer's step as the samples show it: the smallest difference between two of their
    distinct values that is larger than :data:`TIMESTAMP_ROUNDING_US`, µs (0 when there is none).
    CUPTI's timestamps step in 32 ns on the H100, and a sum of kernel durations moves in the same
    steps, give or take the rounding of the timestamps to whole nanoseconds."""
    distinct = sorted(set(samples_us))
    return min((b - a for a, b in zip(distinct, distinct[1:]) if b - a > TIMESTAMP_ROUNDING_US), default=0.0)


def stop_reason(samples_us: list[float], config: TimingConfig) -> str:
    """Why a cupti/events/wallclock tier made ``len(samples_us)`` timed calls: ``iters`` (all
    ``config.iters``), ``stable`` (fewer: the median met the stop rule, :func:`is_stable`) or
    ``budget`` (fewer, not stable: a slow solution whose calls ``budget_s`` cut). The judge
    derives it from the samples it receives: its own record, not the worker's word."""
    if len(samples_us) >= config.iters:
        return "iters"
    return "stable" if is_stable(samples_us, config) else "budget"


def is_stable(samples_us: list[float], config: TimingConfig) -> bool:
    """The stop rule: at least :data:`STOP_MIN_SAMPLES` samples, and their median known to
    ``max_noise`` (:func:`median_noise`) or to one step of the timer (:func:`timer_tick`):
    32 ns is 1.5% of a 2 µs kernel, so on CUPTI's clock ``max_noise`` alone could never be met
    there (the first H100 run of the rule without this clause, results/speed/20261123-H100: 135
    of 140 CUPTI tiers at B = 1 ran all 100 calls, 89 of them with an interval one step wide)."""
    if config.max_noise <= 0 or len(samples_us) < STOP_MIN_SAMPLES:
        return False
    lo, hi = median_interval(samples_us)
    width = hi - lo  # median_noise's interval, read once
    return (width <= 2 * config.max_noise * statistics.median(samples_us)
            or width <= timer_tick(samples_us) + TIMESTAMP_ROUNDING_US)


def until_stable(time_calls: Callable[[int, int], list[float]], planned: int, config: TimingConfig) -> list[float]:
    """Samples of up to ``planned`` timed calls, in chunks, stopping once :func:`is_stable`.

    ``time_calls(first, count)`` times calls ``first .. first + count - 1`` and returns their µs.
    The first chunk is :data:`STOP_MIN_SAMPLES` calls, then :data:`STOP_CHECK_EVERY` at a time.
    """
    samples: list[float] = []
    while len(samples) < planned:
        count = STOP_MIN_SAMPLES - len(samples) if len(samples) < STOP_MIN_SAMPLES else STOP_CHECK_EVERY
        samples += time_calls(len(samples), min(count, planned - len(samples)))
        if is_stable(samples, config):
            break
    return samples


def stopped(tier: str, samples: list[float], config: TimingConfig, **extra) -> TimingStats:
    """:func:`summarize` of a tier under the stop rule, with why it stopped and its noise."""
    return summarize(tier, samples, stop=stop_reason(samples, config), noise=median_noise(samples), **extra)
