"""The ``contest`` tier (the final contest's own timer) on the CPU: the call of FlashInfer's
timer, with a stand-in for it, and the judge's side of the tier. Whether FlashInfer's real
timer agrees is a GPU measurement (docs/timing.md)."""

import statistics
import time
import warnings
from types import SimpleNamespace

import pytest
import torch

from harness.cli import parse_tiers
from harness.judge import protocol as msg
from harness.judge import timing
from harness.judge.figures import Rejected
from harness.judge.timing.stop_rule import ESTIMATE_CALLS
from harness.judge.timing import contest, gpu_state
from harness.judge.timing import CONTEST_SETTINGS, CONTEST_TRIALS, TimingConfig, bench_contest, contest_value
from test_judge import WORKLOAD, ScriptedWorker, make_judge

PER_TRIAL = CONTEST_SETTINGS["repeat_iters"]


class FakeTimer:
    """Stands in for flashinfer.testing.bench_gpu_time_with_cupti: calls ``fn`` as FlashInfer
    does (dry runs, then timed ones, on ``input_args``) and returns per-call spans in ms."""

    def __init__(self, spans_ms, warning=None):
        self.spans_ms, self.warning, self.kwargs = list(spans_ms), warning, []

    def __call__(self, fn, input_args=(), **kwargs):
        self.kwargs.append(kwargs)
        for _ in range(kwargs["dry_run_iters"] + kwargs["repeat_iters"]):
            fn(*input_args)
        if self.warning:
            warnings.warn(self.warning, UserWarning)
        spans, self.spans_ms = self.spans_ms[:kwargs["repeat_iters"]], self.spans_ms[kwargs["repeat_iters"]:]
        return spans


@pytest.fixture
def no_gpu_needed(monkeypatch):
    """bench_contest's own GPU calls made harmless on the CPU: the clock warm-up makes one call as
    the real one does (``fn(setup(None))``, no synchronize)."""
    def one_warm_call(fn, setup, flush, seconds):
        fn(setup(None))
        return 1

    monkeypatch.setattr(gpu_state, "warm_gpu_clocks", one_warm_call)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def spans(*trial_values_ms):
    return [v for value in trial_values_ms for v in [value] * PER_TRIAL]


def test_each_contest_trial_gets_an_input_set_of_its_own_and_the_contest_settings(monkeypatch, no_gpu_needed):
    """As flashinfer-bench main's evaluator: one input set a trial (gen_inputs per trial, outputs
    allocated per trial), the same positional arguments every call of the trial; each trial is
    reported after its own calls, before the next trial's set is made."""
    timer = FakeTimer(spans(0.002, 0.003, 0.004))
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (timer, None))
    sets = {index: {"q": object(), "k": object(), "scale": None, "output": object()} for index in (None, 0, 1, 2)}
    events = []  # ("call", set index) per call, ("setup", index), ("after", index)
    by_values = {tuple(v.values()): index for index, v in sets.items()}

    def setup(index=None):
        events.append(("setup", index))
        return sets[index]

    def entry(*values):  # the judge's DPS entry
        events.append(("call", by_values[values]))  # same objects, in order, as FlashInfer passes them

    stats = bench_contest(lambda args: entry(*args.values()), setup, lambda: None, TimingConfig(),
                          lambda index: events.append(("after", index)), entry=entry)
    assert timer.kwargs == [CONTEST_SETTINGS] * CONTEST_TRIALS  # 10 dry runs, 50 timed, cold L2, no graph
    timed = [e for e in events if e[0] != "call" or e[1] is not None]
    timed = timed[timed.index(("setup", 0)):]
    expected = [e for t in range(CONTEST_TRIALS) for e in [("setup", t), *[("call", t)] * (10 + PER_TRIAL), ("after", t)]]
    assert timed == expected
    warm = [e for e in events if e == ("call", None)]
    assert len(warm) == 1 + ESTIMATE_CALLS  # the clock warm-up's and the estimate's calls, on the warm-up set
    seen = []  # a dict-taking fn gets the trial's dict back, in every call
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (FakeTimer(spans(0.002, 0.003, 0.004)), None))
    bench_contest(lambda args: seen.append(args), lambda index=None: sets[index], lambda: None, TimingConfig())
    assert seen[len(warm):] == [sets[t] for t in range(CONTEST_TRIALS) for _ in range(10 + PER_TRIAL)]
    assert stats.iters == CONTEST_TRIALS * PER_TRIAL and stats.extra["trials"] == CONTEST_TRIALS
    assert stats.value_us == pytest.approx(3.0)  # mean of the trials' medians, in µs
    assert stats.extra["stop"] == "iters"


@pytest.mark.parametrize("call_s, dry, repeat", [
    (0.0004, 10, PER_TRIAL),  # pt-compiled's slowest call: 3 x 66 calls fit 0.3 s, the contest's settings
    (0.003, 1, 26),  # the reference loop at B = 1: 0.3 s / (3 x 3 ms) = 33 calls a trial, 6 + 1 of them not timed
    (0.12, 1, 5),  # at B = 64: never fewer than min_iters
])
def test_a_slow_solution_gets_fewer_contest_calls_by_the_budget(call_s, dry, repeat):
    settings = contest.contest_settings(call_s, TimingConfig(budget_s=0.3, min_iters=5))
    assert settings == {**CONTEST_SETTINGS, "dry_run_iters": dry, "repeat_iters": repeat}


def test_the_contest_tier_of_a_slow_solution_is_cut_and_says_so(monkeypatch, no_gpu_needed):
    timer = FakeTimer([0.1] * CONTEST_TRIALS * 5)
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (timer, None))
    monkeypatch.setattr(gpu_state, "warm_then_estimate", lambda fn, setup, flush, config, warmup: 0.12)
    stats = bench_contest(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig(min_iters=5))
    assert timer.kwargs == [{**CONTEST_SETTINGS, "dry_run_iters": 1, "repeat_iters": 5}] * CONTEST_TRIALS
    assert stats.iters == CONTEST_TRIALS * 5 and stats.extra["stop"] == "budget"
    assert "budget" in timing.describe_timer("contest", TimingConfig(), by_core=False)


def test_a_fallback_to_cuda_events_is_never_labelled_contest(monkeypatch, no_gpu_needed):
    timer = FakeTimer(spans(0.002, 0.002, 0.002), warning="CUPTI is not installed. Falling back to CUDA events.")
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (timer, None))
    after = []
    result = bench_contest(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig(), after.append)
    assert isinstance(result, timing.TierUnavailable) and "did not time with CUPTI" in result.reason
    assert after == []  # nothing reported to the judge for a figure that does not count


def test_a_short_answer_from_the_timer_is_unavailable_not_a_figure(monkeypatch, no_gpu_needed):
    timer = FakeTimer(spans(0.002)[:-1])  # the first trial one span short: nothing reported yet
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (timer, None))
    after = []
    result = bench_contest(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig(), after.append)
    assert isinstance(result, timing.TierUnavailable) and "returned" in result.reason and after == []


def test_a_later_trial_that_falls_short_fails_the_tier(monkeypatch, no_gpu_needed):
    """The judge was told of the first trial's call: the tier cannot turn unavailable after it."""
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (FakeTimer(spans(0.002, 0.002)[:-1]), None))
    after = []
    with pytest.raises(RuntimeError, match="after 1 contest trials"):
        bench_contest(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig(), after.append)
    assert after == [0]


def test_without_cupti_flashinfer_is_not_even_asked(monkeypatch):
    from harness.judge import cupti_recorder as cupti

    monkeypatch.setattr(cupti, "cupti_status", lambda: (False, "cupti-python not installed"))
    timer, reason = contest.flashinfer_timer()
    assert timer is None and "cupti-python not installed" in reason and "fall back" in reason


def test_contest_value_is_the_mean_of_the_trial_medians():
    samples = [1.0] * PER_TRIAL + [2.0] * (PER_TRIAL - 1) + [100.0] + [3.0] * PER_TRIAL
    assert contest_value(samples) == pytest.approx(statistics.mean([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="trials"):
        contest_value(samples[:-1])


def test_bench_contest_reports_each_trials_median(monkeypatch, no_gpu_needed):
    monkeypatch.setattr(contest, "flashinfer_timer", lambda: (FakeTimer(spans(0.002, 0.005, 0.003)), None))
    stats = bench_contest(lambda args: None, lambda index=None: {}, lambda: None, TimingConfig())
    assert stats.extra["trial_medians_us"] == pytest.approx([2.0, 5.0, 3.0])
    assert stats.value_us == pytest.approx(statistics.mean([2.0, 5.0, 3.0]))


def contest_judge(inplace=False):
    judge = make_judge(min_iters=5)  # no floor: a scripted tier's samples must fit its µs of wall clock
    judge.variant = SimpleNamespace(state_dtype="float32", meta=SimpleNamespace(inplace_state=inplace))
    judge.pending, judge.verified, judge.unbelievable = [], 0, None
    judge.checked_outputs = lambda worker, workload, message, what: ("outputs", what)
    return judge


def contest_end(value_us=0.001, per_trial=PER_TRIAL):
    return msg.TierEnd(tier="contest", available=True, samples_us=[value_us] * CONTEST_TRIALS * per_trial)


def trial_reports(trials=CONTEST_TRIALS):
    """A worker's messages for ``trials`` contest trials, each reported and its outputs shown."""
    return [m for t in range(trials) for m in (msg.Called(index=t), msg.Checked(outputs=[], call=t))]


def test_the_judge_checks_the_outputs_each_contest_trial_left():
    judge = contest_judge()
    worker = ScriptedWorker(*trial_reports(), contest_end())
    figure = judge.time_tier(worker, WORKLOAD, "contest", 1, deadline=time.monotonic() + 5)
    assert [m for m in worker.sent if isinstance(m, msg.Go)] == [msg.Go(proceed=True)] * CONTEST_TRIALS  # always
    assert figure.available and figure.value_us == pytest.approx(0.001) and figure.trials == CONTEST_TRIALS
    assert figure.stop == "iters"
    assert [what for _, (_, what), _ in judge.pending] == [
        f"contest tier, timed call {t} (verified after it ran)" for t in range(CONTEST_TRIALS)]


def test_the_judge_keeps_each_contest_trials_median_from_its_own_split_of_the_samples():
    """One trial on a slower placement shows as one trial apart, where the figure (their mean) hides which."""
    samples = [4.8] * PER_TRIAL + [5.3] * (PER_TRIAL - 1) + [90.0] + [4.9] * PER_TRIAL
    end = msg.TierEnd(tier="contest", available=True, samples_us=[s / 1e3 for s in samples])
    figure = contest_judge().time_tier(ScriptedWorker(*trial_reports(), end), WORKLOAD, "contest", 1,
                                       deadline=time.monotonic() + 5)
    assert figure.available and figure.trial_medians_us == pytest.approx([0.0048, 0.0053, 0.0049])
    assert figure.value_us == pytest.approx(statistics.mean(figure.trial_medians_us))


def test_a_contest_tier_that_reports_one_trial_of_three_is_rejected():
    figure = contest_judge().time_tier(ScriptedWorker(*trial_reports(1), contest_end()), WORKLOAD, "contest", 1,
                                       deadline=time.monotonic() + 5)
    assert not figure.available and "reported 1 trials" in figure.reason


def test_a_contest_tier_that_reports_no_call_is_rejected():
    """Its calls' last outputs must be shown (an in-place solution's too: its entry copies the
    state into new_state in every call, so they are checkable like any other's)."""
    for inplace in (False, True):
        figure = contest_judge(inplace).time_tier(ScriptedWorker(contest_end()), WORKLOAD, "contest", 1,
                                                  deadline=time.monotonic() + 5)
        assert not figure.available and "reported 0 trials" in figure.reason


@pytest.mark.parametrize("tier", ["contest", "sync"])
@pytest.mark.parametrize("claimed_us, rejected", [(2.9, False), (2.0, True)])
def test_a_library_tiers_figure_under_the_cupti_figure_is_rejected(tier, claimed_us, rejected):
    """The contest and sync figures come from the solution's process: the core's CUPTI figure bounds them."""
    figures = {name: SimpleNamespace(available=True, value_us=us) for name, us in
               (("cupti", 3.0), (tier, claimed_us))}
    if rejected:
        with pytest.raises(Rejected, match=f"{tier} figure"):
            make_judge().check_brackets(figures)
    else:
        make_judge().check_brackets(figures)


def test_asking_for_the_contest_tier_brings_cupti():
    assert parse_tiers("contest", "cuda") == ("cupti", "contest")
    assert parse_tiers("events,contest,cupti", "cuda") == ("events", "contest", "cupti")


@pytest.mark.parametrize("per_trial, wall_s, accepted", [
    (5, 0.31, True),  # a slow solution's cut, the tier as long as its budget
    (5, 0.1, False),  # the same count from a tier that took a third of it: no slow solution
    (4, 0.31, False),  # fewer than min_iters
])
def test_the_judge_takes_a_contest_cut_only_from_a_slow_tier(per_trial, wall_s, accepted):
    from harness.judge import figures

    config = TimingConfig(budget_s=0.3, min_iters=5)
    samples = [5_000.0] * CONTEST_TRIALS * per_trial  # µs: 5 ms spans, 75 ms in all, fit either wall clock
    if accepted:
        figures.check_samples("contest", samples, CONTEST_TRIALS, wall_s, config)
    else:
        with pytest.raises(Rejected, match="contest tier"):
            figures.check_samples("contest", samples, CONTEST_TRIALS, wall_s, config)
    with pytest.raises(Rejected, match="samples"):  # trials of unequal length
        figures.check_samples("contest", samples + [1.0], CONTEST_TRIALS, 10.0, config)


def test_a_contest_tier_cut_in_a_fast_judge_run_is_rejected():
    figure = contest_judge().time_tier(ScriptedWorker(*trial_reports(), contest_end(per_trial=5)),
                                       WORKLOAD, "contest", 1, deadline=time.monotonic() + 5)
    assert not figure.available and "only a tier slower" in figure.reason


def retimed_judge():
    judge = contest_judge()
    judge.ctx.config.tiers = ("cupti", "contest")
    return judge


def test_a_tier_cut_yet_fast_is_timed_once_more_on_fresh_inputs_and_kept_if_it_runs_in_full():
    """A hiccup in an honest solution's estimate calls cuts its tier; the judge orders it again, under a tier index
    of its own (inputs the solution has not seen), and keeps the full run, saying how many calls it gave up."""
    from harness.judge.session import CUT_RETIMES

    worker = ScriptedWorker(msg.TierBegin(tier="contest"), *trial_reports(), contest_end(per_trial=5),
                            msg.TierBegin(tier="contest"), *trial_reports(), contest_end())
    judge = retimed_judge()
    figure = judge.worker_tier(worker, WORKLOAD, "contest", 1, deadline=time.monotonic() + 5)
    assert CUT_RETIMES == 1
    assert [m.index for m in worker.sent if isinstance(m, msg.TimeTier)] == [1, 1 + 2]
    assert figure.available and figure.stop == "iters" and figure.retimed_calls == CONTEST_TRIALS
    assert judge.unbelievable is None
    assert len(judge.pending) == 2 * CONTEST_TRIALS  # the calls of the order given up are verified too


def test_a_tier_cut_yet_fast_twice_is_rejected():
    """A solution that claims to be slow on purpose is cut again on the second order, and rejected as before."""
    worker = ScriptedWorker(msg.TierBegin(tier="contest"), *trial_reports(), contest_end(per_trial=5),
                            msg.TierBegin(tier="contest"), *trial_reports(), contest_end(per_trial=5))
    judge = retimed_judge()
    figure = judge.worker_tier(worker, WORKLOAD, "contest", 1, deadline=time.monotonic() + 5)
    assert not figure.available and "only a tier slower" in figure.reason
    assert isinstance(judge.unbelievable, Rejected) and "only a tier slower" in judge.unbelievable.log
    assert len([m for m in worker.sent if isinstance(m, msg.TimeTier)]) == 2


def test_a_tier_rejected_for_another_reason_is_not_timed_again():
    """Only the cut-yet-fast verdict earns a second order: a figure under the floor or a wrong count does not."""
    worker = ScriptedWorker(msg.TierBegin(tier="contest"), *trial_reports(), contest_end(per_trial=4))
    judge = retimed_judge()
    figure = judge.worker_tier(worker, WORKLOAD, "contest", 1, deadline=time.monotonic() + 5)
    assert not figure.available and "samples" in figure.reason
    assert len([m for m in worker.sent if isinstance(m, msg.TimeTier)]) == 1 and not worker.messages
