"""The wallclock tier (CPU runs): host ``perf_counter`` around the call; median, under the stop rule."""

from __future__ import annotations

import time
from typing import Callable

from harness.facts import Tier
from harness.judge.timing import stop_rule
from harness.judge.timing.settings import TimingConfig
from harness.judge.timing.stats import TimingStats, nothing_after


def bench_wallclock(fn: Callable, setup: Callable, flush: Callable | None, config: TimingConfig,
                    after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats:
    """Host wall-clock µs per call (CPU runs): ``perf_counter`` around the call (``flush`` and
    ``entry`` unused: :class:`harness.judge.timing.tiers.Timer`)."""
    planned = stop_rule.plan_iterations(stop_rule.estimate_call_s(fn, setup, lambda: None, config.warmup, config.budget_s), config)

    def time_calls(first: int, count: int) -> list[float]:
        samples = []
        for index in range(first, first + count):
            args = setup(index)
            start = time.perf_counter()
            fn(args)
            samples.append((time.perf_counter() - start) * 1e6)
            after(index)
        return samples

    return stop_rule.stopped(Tier.WALLCLOCK, stop_rule.until_stable(time_calls, planned, config), config)
