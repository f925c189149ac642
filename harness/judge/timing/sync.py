"""The sync tier, as the in-process timers run it: a faithful reproduction of the contest's
original ``do_bench`` (flashinfer-bench 0.1.2): L2 flush, fresh inputs, ``torch.cuda.synchronize()``
before every start event, 10 warm-up and 50 timed calls, mean over calls, mean over 3 trials
(flashinfer-bench issue #195: µs kernels read ~13x slower). Its fixed counts are the contest's,
not the stop rule's."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import gpu_state, stop_rule
from harness.judge.timing.settings import SYNC_ITERS, SYNC_WARMUP, TimingConfig
from harness.judge.timing.stats import TimingStats, nothing_after, summarize


def sync_plan(estimate_s: float, config: TimingConfig) -> tuple[int, int]:
    """``(timed calls, warm-up calls)`` of each of the sync tier's trials: the contest's
    SYNC_ITERS and SYNC_WARMUP, or for a solution too slow for ``budget_s`` fewer timed calls
    (``min_iters`` of them over all trials, at least) and no warm-up of its own (it ran just
    before, in the estimate of ``estimate_s`` seconds a call)."""
    trials = max(config.trials, 1)
    per_trial = TimingConfig(iters=SYNC_ITERS, budget_s=config.budget_s / trials,
                             min_iters=math.ceil(config.min_iters / trials))
    iters = stop_rule.plan_iterations(estimate_s, per_trial)
    return iters, SYNC_WARMUP if iters == SYNC_ITERS else 0


def bench_sync(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
               after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats:
    """The contest's original timer: sync before every start event; mean of trial means.

    10 warmup and 50 timed calls per trial as the contest did, except that a
    solution too slow for ``budget_s`` gets fewer timed calls (recorded in ``iters``;
    ``min_iters`` of them over all trials, at least) and no warm-up calls of its own.
    """
    iters, warmup = sync_plan(gpu_state.warm_then_estimate(fn, setup, flush, config, 0), config)
    trial_means, samples, host = [], [], []
    for trial in range(config.trials):
        for _ in range(warmup):
            flush()
            fn(setup(None))
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i, (start, end) in enumerate(zip(starts, ends)):
            flush()
            args = setup(trial * iters + i)
            torch.cuda.synchronize()
            start.record()
            began = time.perf_counter()
            fn(args)
            host.append(time.perf_counter() - began)
            end.record()
            after(trial * iters + i)
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        trial_means.append(statistics.mean(times))
        samples.extend(times)
    gpu_state.CLOCKS.busy()
    return summarize(Tier.SYNC, samples, value_us=statistics.mean(trial_means), trials=config.trials,
                     host_call_us=statistics.median(host) * 1e6)
