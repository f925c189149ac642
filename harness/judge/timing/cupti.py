"""The cupti tier, as the in-process timers run it: the durations of the kernels (and device
memcpy/memset) each call launched, summed, as the CUPTI recorder records them
(:mod:`harness.judge.cupti_recorder`); cold L2 before every call; median, under the stop rule.
A number is never labelled CUPTI unless CUPTI recorded it. (A solution's cupti tier is made by
the timing core, which records CUPTI itself: harness/judge/core_tier.py.)"""

from __future__ import annotations

import statistics
from typing import Callable

from harness.facts import Tier
from harness.judge.timing import gpu_state, stop_rule
from harness.judge.timing.settings import TimingConfig
from harness.judge.timing.stats import TierUnavailable, TimingStats, nothing_after


def bench_cupti(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats | TierUnavailable:
    """CUPTI kernel-sum µs per call; also the span and kernels per call.

    Returns TierUnavailable when CUPTI cannot record here: a number is never
    labelled CUPTI unless CUPTI recorded it (no silent CUDA-event fallback).
    """
    try:
        from harness.judge import cupti_recorder as cupti
    except ImportError as exc:
        return TierUnavailable(Tier.CUPTI, f"harness.judge.cupti_recorder cannot be imported: {exc}")
    try:
        recorder = cupti.recording()  # probes CUPTI; records nothing until entered, after the warm-up
    except cupti.CuptiUnavailable as exc:
        return TierUnavailable(Tier.CUPTI, str(exc))
    planned = stop_rule.plan_iterations(gpu_state.warm_then_estimate(fn, setup, flush, config, config.warmup), config)
    # one untimed call inside the recording first, unless the budget cut the tier to its fewest
    # calls: a slow call is long warm by then, and under CUPTI's API tracing the reference loop's
    # ~5,000 launches made its calls ~2x slower (results/speed/20261124-H100)
    recording_warmup = 1 if planned > config.min_iters else 0
    records = []
    try:
        with recorder:  # one recording for every chunk of the stop rule

            def time_calls(first: int, count: int) -> list[float]:
                """``count`` calls of the recording (the first of the tier after one warm-up call)."""
                chunk = recorder.time_calls(fn, lambda index=None: setup(None if index is None else first + index),
                                            flush, iters=count, warmup=recording_warmup if first == 0 else 0,
                                            after=lambda index: after(first + index))
                records.extend(chunk)
                return [r.kernel_sum_us for r in chunk]

            samples = stop_rule.until_stable(time_calls, planned, config)
    except cupti.CuptiUnavailable as exc:
        if records:  # calls were already timed and reported: a failure, not a tier that cannot run here
            raise RuntimeError(f"CUPTI stopped recording after {len(records)} timed calls: {exc}") from exc
        return TierUnavailable(Tier.CUPTI, str(exc))
    gpu_state.CLOCKS.busy()
    spans = sorted(r.span_us for r in records)
    kernels = sorted(r.n_kernels for r in records)
    names = sorted({n for r in records for n in r.names})
    return stop_rule.stopped(Tier.CUPTI, samples, config, span_median_us=statistics.median(spans),
                     kernels_per_call=statistics.median(kernels), kernel_names=names[:8])
