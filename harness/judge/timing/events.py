"""The events tier, as the in-process timers run it (the copy floor, the tools): a CUDA event
pair around each call, the corrected flashinfer-bench ``do_bench``: per iteration fresh inputs
(made before the flush: a cold L2), L2 flushed, start event, call, end event, no host
synchronization inside a chunk; median, under the stop rule. (A solution's events tier is made
by the timing core, harness/judge/core_tier.py; docs/timing.md.)"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import gpu_state, stop_rule
from harness.judge.timing.settings import TimingConfig
from harness.judge.timing.stats import TimingStats, nothing_after


def bench_events(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                 after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats:
    """CUDA-event µs per call, corrected do_bench (see module doc)."""
    planned = stop_rule.plan_iterations(gpu_state.warm_then_estimate(fn, setup, flush, config, config.warmup), config)
    host = []

    def time_calls(first: int, count: int) -> list[float]:
        """No host synchronization between the calls of a chunk; one after it, to read the events."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        for index, start, end in zip(range(first, first + count), starts, ends):
            args = setup(index)
            flush()
            start.record()
            began = time.perf_counter()
            fn(args)
            host.append(time.perf_counter() - began)
            end.record()
            after(index)
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]

    samples = stop_rule.until_stable(time_calls, planned, config)
    gpu_state.CLOCKS.busy()
    return stop_rule.stopped(Tier.EVENTS, samples, config, host_call_us=statistics.median(host) * 1e6)
