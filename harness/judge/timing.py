"""Timing tiers: how long one ``run`` call takes, at three levels of truth.

* ``cupti``  pure GPU time: the durations of the kernels (and device
  memcpy/memset) the call launched, summed, as recorded by CUPTI
  (:mod:`harness.judge.cupti`); cold L2 before every call; median.
* ``events`` CUDA events around the call, the corrected flashinfer-bench
  ``do_bench``: per iteration fresh cloned inputs, L2 flushed, start event,
  call, end event, no host synchronization inside the loop; median.
* ``sync``   a faithful reproduction of the contest's original ``do_bench``:
  L2 flush, clone, ``torch.cuda.synchronize()`` before every start event,
  10 warmup and 50 timed iterations, mean over iterations, mean over 3 trials
  (flashinfer-bench issue #195: µs kernels read ~13x slower).
* ``contest`` the final contest's timer, called rather than re-implemented:
  ``flashinfer.testing.bench_gpu_time_with_cupti`` with flashinfer-bench's
  settings (:data:`CONTEST_SETTINGS`): the same inputs every call, the *span*
  of each call's kernels, median per trial, mean over
  :data:`CONTEST_TRIALS` trials. Refused, with the reason, where cupti-python
  cannot record (flashinfer would fall back to CUDA events with only a warning).
* ``wallclock`` host ``perf_counter`` around the call, for runs on the CPU.

Every tier returns a :class:`TimingStats` in µs. A tier that cannot run here
returns a :class:`TierUnavailable` with the reason instead of a number.

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

The cupti, events and wallclock tiers stop before ``iters`` once the median is
known well (:func:`median_noise` at most ``max_noise``, or its interval one timer
step wide: :func:`is_stable`; checked every :data:`STOP_CHECK_EVERY` calls from
:data:`STOP_MIN_SAMPLES` on), the way
NVBench stops on its relative noise (docs/timing.md "When a tier stops"); the
sync and contest tiers keep their fixed counts, since they reproduce timers
that have them.

The events and cupti tiers clone the inputs *before* flushing L2 (the
contest's loop clones after, which leaves a small state resident in L2 and so
is not a cold-L2 measurement); the sync tier keeps the contest's order.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness.facts import CONTEST_TIER, GPU_TIERS, TIERS, Tier  # noqa: E402,F401 - re-exported: the tiers this module measures

#: The tiers that stop early once their median is stable (the others keep the counts of the timers they reproduce).
STOP_RULE_TIERS = (Tier.CUPTI, Tier.EVENTS, Tier.WALLCLOCK)
#: The contest's do_bench settings, reproduced by the sync tier.
SYNC_WARMUP, SYNC_ITERS, SYNC_TRIALS = 10, 50, 3
#: Most calls of a clock warm-up, however the host clock reads (a solution can
#: patch time.perf_counter in its own process). The H100 makes ~2,000 flush +
#: call pairs of a µs kernel in the default 0.2 s, so an honest warm-up is cut
#: only on faster GPUs, and still lasts tens of ms there. 20,000 was too many:
#: the patch-timer fixture, ~0.5 ms a call, then warmed for 10 s per tier and hit
#: the judge's deadline on the H100 (results/judge-check/20261123-H100-session3).
WARM_MAX_CALLS = 2_000
#: flashinfer-bench's call of FlashInfer's CUPTI timer in the final contest (issue #16):
#: ``bench_gpu_time_with_cupti(fn, dry_run_iters=10, repeat_iters=50, input_args=<the
#: positional arguments>, cold_l2_cache=True, use_cuda_graph=False)``, median of the
#: returned per-call spans, 3 trials (its BenchmarkConfig).
CONTEST_SETTINGS = {"dry_run_iters": 10, "repeat_iters": 50, "cold_l2_cache": True, "use_cuda_graph": False}
CONTEST_TRIALS = 3
#: Words of FlashInfer's warning when it times with CUDA events instead of CUPTI.
_FALLBACK_WORDS = ("falling back", "fall back", "not installed", "needs to be")
#: Durations that differ by at most this many µs differ by the rounding of the timer's readings, not by
#: one of its steps: CUPTI converts the GPU's timestamps to whole nanoseconds, so durations on the
#: H100's 32 ns grid land a nanosecond either side of it (2.080 and 2.081 µs in one tier). Before this
#: was allowed for, 2 ns looked like the timer's step and the one-step clause of :func:`is_stable`
#: never held: 172 of 180 fast CUPTI tiers of contest-v1 ran all 100 calls (results/speed/20261124-H100).
TIMESTAMP_ROUNDING_US = 0.004
#: A process that kept the GPU busy less than this many seconds ago finds it at its working
#: clock: its next tier only tops the clock up (``keep_warm_s``) instead of the full ``warm_s``.
IDLE_S = 0.5
#: The stop rule's first check comes after this many timed calls (NVBench's default
#: ``--min-samples`` is 10; the median's confidence interval needs about 20 to be narrower
#: than the whole sample), and later checks every STOP_CHECK_EVERY calls.
STOP_MIN_SAMPLES, STOP_CHECK_EVERY = 20, 10
#: z of a two-sided 95% confidence interval (the median's, :func:`median_noise`).
_Z95 = 1.96


@dataclass
class TimingStats:
    """Summary of one tier's samples, all in µs."""

    tier: str
    value_us: float  # the tier's headline figure (median; mean of trial means for sync)
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    max_us: float
    iters: int
    extra: dict[str, Any] = field(default_factory=dict)
    samples_us: list[float] = field(default_factory=list, repr=False)  # every timed call, in order


@dataclass
class TierUnavailable:
    """A tier that could not produce a number here, and why."""

    tier: str
    reason: str


@dataclass
class TimingConfig:
    """Iteration counts and the wall-clock budget of one tier on one workload."""

    warmup: int = 10
    iters: int = 100
    trials: int = SYNC_TRIALS
    budget_s: float = 0.3  # slow solutions get fewer iterations, never fewer than min_iters (docs/timing.md)
    min_iters: int = 5
    warm_s: float = 0.2  # seconds of back-to-back flush + call before a GPU tier (clock ramp) ...
    keep_warm_s: float = 0.0  # ... or only this (one call at least) when the GPU was kept busy within IDLE_S
    max_noise: float = 0.005  # stop once the median's 95% CI half-width is this fraction of it (0: never early)


def _nothing(index: int) -> None:
    """Default ``after`` hook: nothing to do after a timed call."""


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100] of sorted values."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(tier: str, samples_us: list[float], value_us: float | None = None, **extra) -> TimingStats:
    """Median, p10, p90, min and max of ``samples_us``.

    Raises:
        ValueError: no samples.
    """
    if not samples_us:
        raise ValueError(f"tier {tier}: no samples")
    s = sorted(samples_us)
    median = statistics.median(s)
    return TimingStats(tier, median if value_us is None else value_us, median, percentile(s, 10),
                       percentile(s, 90), s[0], s[-1], len(s), extra, list(samples_us))


def plan_iterations(estimate_s: float, config: TimingConfig) -> int:
    """Timed iterations: ``config.iters``, cut so the loop fits ``budget_s``."""
    if estimate_s <= 0:
        return config.iters
    return max(config.min_iters, min(config.iters, int(config.budget_s / estimate_s)))


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


class L2Flusher:
    """Evicts the GPU's L2 by zeroing a buffer of twice its size (at least 256 MB,
    as flashinfer-bench does), so each timed call starts with a cold L2."""

    def __init__(self, device):
        self.nbytes = self.size(device)
        self.buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    @staticmethod
    def size(device) -> int:
        """Bytes zeroed per flush on ``device``: twice its L2, at least 256 MB."""
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        return max(2 * l2, 256 * 1024 * 1024)

    def __call__(self) -> None:
        self.buffer.zero_()


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
    if calls == 1 and elapsed >= max(window, 0.1 * config.budget_s):  # _estimate_call_s would only time it again
        return elapsed
    return _estimate_call_s(fn, setup, torch.cuda.synchronize, warmup, config.budget_s)


def _estimate_call_s(fn: Callable, setup: Callable, sync: Callable[[], None], warmup: int, budget_s: float) -> float:
    """Warm up and return the wall time of one call (setup excluded).

    The first call is timed on its own; further warmup calls take at most a
    tenth of the budget, so a slow solution (like the per-head reference loop)
    gets few or none.
    """
    def timed_call() -> float:
        args = setup(None)
        sync()
        start = time.perf_counter()
        fn(args)
        sync()
        return time.perf_counter() - start

    estimate = timed_call()
    for _ in range(min(warmup, int(0.1 * budget_s / max(estimate, 1e-9)))):  # at most a tenth of the budget
        estimate = timed_call()
    return estimate


def bench_wallclock(fn: Callable, setup: Callable, config: TimingConfig, after: Callable = _nothing) -> TimingStats:
    """Host wall-clock µs per call (CPU runs): ``perf_counter`` around the call."""
    planned = plan_iterations(_estimate_call_s(fn, setup, lambda: None, config.warmup, config.budget_s), config)

    def time_calls(first: int, count: int) -> list[float]:
        samples = []
        for index in range(first, first + count):
            args = setup(index)
            start = time.perf_counter()
            fn(args)
            samples.append((time.perf_counter() - start) * 1e6)
            after(index)
        return samples

    return _stopped(Tier.WALLCLOCK, until_stable(time_calls, planned, config), config)


def _stopped(tier: str, samples: list[float], config: TimingConfig, **extra) -> TimingStats:
    """:func:`summarize` of a tier under the stop rule, with why it stopped and its noise."""
    return summarize(tier, samples, stop=stop_reason(samples, config), noise=median_noise(samples), **extra)


def bench_events(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                 after: Callable = _nothing) -> TimingStats:
    """CUDA-event µs per call, corrected do_bench (see module doc)."""
    planned = plan_iterations(warm_then_estimate(fn, setup, flush, config, config.warmup), config)
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

    samples = until_stable(time_calls, planned, config)
    CLOCKS.busy()
    return _stopped(Tier.EVENTS, samples, config, host_call_us=statistics.median(host) * 1e6)


def sync_plan(estimate_s: float, config: TimingConfig) -> tuple[int, int]:
    """``(timed calls, warm-up calls)`` of each of the sync tier's trials: the contest's
    SYNC_ITERS and SYNC_WARMUP, or for a solution too slow for ``budget_s`` fewer timed calls
    (``min_iters`` of them over all trials, at least) and no warm-up of its own (it ran just
    before, in the estimate of ``estimate_s`` seconds a call)."""
    trials = max(config.trials, 1)
    per_trial = TimingConfig(iters=SYNC_ITERS, budget_s=config.budget_s / trials,
                             min_iters=math.ceil(config.min_iters / trials))
    iters = plan_iterations(estimate_s, per_trial)
    return iters, SYNC_WARMUP if iters == SYNC_ITERS else 0


def bench_sync(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
               after: Callable = _nothing) -> TimingStats:
    """The contest's original timer: sync before every start event; mean of trial means.

    10 warmup and 50 timed calls per trial as the contest did, except that a
    solution too slow for ``budget_s`` gets fewer timed calls (recorded in ``iters``;
    ``min_iters`` of them over all trials, at least) and no warm-up calls of its own.
    """
    iters, warmup = sync_plan(warm_then_estimate(fn, setup, flush, config, 0), config)
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
    CLOCKS.busy()
    return summarize(Tier.SYNC, samples, value_us=statistics.mean(trial_means), trials=config.trials,
                     host_call_us=statistics.median(host) * 1e6)


def bench_cupti(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                after: Callable = _nothing) -> TimingStats | TierUnavailable:
    """CUPTI kernel-sum µs per call; also the span and kernels per call.

    Returns TierUnavailable when CUPTI cannot record here: a number is never
    labelled CUPTI unless CUPTI recorded it (no silent CUDA-event fallback).
    """
    try:
        from harness.judge import cupti
    except ImportError as exc:
        return TierUnavailable(Tier.CUPTI, f"harness.judge.cupti cannot be imported: {exc}")
    try:
        recorder = cupti.recording()  # probes CUPTI; records nothing until entered, after the warm-up
    except cupti.CuptiUnavailable as exc:
        return TierUnavailable(Tier.CUPTI, str(exc))
    planned = plan_iterations(warm_then_estimate(fn, setup, flush, config, config.warmup), config)
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

            samples = until_stable(time_calls, planned, config)
    except cupti.CuptiUnavailable as exc:
        if records:  # calls were already timed and reported: a failure, not a tier that cannot run here
            raise RuntimeError(f"CUPTI stopped recording after {len(records)} timed calls: {exc}") from exc
        return TierUnavailable(Tier.CUPTI, str(exc))
    CLOCKS.busy()
    spans = sorted(r.span_us for r in records)
    kernels = sorted(r.n_kernels for r in records)
    names = sorted({n for r in records for n in r.names})
    return _stopped(Tier.CUPTI, samples, config, span_median_us=statistics.median(spans),
                     kernels_per_call=statistics.median(kernels), kernel_names=names[:8])


def contest_samples(calls: int) -> int:
    """Samples a ``contest`` tier reports for ``calls`` reported calls: its timer makes
    :data:`CONTEST_TRIALS` x ``repeat_iters`` calls on one input set, reported as one."""
    return calls * CONTEST_TRIALS * CONTEST_SETTINGS["repeat_iters"]


def contest_value(samples_us: list[float]) -> float:
    """The ``contest`` figure (µs): the median of each trial's spans, mean over the trials.

    How flashinfer-bench combines its trials is not asserted here: the mean of the trial
    medians is what the sync tier does with the original contest's trials, and the trace
    keeps every sample, so another combination can be computed from it.

    Raises:
        ValueError: the samples are not :data:`CONTEST_TRIALS` equal trials.
    """
    per_trial = CONTEST_SETTINGS["repeat_iters"]
    if len(samples_us) != CONTEST_TRIALS * per_trial:
        raise ValueError(f"{len(samples_us)} contest samples, expected {CONTEST_TRIALS} trials of {per_trial}")
    return statistics.mean(statistics.median(samples_us[i * per_trial:(i + 1) * per_trial])
                           for i in range(CONTEST_TRIALS))


def _contest_timer():
    """FlashInfer's CUPTI timer, or the reason it cannot be the contest's timer here."""
    from harness.judge import cupti  # noqa: PLC0415  (imports without cupti-python; says why in the status)
    ok, reason = cupti.cupti_status()
    if not ok:  # flashinfer would time with CUDA events and only warn: never a contest figure
        return None, f"CUPTI cannot record here ({reason}); FlashInfer's timer would fall back to CUDA events"
    try:
        from flashinfer.testing import bench_gpu_time_with_cupti  # noqa: PLC0415
    except Exception as exc:
        return None, f"flashinfer.testing cannot be imported ({type(exc).__name__}: {exc}); install the gpu extra"
    return bench_gpu_time_with_cupti, None


def _spread(entry: Callable) -> Callable:
    """A call on setup's dict of a positional entry (the DPS entry), whose order the dict keeps."""
    return lambda args: entry(*args.values())


def bench_contest(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                  after: Callable = _nothing, entry: Callable | None = None) -> TimingStats | TierUnavailable:
    """The final contest's figure: FlashInfer's own CUPTI timer with flashinfer-bench's settings.

    ``setup(0)`` makes the one input set every call gets (the contest passes the same
    positional arguments each time); a dict is handed to FlashInfer as its values, in
    order, and the timer calls ``entry`` with them as they come (the judge's DPS entry, called
    as the contest calls it; ``fn`` is then the same call on the dict), else ``fn`` on them put
    back into a dict. Each of :data:`CONTEST_TRIALS` trials
    returns ``repeat_iters`` per-call spans (ms: first kernel's start to last kernel's
    end); ``after(0)`` runs once at the end, so the judge can read the outputs the calls
    left. ``flush`` and our clock warm-up run first only to start from a warm GPU, as
    the contest's GPU was from its preceding workloads.

    Returns:
        TimingStats in µs (``value_us``: :func:`contest_value`; ``trials``), or
        TierUnavailable when CUPTI or FlashInfer is missing or FlashInfer warned that
        it fell back to CUDA events.
    """
    timer, reason = _contest_timer()
    if timer is None:
        return TierUnavailable(Tier.CONTEST, reason)
    CLOCKS.warm(fn, setup, flush, config)
    args = setup(0)
    names = list(args) if isinstance(args, dict) else None
    values = tuple(args.values()) if names else (args,)
    call = entry or ((lambda *given: fn(dict(zip(names, given)))) if names else fn)
    samples = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(CONTEST_TRIALS):
            samples.extend(ms * 1e3 for ms in timer(call, input_args=values, **CONTEST_SETTINGS))
    fell_back = [str(w.message) for w in caught
                 if "cupti" in str(w.message).lower() and any(k in str(w.message).lower() for k in _FALLBACK_WORDS)]
    if fell_back:
        return TierUnavailable(Tier.CONTEST, f"FlashInfer did not time with CUPTI: {fell_back[0][:200]}")
    if len(samples) != contest_samples(1):
        return TierUnavailable(Tier.CONTEST, f"FlashInfer's timer returned {len(samples)} spans for "
                                          f"{CONTEST_TRIALS} trials of {CONTEST_SETTINGS['repeat_iters']} calls")
    torch.cuda.synchronize()
    CLOCKS.busy()
    after(0)
    return summarize(Tier.CONTEST, samples, value_us=contest_value(samples), trials=CONTEST_TRIALS)


def gpu_tier_unavailable_reason(device: str) -> str | None:
    """Why GPU tiers cannot run on ``device`` (None if they can)."""
    if not str(device).startswith("cuda"):
        return f"device is {device}: GPU tiers need --device cuda"
    if not torch.cuda.is_available():
        return "no CUDA device visible to PyTorch"
    return None


def measure(tier: str, fn: Callable, setup: Callable, flush: Callable | None, device: str,
            config: TimingConfig, after: Callable = _nothing, positional: bool = False) -> TimingStats | TierUnavailable:
    """Run one tier; GPU tiers on a CPU run come back unavailable with the reason.

    ``setup(index)`` makes the arguments of one call outside the timed region:
    ``index`` numbers the timed calls 0, 1, ... and is None for warm-up and
    estimate calls. ``after(index)`` runs after each timed call, also outside
    the timed region (the judge's worker ships sampled outputs from there).
    ``positional``: ``fn`` takes the values of setup's dict as positional arguments,
    in its order (a DPS entry), instead of the dict.
    """
    entry = fn if positional else None
    fn = _spread(fn) if positional else fn
    if tier == Tier.WALLCLOCK:
        return bench_wallclock(fn, setup, config, after)
    reason = gpu_tier_unavailable_reason(device)
    if reason:
        return TierUnavailable(tier, reason)
    if tier == CONTEST_TIER:
        return bench_contest(fn, setup, flush, config, after, entry)  # its timer hands the values over itself
    bench = {Tier.CUPTI: bench_cupti, Tier.EVENTS: bench_events, Tier.SYNC: bench_sync}[tier]
    return bench(fn, setup, flush, config, after)
