"""The ``sync`` tier (the contest's original timer, flashinfer-bench 0.1.2's ``time_runnable``
loop) on the CPU: that our call of its ``do_bench`` is the one ``time_runnable`` makes, the
tier's trials around it, and the judge's side (counts, the slow-solution cut, the CUPTI
bracket). Whether the figures agree with ``time_runnable`` in a plain process is a GPU
measurement (tools/tier_parity.py)."""

import inspect
import math
import statistics
import time
from types import SimpleNamespace

import pytest
import torch

from harness.cli import parse_tiers
from harness.judge import figures
from harness.judge import protocol as msg
from harness.judge.figures import Rejected
from harness.judge.timing import SYNC_ITERS, SYNC_WARMUP, TierUnavailable, TimingConfig, bench_sync, gpu_state, sync
from harness.records.trace import TierFigure
from test_judge import WORKLOAD, ScriptedWorker, make_judge

fib = pytest.importorskip("flashinfer_bench.bench.timing")
ORIGINAL_DO_BENCH = fib.do_bench


def do_bench_arguments(args, kwargs) -> dict:
    """Every parameter of flashinfer-bench's do_bench as a call gave it, defaults filled in."""
    bound = inspect.signature(ORIGINAL_DO_BENCH).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


class FakeDoBench:
    """Stands in for flashinfer-bench's do_bench on the CPU: records its arguments and whether the
    device lock was held, calls ``fn(setup())`` as often as it would, returns ``times_ms`` (a
    trial's worth each call) summarized as do_bench summarizes them."""

    def __init__(self, times_ms=None, calls=True):
        self.times_ms, self.calls, self.records = times_ms, calls, []

    def __call__(self, *args, **kwargs):
        arguments = do_bench_arguments(args, kwargs)
        lock = fib._device_lock(arguments["device"])
        held = not lock.acquire(block=False)
        if not held:
            lock.release()
        self.records.append((arguments, held))
        for _ in range(arguments["warmup"] + arguments["rep"] if self.calls else 0):
            arguments["fn"](arguments["setup"]())
        times = self.times_ms(len(self.records)) if self.times_ms else [0.001] * arguments["rep"]
        return fib._summarize_statistics(times, arguments["quantiles"], arguments["return_mode"])


@pytest.fixture
def no_gpu_needed(monkeypatch):
    """bench_sync's own GPU calls made harmless on the CPU: the clock warm-up makes one call as the
    real one does (``fn(setup(None))``), no synchronize, device 0 current."""
    def one_warm_call(fn, setup, flush, seconds):
        fn(setup(None))
        return 1

    monkeypatch.setattr(gpu_state, "warm_gpu_clocks", one_warm_call)
    monkeypatch.setattr(gpu_state, "CLOCKS", gpu_state.ClockWarmth())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def described(args) -> list:
    """Call arguments as comparable values: a tensor by its values, anything else as it is."""
    return [("tensor", a.tolist()) if isinstance(a, torch.Tensor) else a for a in args]


# ------------------------------------------------------------------ the worker's side


def test_the_sync_tier_calls_do_bench_as_flashinfer_benchs_time_runnable_does(monkeypatch):
    """If flashinfer-bench's time_runnable changes what it hands do_bench, this says so."""
    recorder = FakeDoBench(times_ms=lambda n: [0.001, 0.002, 0.006], calls=False)
    monkeypatch.setattr(fib, "do_bench", recorder)
    got = []
    tensor = torch.arange(4.0)
    values = [tensor, None, 0.5]
    mean_ms = fib.time_runnable(lambda *args: got.append(args), values, 3, 7, "cuda:0")
    samples_ms = sync.time_runnable_samples(fib, lambda *args: got.append(args), values, 3, 7, "cuda:0")
    (theirs, their_lock), (ours, our_lock) = recorder.records
    assert their_lock and our_lock  # both under flashinfer-bench's device lock
    assert set(ours) == set(theirs)
    same = {name for name in theirs if name not in ("fn", "setup", "return_mode")}
    assert {name: ours[name] for name in same} == {name: theirs[name] for name in same}  # warmup, rep, device, ...
    assert (theirs["return_mode"], ours["return_mode"]) == ("mean", "all")
    assert statistics.mean(samples_ms) == pytest.approx(mean_ms)  # every sample of what time_runnable averages
    for arguments in (theirs, ours):  # the setup: fresh clones of the tensors, the rest as given
        cloned = arguments["setup"]()
        assert described(cloned) == described(values) and cloned[0] is not tensor
        arguments["fn"](cloned)  # the call: the runnable on the clones, spread
        assert got[-1][0] is cloned[0] and described(got[-1]) == described(values)


def test_each_trial_gets_one_input_set_and_its_outputs_come_from_an_untimed_call(monkeypatch, no_gpu_needed):
    trials = 3
    per_trial_ms = [0.001, 0.002, 0.004]  # each trial's samples are one value: its mean
    fake = FakeDoBench(times_ms=lambda n: [per_trial_ms[n - 1]] * SYNC_ITERS)
    monkeypatch.setattr(fib, "do_bench", fake)
    made, log = {}, []

    def setup(index=None):
        made[index] = {"x": torch.full((2,), float(index or 0)), "scale": None, "out": torch.zeros(2)}
        return made[index]

    def entry(*values):  # the judge's DPS entry
        log.append(("call", values))

    stats = bench_sync(lambda args: entry(*args.values()), setup, lambda: None, TimingConfig(trials=trials),
                       lambda index: log.append(("after", index)), entry=entry)
    assert [(arguments["warmup"], arguments["rep"], arguments["return_mode"]) for arguments, _ in fake.records] == \
        [(SYNC_WARMUP, SYNC_ITERS, "all")] * trials
    afters = [k for k, (what, _) in enumerate(log) if what == "after"]
    assert [log[k][1] for k in afters] == list(range(trials))  # one reported call a trial
    for trial, k in enumerate(afters):  # ... right after an untimed call on the trial's own arguments
        assert all(a is b for a, b in zip(log[k - 1][1], made[trial].values()))
        timed = log[k - 1 - SYNC_ITERS:k - 1]  # ... after the timed calls, on clones of them
        assert all(v[0] is not made[trial]["x"] and torch.equal(v[0], made[trial]["x"]) for _, v in timed)
    assert stats.iters == trials * SYNC_ITERS and stats.extra["trials"] == trials
    assert stats.value_us == pytest.approx(statistics.mean(per_trial_ms) * 1e3)
    assert stats.extra["host_call_us"] >= 0 and stats.extra["host_probe_us"] > 0


def test_the_hosts_speed_is_read_just_before_and_after_each_trials_loop(monkeypatch, no_gpu_needed):
    from harness.judge.timing import host_speed

    order, readings = [], iter([4e-6, 6e-6, 7e-6, 9e-6, 12e-6, 20e-6])  # seconds, two a trial

    def probe():
        order.append("probe")
        return next(readings)

    fake = FakeDoBench()
    monkeypatch.setattr(fib, "do_bench", lambda *args, **kwargs: (order.append("loop"), fake(*args, **kwargs))[1])
    monkeypatch.setattr(host_speed, "host_probe_s", probe)
    stats = bench_sync(lambda args: None, lambda index=None: {"x": torch.zeros(1)}, lambda: None, TimingConfig(trials=3))
    assert order == ["probe", "loop", "probe"] * 3
    assert stats.extra["host_probe_us"] == pytest.approx(8.0)  # the trials' 5, 8 and 16: their median
    assert stats.extra["host_probe_trials_us"] == pytest.approx([5.0, 8.0, 16.0])  # each trial's, in order
    assert stats.extra["trial_means_us"] == pytest.approx([1.0, 1.0, 1.0])  # FakeDoBench's 0.001 ms a call


def test_the_host_speed_reading_is_a_median_of_stand_ins_and_refuses_none():
    from harness.judge.timing import host_speed

    assert 0 < host_speed.host_probe_s(5) < 0.01
    with pytest.raises(ValueError, match="at least one reading"):
        host_speed.host_probe_s(0)


def test_a_slow_sync_tier_makes_min_iters_timed_calls_over_its_trials_and_no_warm_up(monkeypatch, no_gpu_needed):
    fake = FakeDoBench()
    monkeypatch.setattr(fib, "do_bench", fake)
    monkeypatch.setattr(gpu_state, "warm_then_estimate", lambda fn, setup, flush, config, warmup: 0.12)
    config = TimingConfig(trials=3, min_iters=5, budget_s=0.01)
    stats = bench_sync(lambda args: None, lambda index=None: index, lambda: None, config)
    least = math.ceil(config.min_iters / config.trials)
    assert [(arguments["warmup"], arguments["rep"]) for arguments, _ in fake.records] == [(0, least)] * config.trials
    assert stats.iters == least * config.trials


def test_without_flashinfer_bench_the_sync_tier_is_unavailable_and_says_why(monkeypatch, no_gpu_needed):
    monkeypatch.setattr(sync, "FIB_TIMING", "flashinfer_bench_not_installed_here.bench.timing")
    calls = []
    result = bench_sync(lambda args: calls.append(args), lambda index=None: {}, lambda: None, TimingConfig(),
                        calls.append)
    assert isinstance(result, TierUnavailable) and "interop" in result.reason and "cannot be imported" in result.reason
    assert calls == []  # nothing called, nothing reported


def test_a_do_bench_that_returns_the_wrong_count_gives_no_figure(monkeypatch, no_gpu_needed):
    monkeypatch.setattr(fib, "do_bench", FakeDoBench(times_ms=lambda n: [0.001] * (SYNC_ITERS - 1)))
    after = []
    with pytest.raises(RuntimeError, match="do_bench returned"):
        bench_sync(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig(), after.append)
    assert after == []


def test_the_worker_gives_the_sync_timer_the_entry_as_flashinfer_bench_calls_it(monkeypatch):
    from harness.judge import worker as worker_module

    seen, order = {}, []

    def measure(tier, fn, setup, flush, device, config, after, positional):
        seen[tier] = (fn, positional)
        order.append(("measure", tier))
        return TierUnavailable(tier, "not here")

    monkeypatch.setattr(worker_module, "measure", measure)
    monkeypatch.setattr(worker_module, "DestinationRing", lambda worker, axes: SimpleNamespace(drain=lambda: None))
    entry = worker_module.Entry(run=lambda *args: None, contest_call=lambda *args: None)
    sent = []
    core = SimpleNamespace(recording_off=lambda: order.append(("recording off", None)))
    worker = SimpleNamespace(entry=entry, channel=SimpleNamespace(send=sent.append), flush=None, device="cpu",
                             timing=TimingConfig(), core=core)
    for tier in ("sync", "contest", "events"):
        worker_module.Worker.time_tier(worker, tier, 0, SimpleNamespace(axes={}), {}, {}, 0)
    assert seen == {"sync": (entry.contest_call, True), "contest": (entry.contest_call, True),
                    "events": (entry.run, True)}
    # the core's CUPTI recording ends before each of the worker's own tiers (it stays on through the cupti
    # tier's chunks only, and `--tiers sync` brings cupti right before sync)
    assert order == [("recording off", None), ("measure", "sync"), ("recording off", None), ("measure", "contest"),
                     ("recording off", None), ("measure", "events")]


# ------------------------------------------------------------------ the judge's side


def sync_samples(trials: int, per_trial: int, value_us: float = 5_000.0) -> list[float]:
    return [value_us] * trials * per_trial


@pytest.mark.parametrize("calls, per_trial, wall_s, words", [
    (3, SYNC_ITERS, 1.0, None),  # the contest's counts: 3 trials of 50
    (3, 2, 0.31, None),  # a slow solution's cut: ceil(5 / 3) a trial, the tier as long as its budget
    (3, 2, 0.1, "only a tier slower"),  # the same count from a tier that took a third of its budget
    (3, 1, 0.31, "sync tier reported"),  # fewer than ceil(min_iters / trials) a trial
    (2, SYNC_ITERS, 1.0, "trials"),  # a trial short: one reported call a trial, all of them
    (4, SYNC_ITERS, 1.0, "trials"),  # one too many
    (3, SYNC_ITERS + 1, 1.0, "sync tier reported"),  # more calls than the contest's
])
def test_the_judge_takes_the_sync_counts_of_the_contest_or_of_a_slow_tier(calls, per_trial, wall_s, words):
    config = TimingConfig(trials=3, budget_s=0.3, min_iters=5)
    samples = sync_samples(calls, per_trial, value_us=1.0)  # µs: they fit any of the wall clocks above
    if words is None:
        figures.check_samples("sync", samples, calls, wall_s, config)
    else:
        with pytest.raises(Rejected, match=words):
            figures.check_samples("sync", samples, calls, wall_s, config)


@pytest.mark.parametrize("samples", [[], sync_samples(3, SYNC_ITERS)[:-1], sync_samples(3, SYNC_ITERS) + [1.0]])
def test_sync_samples_that_are_no_whole_trials_are_rejected(samples):
    with pytest.raises(Rejected, match="sync tier reported"):
        figures.check_samples("sync", samples, 3, 10.0, TimingConfig(trials=3))


def test_a_sync_figure_no_cupti_figure_bounds_is_not_kept():
    sync_figure = TierFigure(tier="sync", available=True, value_us=1.0)
    events = TierFigure(tier="events", available=True, value_us=1.0)
    for cupti in (None, TierFigure(tier="cupti", available=False, reason="no libcupti here")):
        measured = {"sync": sync_figure, "events": events} | ({"cupti": cupti} if cupti else {})
        kept = figures.bounded_claims(measured)
        assert not kept["sync"].available and "CUPTI" in kept["sync"].reason
        assert kept["events"] is events  # the core's own figures stand
    bounded = {"cupti": TierFigure(tier="cupti", available=True, value_us=1.0), "sync": sync_figure}
    assert figures.bounded_claims(bounded) == bounded


def test_the_judge_verifies_every_trials_outputs_even_where_the_entry_modifies_its_inputs():
    """The timed calls get clones, so the reported call is the first on its trial's inputs."""
    judge = make_judge(min_iters=5)  # no floor: the scripted samples must only fit the wall clock
    judge.variant = SimpleNamespace(state_dtype="float32", meta=SimpleNamespace(inplace_state=False))
    judge.pending, judge.verified, judge.unbelievable, judge.inputs_modified = [], 0, None, ["state"]
    judge.checked_outputs = lambda worker, workload, message, what: ("outputs", what)
    trials = judge.ctx.config.timing.trials
    script = [m for call in range(trials) for m in (msg.Called(index=call), msg.Checked(outputs=[], call=call))]
    end = msg.TierEnd(tier="sync", available=True, samples_us=sync_samples(trials, SYNC_ITERS, value_us=0.001))
    worker = ScriptedWorker(*script, end)
    figure = judge.time_tier(worker, WORKLOAD, "sync", 2, deadline=time.monotonic() + 5)
    assert worker.sent.count(msg.Go(proceed=True)) == trials and judge.verified == trials
    assert figure.available and figure.trials == trials and figure.value_us == pytest.approx(0.001)
    assert "time_runnable" in figure.timer


@pytest.mark.parametrize("reported, kept", [
    ([6.5, 13.0, 6.6], [6.5, 13.0, 6.6]),  # one reading a trial: kept
    ([6.5, 13.0], None),                   # a trial short
    ([6.5, float("nan"), 6.6], None),      # one that cannot be true
    ([], None),                            # an older worker: none
])
def test_the_judge_keeps_each_sync_trials_mean_and_the_hosts_speed_beside_it(reported, kept):
    judge = make_judge(min_iters=5)
    samples = [10.0] * SYNC_ITERS + [20.0] * SYNC_ITERS + [12.0] * SYNC_ITERS  # the middle trial slow
    end = msg.TierEnd(tier="sync", available=True, samples_us=samples, host_probe_trials_us=reported)
    figure = judge.tier_result(WORKLOAD, "sync", end, 3, 3, wall_s=1.0)
    assert figure.trial_means_us == pytest.approx([10.0, 20.0, 12.0])  # the judge's split, whatever the worker says
    assert figure.value_us == pytest.approx(14.0) and figure.host_probe_trials_us == kept


def test_asking_for_the_sync_tier_brings_cupti():
    assert parse_tiers("sync", "cuda") == ("cupti", "sync")
    assert parse_tiers("events,sync,cupti", "cuda") == ("events", "sync", "cupti")
