"""harness.judge.timing helpers that need no GPU: the clock warm-up loop and when it is short,
the stop rule of the cupti/events/wallclock tiers; the recorded commit."""

import math
import random
import statistics
import time

import pytest
import torch

from harness.records.environment import git_commit
from harness.judge import timing
from harness.judge.timing import gpu_state
from harness.judge.timing import (IDLE_S, STOP_MIN_SAMPLES, WARM_MAX_CALLS, ClockWarmth, TimingConfig,
                                  bench_wallclock, is_stable, median_noise, timer_tick, until_stable,
                                  warm_gpu_clocks)


def test_warm_gpu_clocks_calls_for_the_given_time_then_synchronizes(monkeypatch):
    syncs, log = [], []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    calls = warm_gpu_clocks(lambda a: log.append(("call", a)), lambda index=None: "args", lambda: log.append("flush"), 0.02)
    assert calls >= 1 and log[:2] == ["flush", ("call", "args")] and len(log) == 2 * calls
    assert syncs  # the last launch is waited for before timing starts
    assert warm_gpu_clocks(lambda a: None, lambda index=None: None, lambda: None, 0.0) == 1  # at least one call


def test_a_lying_clock_cannot_hold_the_warm_up_forever(monkeypatch):
    """A solution can patch time.perf_counter in its own process (fixture patch-timer: 1 ns per reading)."""
    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 1e-9)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert warm_gpu_clocks(lambda a: None, lambda index=None: None, lambda: None, 0.2) == WARM_MAX_CALLS


def test_git_commit_names_the_override_or_a_dirty_tree(monkeypatch):
    monkeypatch.setenv("GDN_BENCH_COMMIT", "0123456789ab")
    assert git_commit() == "0123456789ab"
    monkeypatch.delenv("GDN_BENCH_COMMIT")
    assert isinstance(git_commit(), str)


def test_proof_measurements_run_in_a_process_of_their_own():
    import os

    from tools.timing_proof import in_fresh_process

    assert in_fresh_process(os.getpid) != os.getpid()


def test_the_full_warm_up_comes_only_after_an_idle_spell(monkeypatch):
    """0.2 s before each of three tiers of every workload was most of a fast solution's GPU time
    (issue #17): a tier that follows a busy one only tops the clock up."""
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    config, clocks = TimingConfig(warm_s=0.2, keep_warm_s=0.03), ClockWarmth()
    assert clocks.seconds(config) == 0.2  # a fresh process: the GPU may have idled for minutes
    clocks.busy()
    now[0] += IDLE_S / 2
    assert clocks.seconds(config) == 0.03
    now[0] += IDLE_S
    assert clocks.seconds(config) == 0.2


def test_median_noise_is_the_half_width_of_the_medians_confidence_interval():
    assert median_noise([5.0] * 30) == 0.0
    assert median_noise([1.0, 2.0, 3.0]) == pytest.approx((3.0 - 1.0) / (2 * 2.0))  # few samples: the whole range
    # n = 100: ranks 41 and 61 (50 -/+ 1.96 * 10 / 2, plus one at the top)
    assert median_noise([float(v) for v in range(1, 101)]) == pytest.approx((61 - 40) / (2 * 50.5))
    with pytest.raises(ValueError):
        median_noise([])


def test_the_noise_of_the_median_shrinks_like_one_over_root_n():
    rng = random.Random(7)
    draws = [rng.gauss(100.0, 2.0) for _ in range(400)]
    assert median_noise(draws[:25]) > 1.5 * median_noise(draws)


def test_a_median_known_to_one_step_of_the_timer_is_stable():
    """CUPTI's 32 ns steps are 1.5% of a 2 µs kernel: a 0.5% rule alone would never stop there."""
    steps = [2.016 + 0.032 * i for i in range(8)]
    one_step = [2.048] * 10 + [2.08] * 12 + [2.016, 2.112]  # median between two neighbouring steps
    assert timer_tick(one_step) == pytest.approx(0.032) and timer_tick([2.0] * 5) == 0.0
    assert median_noise(one_step) > 0.005 and is_stable(one_step, TimingConfig(max_noise=0.005))
    spread = [steps[i % 8] for i in range(24)]  # the interval spans three steps: not yet
    assert not is_stable(spread, TimingConfig(max_noise=0.005))
    assert not is_stable(one_step, TimingConfig(max_noise=0.0))  # 0: the fixed count, always


def test_a_nanosecond_of_timestamp_rounding_is_not_the_timers_step():
    """CUPTI's durations land a nanosecond either side of the H100's 32 ns grid (the first GPU run
    of the one-step clause: a 1 ns "step" kept 172 of 180 fast tiers running all 100 calls)."""
    rounded = [2.048] * 6 + [2.049] * 4 + [2.08] * 7 + [2.081] * 5 + [2.016, 2.112]
    assert timer_tick(rounded) == pytest.approx(0.031)
    assert is_stable(rounded, TimingConfig(max_noise=0.005))
    two_steps = [2.016] * 8 + [2.048] * 3 + [2.049] + [2.08] * 3 + [2.081] + [2.112] * 8
    assert not is_stable(two_steps, TimingConfig(max_noise=0.005))  # the median's interval spans two steps


def test_the_window_mean_resolves_what_one_step_of_the_timer_hides():
    """Two kernels 10 ns apart, read through a 32 ns clock from a start phase uniform over its step
    (as CUPTI times an H100 kernel), have the same median; the window mean tells them apart to a
    nanosecond, and a host hiccup's slow calls stay out of it."""
    from harness.judge.timing.stats import window_mean

    rng, step = random.Random(7), 0.032

    def readings(duration_us: float) -> list[float]:
        starts = [rng.uniform(0, step) for _ in range(3000)]
        return [step * (math.ceil((s + duration_us) / step) - math.ceil(s / step)) for s in starts]

    slower, faster = readings(1.981), readings(1.971)
    assert statistics.median(slower) == statistics.median(faster) == pytest.approx(1.984)
    assert window_mean(slower) == pytest.approx(1.981, abs=0.001)
    assert window_mean(faster) == pytest.approx(1.971, abs=0.001)
    assert window_mean(slower + [40.0] * 30 + [2.5] * 30) == pytest.approx(1.981, abs=0.001)
    with pytest.raises(ValueError):
        window_mean([])


def test_a_tier_stops_once_its_median_is_stable_and_never_before_the_minimum():
    calls = []

    def time_calls(first, count):
        calls.append((first, count))
        return [2.0] * count  # perfectly steady

    samples = until_stable(time_calls, planned=100, config=TimingConfig(iters=100, max_noise=0.005))
    assert len(samples) == STOP_MIN_SAMPLES and calls == [(0, STOP_MIN_SAMPLES)]


def test_a_noisy_tier_runs_to_its_planned_count_and_max_noise_zero_never_stops_early():
    rng = random.Random(3)
    noisy = lambda first, count: [rng.uniform(1.0, 3.0) for _ in range(count)]  # noqa: E731
    assert len(until_stable(noisy, planned=60, config=TimingConfig(max_noise=0.005))) == 60
    steady = lambda first, count: [2.0] * count  # noqa: E731
    assert len(until_stable(steady, planned=60, config=TimingConfig(max_noise=0.0))) == 60
    assert len(until_stable(steady, planned=7, config=TimingConfig())) == 7  # a budget below the minimum


def test_the_wallclock_tier_numbers_its_calls_across_chunks_and_records_why_it_stopped(monkeypatch):
    ticks = iter(range(10**6))
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 1e-3)  # every call reads 1 ms
    seen, after = [], []
    stats = bench_wallclock(lambda args: None, lambda index=None: seen.append(index), None, TimingConfig(warmup=0),
                            after.append)
    timed = [i for i in seen if i is not None]
    assert timed == after == list(range(stats.iters)) and stats.iters == STOP_MIN_SAMPLES
    assert stats.extra["stop"] == "stable" and stats.extra["noise"] == pytest.approx(0.0, abs=1e-9)
    assert statistics.median(stats.samples_us) == pytest.approx(1000.0)


class FakeEvent:
    """torch.cuda.Event on the CPU: records time.perf_counter; elapsed_time in ms."""

    def __init__(self, enable_timing=True):
        self.at = None

    def record(self):
        self.at = time.perf_counter()

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


@pytest.fixture
def cpu_gpu_tiers(monkeypatch):
    """The GPU tiers' CUDA calls made harmless on the CPU, and a fresh clock warmth."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(gpu_state, "CLOCKS", ClockWarmth())


def slow_solution(seconds: float):
    """A call that takes ``seconds`` of wall time, and the list of its calls' setup indices."""
    calls = []

    def setup(index=None):
        calls.append(index)
        return index

    return (lambda args: time.sleep(seconds)), setup, calls


def test_a_call_longer_than_the_warm_up_window_is_its_own_estimate(cpu_gpu_tiers):
    """The per-head reference loop at B = 64 made two untimed calls a tier (issue #17)."""
    fn, setup, calls = slow_solution(0.02)
    config = TimingConfig(warm_s=0.005, keep_warm_s=0.005, warmup=10, budget_s=0.05)
    estimate = timing.warm_then_estimate(fn, setup, lambda: None, config, config.warmup)
    assert calls == [None] and estimate >= 0.02  # one call: the warm-up's, timed
    calls.clear()
    timing.warm_then_estimate(fn, setup, lambda: None, TimingConfig(keep_warm_s=0.0, budget_s=0.05), 10)
    assert calls == [None]  # no top-up window (the default after busy work): the one untimed call is enough
    fn, setup, calls = slow_solution(0.0)
    assert timing.warm_then_estimate(fn, setup, lambda: None, config, 2) < 0.005
    assert len(calls) > 3  # a fast call: the warm-up loop, then one timed call and the warm-up calls


def test_one_slow_call_does_not_make_the_estimate():
    """The estimate is the fastest of at least ESTIMATE_CALLS calls where they fit in a tenth of the
    budget: a hiccup in one call (pt-compiled's sync tier, H100), or in two of three (fla-upstream's),
    no longer cuts an honest tier."""
    from harness.judge.timing import stop_rule

    for slow_calls in (1, 2):
        pauses = iter([0.03] * slow_calls + [0.001] * 3)
        calls = []
        estimate = stop_rule.estimate_call_s(lambda args: calls.append(time.sleep(next(pauses))), lambda index: index,
                                             lambda: None, 0, budget_s=1.0)
        assert len(calls) == stop_rule.ESTIMATE_CALLS and estimate < 0.01, slow_calls
    pauses = iter([0.03])  # a call over a tenth of the budget is timed once, as before
    calls.clear()
    assert stop_rule.estimate_call_s(lambda args: calls.append(time.sleep(next(pauses))), lambda index: index,
                                     lambda: None, 10, budget_s=0.2) >= 0.03 and len(calls) == 1


def test_a_slow_cupti_tier_records_no_untimed_call(cpu_gpu_tiers, monkeypatch):
    from harness.judge import cupti_recorder as cupti

    recordings, opened = [], []

    class FakeRecording:
        def __enter__(self):
            opened.append(self)
            return self

        def __exit__(self, *exc_info):
            pass

        def time_calls(self, fn, setup, flush, iters, warmup, after):
            recordings.append((iters, warmup))
            for index in range(warmup + iters):
                fn(setup(None if index < warmup else index - warmup))
            return [cupti.CallRecord(5.0, 5.0, 1, ["k"]) for _ in range(iters)]

    monkeypatch.setattr(cupti, "recording", FakeRecording)
    fn, setup, _ = slow_solution(0.01)
    config = TimingConfig(min_iters=5, budget_s=0.01, warm_s=0.001, keep_warm_s=0.001)
    assert timing.bench_cupti(fn, setup, lambda: None, config).iters == 5 and recordings == [(5, 0)]
    recordings.clear()
    fn, setup, _ = slow_solution(0.0)
    timing.bench_cupti(fn, setup, lambda: None, TimingConfig(warm_s=0.001, keep_warm_s=0.001))
    assert recordings[0] == (STOP_MIN_SAMPLES, 1)  # a fast one: one untimed call first, as before
    recordings.clear()
    opened.clear()
    timing.bench_cupti(fn, setup, lambda: None, TimingConfig(warm_s=0.001, keep_warm_s=0.001, max_noise=0, iters=40))
    assert recordings == [(20, 1), (10, 0), (10, 0)] and len(opened) == 1  # the chunks share one recording


def test_each_tier_says_which_timer_made_it_and_with_what_settings():
    """The trace's ``timer``: the timing core's loop or an in-process one, FlashInfer's for the
    contest tier, with the counts and the stop rule the run was given (issue #29)."""
    from harness.judge.timing import describe_timer

    config = TimingConfig(iters=40, min_iters=3, max_noise=0.01, budget_s=0.7, trials=2)
    events = describe_timer("events", config, by_core=True)
    assert events.startswith("timing core: a CUDA event pair") and "up to 40 timed calls, at least 3" in events
    assert "+-1.00%" in events and "0.7 s budget" in events and "256 MB" in events
    assert describe_timer("events", config, by_core=False).startswith("in-process:")
    assert "up to 8 buffer sets in turn, within 2 GiB" in events  # the core's placements (gdn_core.c)
    assert "the calls take 8 buffer sets in turn" in describe_timer("cupti", config, by_core=False, sets=8)
    sync = describe_timer("sync", config, by_core=False)
    assert sync.startswith("flashinfer-bench 0.1.2's time_runnable loop") and "do_bench" in sync
    assert f"{timing.SYNC_WARMUP} warm-up and up to {timing.SYNC_ITERS} timed calls" in sync and "2 trials" in sync
    assert f"at least {math.ceil(config.min_iters / config.trials)}" in sync  # a slow solution's trials
    assert "256 MB zeroed" in sync and "CUPTI figure" in sync
    assert describe_timer("sync", config, by_core=True) == sync  # the library's loop wherever it runs
    contest = describe_timer("contest", config, by_core=False)
    assert "bench_gpu_time_with_cupti" in contest and f"{timing.CONTEST_TRIALS} trials of 50 calls" in contest
    cupti = describe_timer("cupti", config, by_core=True)
    assert "2 x L2 zeroed, as FlashInfer's CUPTI timer" in cupti and "256 MB" not in cupti
    assert "cuMemsetD32Async" in cupti  # the core's flush, said as it is
    assert "torch's int8 fill" in describe_timer("cupti", config, by_core=False)  # the in-process loop's
    # every flush is a zero fill, and the figure carries its write-backs (docs/timing.md): each tier says so
    for tier in ("cupti", "events", "sync", "contest"):
        assert "dirty lines" in describe_timer(tier, config, by_core=tier != "contest")
    assert "dirty" not in describe_timer("wallclock", config, by_core=False)
    with pytest.raises(KeyError):
        describe_timer("no-such-tier", config, by_core=True)


@pytest.mark.parametrize("l2_mb, tier, flush_mb", [
    (50, "cupti", 100),     # an H100: FlashInfer's CUPTI timer zeroes 2 x L2
    (50, "events", 256),    # the events tier's lead needs 256 MB a flush where the L2 is small
    (50, "sync", 256),      # flashinfer-bench 0.1.2 zeroes 256 MB
    (50, None, 256),        # a flush for no tier in particular (warm-ups, probes)
    (126, "cupti", 252),    # a B200
    (200, "events", 400),   # twice a large L2 is more than 256 MB
])
def test_each_tier_flushes_what_its_named_timer_flushes(l2_mb, tier, flush_mb):
    """The cupti tier zeroes 2 x L2 as FlashInfer's CUPTI timer does; the others at least 256 MB (issue #29)."""
    assert gpu_state.flush_bytes_for(l2_mb << 20, tier) == flush_mb << 20


def test_measure_hands_each_tier_its_own_flush_from_one_buffer(monkeypatch):
    """An L2Flusher given to ``measure`` zeroes the tier's bytes (the first 2 x L2 of its buffer, as int8, for
    the cupti tier), and any other callable is passed as is."""
    from harness.judge.timing import L2Flusher, tiers

    flusher = object.__new__(L2Flusher)  # no GPU here: a CPU buffer stands in for the device's
    flusher.l2_bytes, flusher.nbytes = 4096, gpu_state.MIN_FLUSH_BYTES
    flusher.buffer = torch.empty(flusher.nbytes // 4, dtype=torch.int32)
    given = {}
    monkeypatch.setattr(tiers, "gpu_tier_unavailable_reason", lambda device: None)
    for tier in ("cupti", "events"):
        monkeypatch.setitem(tiers.TIMERS, tier, lambda fn, setup, flush, *rest, tier=tier: given.update({tier: flush}))
        tiers.measure(tier, lambda args: None, lambda index=None: {}, flusher, "cuda", TimingConfig())
    zeroes = given["cupti"].__self__  # the cupti tier's: 2 x L2 as int8, FlashInfer's fill (not torch's int32 one)
    assert zeroes.data_ptr() == flusher.buffer.data_ptr() and zeroes.dtype == torch.int8 and zeroes.numel() == 2 * 4096
    flusher.buffer.fill_(-1)
    given["cupti"]()
    assert (flusher.buffer.view(torch.int8)[:2 * 4096] == 0).all() and (flusher.buffer.view(torch.int8)[2 * 4096:] == -1).all()
    assert given["events"] is flusher
    plain = lambda: None  # noqa: E731
    tiers.measure("cupti", lambda args: None, lambda index=None: {}, plain, "cuda", TimingConfig())
    assert given["cupti"] is plain
