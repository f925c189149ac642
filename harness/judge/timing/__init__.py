"""The in-process timers: how long one call takes, at the levels of truth the tiers name.

A solution's cupti, events and wallclock tiers are made by the timing core in its worker
(:mod:`harness.judge.core_tier`); these timers time what runs in the judge's own process and
the tools (the copy floor, ``tools.tune``, the timing proof), and a solution's contest and sync
tiers (:data:`~.tiers.LIBRARY_TIERS`), which call the contest libraries' own timers in the worker. They share the stop rule and the tier settings with the
core's tiers. Open :mod:`~harness.judge.timing.tiers` first: the one interface (:class:`Timer`,
:data:`TIMERS`, :func:`measure`); then one module per timer:

* :mod:`.cupti` pure GPU time: the durations of the call's kernels (and device memcpy/memset),
  summed, as CUPTI records them; cold L2 before every call; median;
* :mod:`.events` CUDA events around the call; fresh inputs, L2 flushed, no host synchronization
  inside the loop; median;
* :mod:`.sync` the contest's original timer, flashinfer-bench 0.1.2's ``time_runnable`` loop
  (``do_bench``: clone, synchronize before every start event), called: 10 warm-up and 50 timed
  calls on one input set a trial, mean over 3 trials;
* :mod:`.contest` the final contest's own timer, FlashInfer's CUPTI timer with flashinfer-bench's
  settings;
* :mod:`.wallclock` host ``perf_counter`` around the call, for runs on the CPU;

and what they share: :mod:`.settings` (:class:`TimingConfig`, the reproduced timers' counts),
:mod:`.stats` (:class:`TimingStats` in µs, or :class:`TierUnavailable` with the reason),
:mod:`.stop_rule` (how many calls; when the median is known well enough to stop),
:mod:`.gpu_state` (a cold L2, a warm clock) and :mod:`.host_speed` (how fast the host runs Python
beside a tier that times the host's launch). docs/timing.md says what each tier measures.
"""

from harness.judge.timing.contest import bench_contest, contest_samples, contest_settings, contest_value
from harness.judge.timing.cupti import bench_cupti
from harness.judge.timing.events import bench_events
from harness.judge.timing.gpu_state import (CLOCKS, ClockWarmth, L2Flusher, gpu_tier_unavailable_reason,
                                            warm_gpu_clocks, warm_then_estimate)
from harness.judge.timing.settings import (CONTEST_SETTINGS, CONTEST_TRIALS, IDLE_S, SYNC_ITERS, SYNC_TRIALS,
                                           SYNC_WARMUP, WARM_MAX_CALLS, TimingConfig)
from harness.judge.timing.stats import TierUnavailable, TimingStats, summarize
from harness.judge.timing.stop_rule import (STOP_MIN_SAMPLES, STOP_RULE_TIERS, is_stable, median_interval,
                                            median_noise, plan_iterations, stop_reason, timer_tick, until_stable)
from harness.judge.timing.sync import bench_sync, sync_plan
from harness.judge.timing.tiers import LIBRARY_TIERS, TIMERS, Timer, describe_timer, measure, spread
from harness.judge.timing.wallclock import bench_wallclock

__all__ = ["CLOCKS", "CONTEST_SETTINGS", "CONTEST_TRIALS", "IDLE_S", "LIBRARY_TIERS", "STOP_MIN_SAMPLES", "STOP_RULE_TIERS",
           "SYNC_ITERS", "SYNC_TRIALS", "SYNC_WARMUP", "TIMERS", "WARM_MAX_CALLS", "ClockWarmth", "L2Flusher",
           "TierUnavailable", "Timer", "TimingConfig", "TimingStats", "bench_contest", "bench_cupti", "bench_events",
           "bench_sync", "bench_wallclock", "contest_samples", "contest_settings", "contest_value", "describe_timer",
           "gpu_tier_unavailable_reason",
           "is_stable", "measure", "median_interval", "median_noise", "plan_iterations", "spread", "stop_reason",
           "summarize", "sync_plan", "timer_tick", "until_stable", "warm_gpu_clocks", "warm_then_estimate"]
