"""The tier parity check (tools/tier_parity.py, tools/parity_compare.py) on the CPU: what it reads of
a harness run and how it judges each ratio; the plain-process timers themselves need a GPU (results/judge-check)."""

from support.records import make_floor, make_trace, write_run

import pytest
import torch

from tools.parity_compare import (CONTEST_TRIAL_MEDIANS, FULL_SPEED_FACTOR, HOST, PROBE, TARGETS, TRIAL_MEANS,
                                  TRIAL_PROBES, compare, compare_at_full_speed, compare_contest_trials, compare_host,
                                  judged, machine_speed, paired_counts, paired_p, repeatability, slow_trials,
                                  split_half_ratio, summary, write_report, yardstick, yardstick_points)
from tools.tier_parity import COPY, COPY_METHOD, extend, flashinfer_flush, harness_figures, solution_inputs


def test_the_harness_side_is_each_solutions_figures_and_the_torch_copy_of_the_floor(tmp_path):
    copy = make_floor("w8", {"cupti": 4.0, "events": 6.0}, batch=8)
    other_copy = make_floor("w8", {"cupti": 3.5}, batch=8).model_copy(update={"method": "triton stream copy"})
    traces = [make_trace("cuda-v4", "w8", {"cupti": 4.5, "sync": 20.0}, batch=8),
              make_trace("cuda-v4", "w2", {"cupti": 2.5}, batch=2)]
    run = write_run(tmp_path, "run", [copy, other_copy, *traces])
    assert copy.method == COPY_METHOD
    assert harness_figures(run, {8}) == {(COPY, 8): {"cupti": 4.0, "events": 6.0},
                                         ("cuda-v4", 8): {"cupti": 4.5, "sync": 20.0}}


def test_the_harness_side_carries_the_sync_tiers_host_time_of_a_call_and_the_hosts_speed(tmp_path):
    trace = make_trace("fla-recurrent", "w8", {"cupti": 3.8, "sync": 80.0}, batch=8)
    trace.evaluation.performance.tiers["sync"].host_call_us = 61.5
    trace.evaluation.performance.tiers["sync"].host_probe_us = 6.6
    trace.evaluation.performance.tiers["sync"].trial_means_us = [60.0, 110.0, 70.0]
    trace.evaluation.performance.tiers["sync"].host_probe_trials_us = [6.6, 12.9, 6.5]
    no_host = make_trace("cuda-v4", "w8", {"cupti": 3.6, "sync": 25.0}, batch=8)  # an older trace: none recorded
    copy = make_floor("w8", {"cupti": 4.0, "sync": 20.0}, batch=8)
    copy.tiers["sync"].host_call_us, copy.tiers["sync"].host_probe_us = 9.0, 12.5
    run = write_run(tmp_path, "run", [trace, no_host, copy])
    found = harness_figures(run, {8})
    assert found[("fla-recurrent", 8)] == {"cupti": 3.8, "sync": 80.0, HOST: 61.5, PROBE: 6.6,
                                           TRIAL_MEANS: [60.0, 110.0, 70.0], TRIAL_PROBES: [6.6, 12.9, 6.5]}
    # a run's figures as one repeat each, a list of trials as its trials: two runs extend alike
    from tools.tier_parity import as_repeats

    twice = extend(extend({}, {("fla-recurrent", 8): as_repeats(found[("fla-recurrent", 8)])}),
                   {("fla-recurrent", 8): as_repeats(found[("fla-recurrent", 8)])})[("fla-recurrent", 8)]
    assert twice["sync"] == [80.0, 80.0] and twice[TRIAL_MEANS] == [60.0, 110.0, 70.0] * 2
    assert found[("cuda-v4", 8)] == {"cupti": 3.6, "sync": 25.0}
    assert found[(COPY, 8)] == {"cupti": 4.0, "sync": 20.0, PROBE: 12.5}  # the floor's host time is not set beside


def test_the_harness_side_carries_each_contest_trials_median(tmp_path):
    trace = make_trace("cuda-v1", "w8", {"cupti": 4.8, "contest": 5.0}, batch=8)
    trace.evaluation.performance.tiers["contest"].trial_medians_us = [4.85, 5.30, 4.86]
    older = make_trace("cuda-v4", "w8", {"cupti": 4.4, "contest": 4.5}, batch=8)  # recorded before: none
    copy = make_floor("w8", {"cupti": 4.0, "contest": 4.1}, batch=8)
    copy.tiers["contest"].trial_medians_us = [4.1, 4.1, 4.1]
    found = harness_figures(write_run(tmp_path, "run", [trace, older, copy]), {8})
    assert found[("cuda-v1", 8)][CONTEST_TRIAL_MEDIANS] == [4.85, 5.30, 4.86]
    assert CONTEST_TRIAL_MEDIANS not in found[("cuda-v4", 8)]
    assert found[(COPY, 8)][CONTEST_TRIAL_MEDIANS] == [4.1, 4.1, 4.1]


def test_a_contest_miss_is_set_beside_each_sides_trials(tmp_path):
    """One harness trial on a slow placement: the figure misses, the trials' ranges meet. Every harness trial
    apart: they do not."""
    plain_trials = [4.83, 4.85, 4.86]
    harness = {("cuda-v1", 8): {"contest": [5.01], CONTEST_TRIAL_MEDIANS: [4.85, 5.30, 4.87]},
               ("cuda-v4", 8): {"contest": [5.20], CONTEST_TRIAL_MEDIANS: [5.19, 5.20, 5.21]},
               (COPY, 8): {"contest": [4.1]}}  # no trials kept: no row
    plain = {("cuda-v1", 8): {"contest": [4.85], CONTEST_TRIAL_MEDIANS: plain_trials},
             ("cuda-v4", 8): {"contest": [4.85], CONTEST_TRIAL_MEDIANS: plain_trials},
             (COPY, 8): {"contest": [4.1], CONTEST_TRIAL_MEDIANS: [4.1, 4.1, 4.1]}}
    rows = compare_contest_trials(harness, plain)
    assert [(r["subject"], r["ranges_meet"]) for r in rows] == [("cuda-v1", True), ("cuda-v4", False)]
    assert rows[0]["harness_max_us"] == 5.30 and rows[0]["plain_min_us"] == 4.83
    assert [r["tier"] for r in compare(harness, plain)] == ["contest"] * 3  # the trials are no tier of their own
    report = judged({"hardware": "a GPU", "date": "today", "git_commit": "abc", "command": "c", "plain_repeats": 1},
                    harness, plain)
    write_report(tmp_path, report)
    text = (tmp_path / "tier_parity.md").read_text()
    assert "| cuda-v1 | 8 | 4.850 5.300 4.870 | 4.830 4.850 4.860 | 1.033 | yes |" in text
    assert "| cuda-v4 | 8 | 5.190 5.200 5.210 | 4.830 4.850 4.860 | 1.072 | **no** |" in text


@pytest.mark.parametrize("batch, harness_trials, counted", [
    (8, [4.85, 5.30, 4.87], True),    # B <= 64, the trials meet: a placement of the sets, counted
    (64, [4.85, 5.30, 4.87], True),   # the H200's B = 64 moves with placement too (results/proof/20261128-H200-contest-pads)
    (8, [5.19, 5.20, 5.21], False),   # every harness trial apart: not counted
    (512, [4.85, 5.30, 4.87], False),  # above B = 64 every point keeps ±2%
])
def test_the_proposed_yardstick_counts_a_contest_miss_whose_trials_meet_up_to_the_placement_bound(tmp_path, batch, harness_trials,
                                                                                    counted):
    plain_trials = [4.83, 4.85, 4.86]
    harness = {("cuda-v1", batch): {"contest": [5.01, 5.01], CONTEST_TRIAL_MEDIANS: harness_trials},
               ("cuda-v4", batch): {"contest": [4.40, 4.41]}}
    plain = {("cuda-v1", batch): {"contest": [4.85, 4.85], CONTEST_TRIAL_MEDIANS: plain_trials},
             ("cuda-v4", batch): {"contest": [4.40, 4.40]}}
    report = judged({"hardware": "a GPU", "date": "today", "git_commit": "abc", "command": "c", "plain_repeats": 2},
                    harness, plain)
    assert yardstick_points("contest", report["rows"], report["contest_trial_rows"]) == 1 + counted
    assert yardstick_points("cupti", report["rows"], report["contest_trial_rows"]) == 0  # no cupti rows here
    write_report(tmp_path, report)
    line = next(l for l in (tmp_path / "tier_parity.md").read_text().splitlines() if l.startswith("| contest | ±2% |"))
    assert line.startswith("| contest | ±2% | 1 of 2 |")  # the target: the miss stays a miss
    assert line.endswith("| met |" if counted else "| missed |")


def test_the_host_times_are_compared_beside_the_tiers_with_no_target(tmp_path):
    harness = {("fla-recurrent", 8): {"sync": [80.0], HOST: [60.0, 64.0, 62.0], PROBE: [13.0, 13.0, 12.0]},
               ("cuda-v4", 8): {"sync": [25.0]}, (COPY, 8): {"sync": [20.0], PROBE: [7.0]}}
    plain = {("fla-recurrent", 8): {"sync": [45.0], HOST: [40.0], PROBE: [6.5]},
             ("cuda-v4", 8): {"sync": [24.0], HOST: [15.0], PROBE: [6.5]}, (COPY, 8): {"sync": [20.0], PROBE: [7.0]}}
    assert {r["tier"] for r in compare(harness, plain)} == {"sync"}  # the host figures are no tier
    rows = compare_host(harness, plain)
    assert rows == [  # cuda-v4: the harness has neither
        {"subject": COPY, "batch_size": 8, "harness_host_us": None, "plain_host_us": None, "host_ratio": None,
         "harness_probe_us": 7.0, "plain_probe_us": 7.0, "probe_ratio": 1.0, "harness_repeats": 0, "plain_repeats": 0},
        {"subject": "fla-recurrent", "batch_size": 8, "harness_host_us": 62.0, "plain_host_us": 40.0,
         "host_ratio": 1.55, "harness_probe_us": 13.0, "plain_probe_us": 6.5, "probe_ratio": 2.0,
         "harness_repeats": 3, "plain_repeats": 1}]
    report = {"hardware": "a GPU", "date": "today", "git_commit": "abc", "command": "c", "plain_repeats": 1,
              "rows": compare(harness, plain), "host_rows": rows}
    write_report(tmp_path, report)
    text = (tmp_path / "tier_parity.md").read_text()
    assert "| fla-recurrent | 8 | 62.0 | 40.0 | 1.550 | 13.00 | 6.50 | 2.000 | 1.778 |" in text
    assert f"| {COPY} | 8 | – | – | – | 7.00 | 7.00 | 1.000 | 1.000 |" in text


def test_the_plain_sync_timer_times_one_untimed_call_after_each_trial_on_its_arguments(monkeypatch):
    import sys
    import types

    import tools.tier_parity as parity

    order = []
    timing = types.ModuleType("flashinfer_bench.bench.timing")
    timing.time_runnable = lambda fn, args, *rest: order.append(("loop", tuple(args))) or 0.015
    testing = types.ModuleType("flashinfer.testing")  # imported, not called: only the sync timer is asked
    testing.bench_gpu_time = testing.bench_gpu_time_with_cuda_event = testing.bench_gpu_time_with_cupti = None
    monkeypatch.setitem(sys.modules, "flashinfer.testing", testing)
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", timing)
    monkeypatch.setattr(parity, "subject_call", lambda subject, batch, workdir: (lambda x: x, ("set 0",)))
    made = iter(["trial 1", "trial 2"])
    monkeypatch.setattr(parity, "placement_copies", lambda args, count: [args, *((next(made),) for _ in range((count or 3) - 1))])
    host = iter([30e-6, 10e-6, 20e-6])
    monkeypatch.setattr(parity, "host_call_s", lambda fn, args: order.append(("host", args)) or next(host))
    speed = iter([6e-6, 8e-6, 7e-6, 7e-6, 12e-6, 14e-6])  # two readings a trial: 7, 7 and 13 µs
    from harness.judge.timing import host_speed

    monkeypatch.setattr(host_speed, "host_probe_s", lambda: order.append(("probe",)) or next(speed))

    found = parity.plain_figures("cuda-v4", 8, 0.0, None, ("sync",), sets=1)
    trials = {TRIAL_MEANS: [15.0] * 3, TRIAL_PROBES: pytest.approx([7.0, 7.0, 13.0])}  # each trial apart
    assert found == {"sync": 15.0, HOST: 20.0, PROBE: 7.0, **trials}  # µs: the medians over the three trials
    assert order == [entry for args in (("set 0",), ("trial 1",), ("trial 2",))
                     for entry in (("probe",), ("loop", args), ("probe",), ("host", args))]


def test_each_ratio_is_judged_against_its_tiers_target():
    harness = {("cuda-v4", 1): {"cupti": [2.03], "events": [5.0], "sync": [30.0]}}
    plain = {("cuda-v4", 1): {"cupti": [2.0], "events": [4.0], "sync": [27.0], "contest": [2.0]}}
    rows = {r["tier"]: r for r in compare(harness, plain)}
    assert set(rows) == {"cupti", "events", "sync"}  # the contest tier only where both sides have it
    assert rows["cupti"]["within"] and abs(rows["cupti"]["ratio"] - 1.015) < 1e-9
    assert not rows["events"]["within"] and rows["events"]["target"] == TARGETS["events"]  # 1.25 > 1.10
    assert rows["sync"]["within"]  # 1.11 within 15%


def test_the_plain_figure_is_the_median_of_its_repeats_and_their_range_widened_by_the_target_is_reported():
    harness = {("fla-recurrent", 8): {"sync": [60.0], "events": [7.5]}}
    plain = {("fla-recurrent", 8): {"sync": [40.0, 90.0, 45.0], "events": [7.0]}}
    rows = {r["tier"]: r for r in compare(harness, plain)}
    sync = rows["sync"]
    assert sync["plain_us"] == 45.0 and sync["plain_repeats"] == 3
    assert (sync["plain_min_us"], sync["plain_max_us"]) == (40.0, 90.0)
    assert not sync["within"]  # 60 / 45 = 1.33, outside 15%
    assert sync["within_spread"]  # but inside 40-90 widened by 15%
    events = rows["events"]  # one repeat: its range is the figure itself
    assert events["within"] and events["within_spread"]  # 7.5 / 7.0 = 1.07


def test_a_harness_figure_outside_the_widened_range_is_not_within_the_spread():
    rows = compare({("copy", 1): {"events": [4.0]}}, {("copy", 1): {"events": [5.5, 5.6, 5.4]}})
    assert not rows[0]["within"] and not rows[0]["within_spread"]  # 4.0 < 5.4 x 0.9


def test_plain_repeats_run_in_rounds_over_every_point(monkeypatch):
    import tools.tier_parity as parity

    calls = []

    def fake(fn, subject, batch, warm_s, flush_mb, tiers, sets):
        assert flush_mb == 256 and sets is None  # as many sets as the timing core takes
        calls.append((subject, batch))
        return {"sync": float(len(calls))}

    monkeypatch.setattr(parity, "in_fresh_process", fake)
    found = parity.plain_repeats(["copy", "cuda-v4"], [1, 8], 2, 0.0, flush_mb=256)
    points = [("copy", 1), ("copy", 8), ("cuda-v4", 1), ("cuda-v4", 8)]
    assert calls == points + points  # round 1 over all points, then round 2
    assert found[("copy", 8)]["sync"] == [2.0, 6.0]


def test_the_plain_flush_is_flashinfers_own_unless_a_size_is_given():
    assert flashinfer_flush(None) == {}  # cold_l2_cache=True: 2 x L2
    assert flashinfer_flush(256) == {"l2_flush": True, "l2_flush_size_mb": 256}  # its older parameters win


def test_the_harness_figure_is_the_median_of_its_runs_and_its_range_must_meet_the_widened_plain_range():
    harness = {("cuda-v4", 8): {"sync": [27.8, 18.8, 15.6]}}  # three H100 runs of 2026-11-26
    plain = {("cuda-v4", 8): {"sync": [15.0, 15.4]}}
    row = compare(harness, plain)[0]
    assert row["harness_us"] == 18.8 and row["harness_repeats"] == 3
    assert (row["harness_min_us"], row["harness_max_us"]) == (15.6, 27.8)
    assert not row["within"]  # 18.8 / 15.2 = 1.24
    assert row["within_spread"]  # 15.6 lies inside 15.0-15.4 widened by 15%
    far = compare({("cuda-v4", 8): {"sync": [25.0, 27.8]}}, plain)[0]
    assert not far["within_spread"]  # 25.0 > 15.4 x 1.15


def test_runs_extend_per_point_and_tier():
    found = extend({}, {("copy", 1): {"cupti": [2.0]}})
    extend(found, {("copy", 1): {"cupti": [2.1], "events": [5.0]}, ("copy", 8): {"cupti": [4.4]}})
    assert found == {("copy", 1): {"cupti": [2.0, 2.1], "events": [5.0]}, ("copy", 8): {"cupti": [4.4]}}


def test_plain_figures_times_only_the_tiers_asked_and_a_flush_size_reaches_the_events_timer(monkeypatch):
    import sys
    import types

    import tools.tier_parity as parity

    called = []
    testing = types.ModuleType("flashinfer.testing")
    testing.bench_gpu_time = lambda fn, **kw: called.append(("bench_gpu_time", kw)) or [0.005]
    testing.bench_gpu_time_with_cuda_event = lambda fn, **kw: called.append(("with_cuda_event", kw)) or [0.004]
    testing.bench_gpu_time_with_cupti = lambda fn, **kw: called.append(("with_cupti", kw)) or [0.002]
    timing = types.ModuleType("flashinfer_bench.bench.timing")
    timing.time_runnable = lambda *a: called.append(("time_runnable", {})) or 0.015
    monkeypatch.setitem(sys.modules, "flashinfer.testing", testing)
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", timing)
    monkeypatch.setattr(parity, "subject_call", lambda subject, batch, workdir: (lambda *a: None, ()))
    monkeypatch.setattr(parity, "host_call_s", lambda fn, args: 20e-6)  # no GPU to synchronize here

    found = parity.plain_figures("copy", 1, 0.0, 256, ("cupti", "events"))
    assert found == {"cupti": 2.0, "events": 4.0}
    assert [name for name, _ in called] == ["with_cupti", "with_cuda_event"]  # bench_gpu_time would drop the size
    assert all(kw["l2_flush_size_mb"] == 256 for _, kw in called)

    called.clear()
    assert parity.plain_figures("copy", 1)["sync"] == 15.0  # all four by default, FlashInfer's own flush
    assert [name for name, _ in called] == ["with_cupti"] * 4 + ["bench_gpu_time"] + ["time_runnable"] * 3


def test_rotating_takes_the_argument_sets_in_turn():
    from tools.tier_parity import rotating

    seen = []
    call = rotating(lambda *args: seen.append(args), [("a", 1), ("b", 2), ("c", 3)])
    for _ in range(4):
        call()
    assert seen == [("a", 1), ("b", 2), ("c", 3), ("a", 1)]


def test_with_several_sets_cupti_and_events_take_them_in_turn_and_contest_and_sync_one_a_trial(monkeypatch):
    import sys
    import types

    import tools.tier_parity as parity

    given = []  # what each timer was handed: the call's args, and what one call of fn saw

    def record(name):
        def timer(fn, input_args=(), **kw):
            given.append((name, input_args, fn(*input_args)))
            return [0.002]
        return timer
    testing = types.ModuleType("flashinfer.testing")
    testing.bench_gpu_time, testing.bench_gpu_time_with_cupti = record("events"), record("cupti")
    testing.bench_gpu_time_with_cuda_event = record("events with a flush size")  # not reached: FlashInfer's own flush
    timing = types.ModuleType("flashinfer_bench.bench.timing")
    timing.time_runnable = lambda fn, args, *rest: given.append(("sync", tuple(args), fn(*args))) or 0.015
    monkeypatch.setitem(sys.modules, "flashinfer.testing", testing)
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", timing)
    monkeypatch.setattr(parity, "subject_call", lambda subject, batch, workdir: (lambda x: x, ("set 0",)))
    monkeypatch.setattr(parity, "host_call_s", lambda fn, args: 20e-6)  # no GPU to synchronize here
    made = iter(["set 1", "set 2", "trial 1", "trial 2", "sync 1", "sync 2"])
    monkeypatch.setattr(parity, "placement_copies",
                        lambda args, count: [args, *((next(made),) for _ in range((count or 3) - 1))])

    parity.plain_figures("copy", 1, 0.0, None, ("cupti", "contest", "events", "sync"), sets=3)
    # the contest timer (FlashInfer's CUPTI timer, three trials) is handed one set a trial itself,
    # the first the original, as flashinfer-bench main's evaluator makes one a trial
    # and so is flashinfer-bench 0.1.2's loop, which clones the arguments it is handed before every
    # call as the harness's sync tier's loop does (a rotating callable of no arguments clones nothing)
    handed = [entry for entry in given if entry[1]]
    assert handed == [("cupti", (s,), s) for s in ("set 0", "trial 1", "trial 2")] + \
        [("sync", (s,), s) for s in ("set 0", "sync 1", "sync 2")]
    rotated = [entry for entry in given if not entry[1]]
    assert [name for name, _, _ in rotated] == ["cupti", "events"]
    assert [seen for _, _, seen in rotated] == ["set 0", "set 1"]


def test_the_plain_contest_timer_keeps_each_trials_median(monkeypatch):
    import sys
    import types

    import tools.tier_parity as parity

    medians = iter([0.0048, 0.0053, 0.0049])  # ms: each trial's spans all alike
    testing = types.ModuleType("flashinfer.testing")
    testing.bench_gpu_time = testing.bench_gpu_time_with_cuda_event = None  # not asked
    testing.bench_gpu_time_with_cupti = lambda fn, input_args=(), **kw: [next(medians)] * 3
    monkeypatch.setitem(sys.modules, "flashinfer.testing", testing)
    timing = types.ModuleType("flashinfer_bench.bench.timing")
    timing.time_runnable = None  # imported, not asked
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", timing)
    monkeypatch.setattr(parity, "subject_call", lambda subject, batch, workdir: (lambda x: x, ("set 0",)))
    monkeypatch.setattr(parity, "placement_copies", lambda args, count: [args] * (count or 3))
    found = parity.plain_figures("cuda-v1", 8, 0.0, None, ("contest",), sets=1)
    assert found[CONTEST_TRIAL_MEDIANS] == pytest.approx([4.8, 5.3, 4.9])
    assert found["contest"] == pytest.approx(5.0)


def test_the_plain_side_takes_as_many_sets_as_the_timing_core():
    import torch

    from harness.judge.core import buffer_sets_for  # what plain_figures counts its sets by

    big = bytes_stand_in(256 << 20)  # sizes only: a B = 512 fp32 state and its destination are 256 MiB each
    assert buffer_sets_for((big, big)) == 4 and buffer_sets_for((bytes_stand_in(4 << 20),) * 2) == 8  # B = 8: eight sets
    assert buffer_sets_for((bytes_stand_in(3 << 30),)) == 1 and buffer_sets_for((torch.empty(0), 1.0)) == 1  # no bytes: one


def bytes_stand_in(nbytes: int):
    """A tensor of ``nbytes`` bytes off the CPU that holds no memory (the meta device: sizes only)."""
    import torch

    return torch.empty(nbytes // 4, dtype=torch.float32, device="meta")


def test_a_check_stopped_part_way_writes_every_figure_it_measured_and_exits_130(monkeypatch, tmp_path):
    """gpu_judge_check.sh stops the check at PARITY_LIMIT_S with SIGINT: the harness run and the plain
    points measured before it are written, the table compares the points both sides reached."""
    import json

    import torch

    import tools.tier_parity as parity

    measured = []

    def fake_plain(fn, subject, batch, warm_s, flush_mb, tiers, sets):
        if len(measured) == 2:
            raise KeyboardInterrupt  # the third plain point: the limit
        measured.append((subject, batch))
        return {"cupti": 2.0}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("harness.records.environment.hardware_name", lambda device: "a GPU")
    monkeypatch.setattr(parity, "harness_run", lambda solutions, batches, scratch: {
        (subject, b): {"cupti": [2.1]} for subject in ("copy", *solutions) for b in batches})
    monkeypatch.setattr(parity, "in_fresh_process", fake_plain)
    assert parity.main(["--out", str(tmp_path), "--solutions", "cuda-v4", "--batches", "1,8", "--repeats", "1"]) == 130
    report = json.loads((tmp_path / "tier_parity.json").read_text())
    assert "stopped by SIGINT after 4 harness points and 2 plain points of 4" == report["stopped"]
    assert set(report["figures"]["harness"]) == {"copy B=1", "copy B=8", "cuda-v4 B=1", "cuda-v4 B=8"}
    assert report["figures"]["plain"] == {"copy B=1": {"cupti": [2.0]}, "copy B=8": {"cupti": [2.0]}}
    assert [(r["subject"], r["batch_size"]) for r in report["rows"]] == [("copy", 1), ("copy", 8)]
    assert "**Incomplete:**" in (tmp_path / "tier_parity.md").read_text()


def slow_sides(monkeypatch, parity) -> None:
    """Both sides faked on a pretended GPU, each taking long enough (0.6 s) for a logger beside it to write
    within it: one harness point and one plain point, the copy at B = 1."""
    import time

    import torch

    def slowly(result):
        time.sleep(0.6)
        return result

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("harness.records.environment.hardware_name", lambda device: "a GPU")
    monkeypatch.setattr(parity, "harness_run", lambda solutions, batches, scratch: slowly({("copy", 1): {"cupti": [2.0]}}))
    monkeypatch.setattr(parity, "in_fresh_process", lambda fn, subject, batch, *rest: slowly({"cupti": 2.0}))


def test_with_speed_log_a_pinned_stand_in_runs_beside_both_sides_and_the_report_counts_its_slow_blocks(
        monkeypatch, tmp_path):
    import json

    import tools.tier_parity as parity

    slow_sides(monkeypatch, parity)
    out = tmp_path / "out"
    assert parity.main(["--out", str(out), "--solutions", "", "--batches", "1", "--repeats", "1", "--speed-log"]) == 0
    report = json.loads((out / "tier_parity.json").read_text())
    assert [p["side"] for p in report["phases"]] == ["harness", "plain"]
    assert all(p["end"] > p["start"] for p in report["phases"])
    assert set(report["machine_speed"]) == {"harness", "plain"} and report["speed_log_cpu"] == parity.speed_log_cpu()
    assert all(count["blocks"] > 0 for count in report["machine_speed"].values())
    assert (out / parity.SPEED_LOG).read_text().strip() and "The machine beside the run" in (out / "tier_parity.md").read_text()


def test_machine_speed_counts_the_pinned_blocks_within_each_sides_phases():
    blocks = [(10.0, 6.0), (10.5, 12.0), (11.0, 6.2), (20.0, 13.0), (30.0, 13.0)]  # (epoch s, µs)
    phases = [{"side": "harness", "start": 10.0, "end": 11.0}, {"side": "plain", "start": 11.0, "end": 25.0}]
    assert machine_speed(blocks, phases) == {"harness": {"slow": 1, "blocks": 2}, "plain": {"slow": 1, "blocks": 2}}
    assert machine_speed([], phases) is None and machine_speed(blocks, []) is None


def test_a_bf16_state_call_gets_the_workloads_state_rounded_to_bf16_and_bf16_destinations(monkeypatch):
    from harness.data.dataset import open_dataset
    from harness.data.workloads import materialize_inputs

    import tools.tier_parity as parity

    def small_workload(batch, device="cuda"):  # contest-v1's first B = 1 workload: the sweep's checks take ~13 s
        dataset = open_dataset("contest-v1", show_progress=False)
        workload = dataset.workloads[0]
        return dataset.definition, workload, materialize_inputs(workload, dataset.definition, dataset.files, device, 0)

    monkeypatch.setattr(parity, "sweep_workload", small_workload)
    _, fp32 = solution_inputs(1, device="cpu")
    _, bf16 = solution_inputs(1, "bfloat16", device="cpu")
    assert fp32["state"].dtype == fp32["new_state"].dtype == torch.float32
    assert bf16["state"].dtype == bf16["new_state"].dtype == torch.bfloat16
    assert torch.equal(bf16["state"], fp32["state"].to(torch.bfloat16))
    assert bf16["new_state"].isnan().all() and bf16["output"].dtype == fp32["output"].dtype


def test_the_sync_tier_at_full_speed_compares_only_the_repeats_of_a_fast_host():
    harness = {("fla-recurrent", 1): {"sync": [42.0, 80.0], PROBE: [6.0, 12.5]},  # one fast repeat, one slow
               ("fla-recurrent", 8): {"sync": [90.0, 85.0], PROBE: [12.0, 13.0]},  # none fast
               ("copy", 1): {"sync": [16.0], PROBE: []},                         # unpaired: an older run
               ("cuda-v4", 1): {"cupti": [2.0]}}                                 # no sync: no row
    plain = {("fla-recurrent", 1): {"sync": [44.0, 46.0, 79.0], PROBE: [6.2, 7.7, 12.0]},
             ("fla-recurrent", 8): {"sync": [46.0], PROBE: [6.5]},
             ("copy", 1): {"sync": [17.0], PROBE: [6.4]}, ("cuda-v4", 1): {"cupti": [2.0]}}
    rows = {(r["subject"], r["batch_size"]): r for r in compare_at_full_speed(harness, plain)}
    assert set(rows) == {("fla-recurrent", 1), ("fla-recurrent", 8), ("copy", 1)}
    fast = rows[("fla-recurrent", 1)]
    assert fast["limit_us"] == pytest.approx(6.0 * FULL_SPEED_FACTOR)  # 7.8: the 7.7 reading counts, 12.0 does not
    assert (fast["harness_us"], fast["plain_us"], fast["harness_count"], fast["plain_count"]) == (42.0, 45.0, 1, 2)
    assert fast["ratio"] == pytest.approx(42.0 / 45.0) and fast["within"] is True and fast["unit"] == "repeats"
    for unjudged in (rows[("fla-recurrent", 8)], rows[("copy", 1)]):  # a side with no repeat at full speed
        assert unjudged["ratio"] is None and unjudged["within"] is None and unjudged["harness_count"] == 0


def test_where_both_sides_recorded_each_trial_the_full_speed_comparison_takes_trials():
    # one repeat a side, three trials each: the harness's middle trial and the plain side's last ran slow
    harness = {("fla-recurrent", 1): {"sync": [55.0], PROBE: [6.6], TRIAL_MEANS: [43.0, 80.0, 42.0],
                                      TRIAL_PROBES: [6.5, 12.8, 6.6]}}
    plain = {("fla-recurrent", 1): {"sync": [57.0], PROBE: [6.5], TRIAL_MEANS: [44.0, 46.0, 81.0],
                                    TRIAL_PROBES: [6.4, 6.6, 12.4]}}
    [row] = compare_at_full_speed(harness, plain)
    assert row["unit"] == "trials" and (row["harness_count"], row["plain_count"]) == (2, 2)
    assert (row["harness_us"], row["plain_us"]) == (42.5, 45.0) and row["within"] is True
    plain[("fla-recurrent", 1)].pop(TRIAL_PROBES)  # one side without its trials' readings: repeats again
    assert compare_at_full_speed(harness, plain)[0]["unit"] == "repeats"
    assert compare_at_full_speed({("copy", 1): {"sync": [16.0]}}, {("copy", 1): {"sync": [17.0]}}) == []  # no readings


def test_slow_trials_counts_each_sides_slow_readings_over_the_points_both_measured(tmp_path):
    harness = {("copy", 1): {"sync": [20.0], TRIAL_MEANS: [16.0, 30.0, 31.0], TRIAL_PROBES: [6.0, 12.0, 7.9]},
               ("cuda-v4[bfloat16-state]", 1): {"sync": [20.0], TRIAL_MEANS: [1.0] * 3, TRIAL_PROBES: [13.0] * 3}}
    plain = {("copy", 1): {"sync": [17.0], TRIAL_MEANS: [16.0, 17.0, 16.5], TRIAL_PROBES: [6.1, 7.8, 6.2]}}
    counts = slow_trials(harness, plain)  # the limit is 1.3 x 6.0 = 7.8: 7.8 is full speed, 7.9 is not
    assert counts == {"harness": {"slow": 2, "trials": 3}, "plain": {"slow": 0, "trials": 3}}  # no bf16 variant
    report = judged({"hardware": "a GPU", "date": "now", "git_commit": "abc", "command": "c", "plain_repeats": 1},
                    harness, plain)
    assert report["slow_trials"] == counts
    assert summary(report).endswith("slow trials: harness 2 of 3, plain 0 of 3")
    write_report(tmp_path, report)
    assert "Sync trials read slow" in (tmp_path / "tier_parity.md").read_text()
    plain[("copy", 1)].pop(TRIAL_PROBES)  # a side without per-trial readings (an older run): nothing to count
    assert slow_trials(harness, plain) is None
    assert "slow trials" not in summary(judged({}, harness, plain))


def test_a_full_speed_miss_is_a_miss():
    [row] = compare_at_full_speed({("copy", 8): {"sync": [24.0], PROBE: [6.5]}}, {("copy", 8): {"sync": [16.0], PROBE: [6.6]}})
    assert row["ratio"] == pytest.approx(1.5) and row["within"] is False


def test_a_recorded_cross_check_is_judged_again_from_its_figures_alone(tmp_path):
    import json

    from tools.tier_parity import main

    figures = {"harness": {"fla-recurrent B=1": {"cupti": [2.1], "sync": [42.0, 80.0], HOST: [30.0, 60.0],
                                                 PROBE: [6.0, 12.5]}},
               "plain": {"fla-recurrent B=1": {"cupti": [2.1], "sync": [44.0, 79.0], HOST: [31.0, 58.0],
                                               PROBE: [6.2, 12.0]}}}
    stored = tmp_path / "old" / "tier_parity.json"
    stored.parent.mkdir()
    stored.write_text(json.dumps({"hardware": "a GPU", "date": "then", "git_commit": "abc", "command": "c",
                                  "plain_repeats": 2, "figures": figures, "rows": []}))
    assert main(["--rejudge", str(stored), "--out", str(tmp_path / "new")]) == 0
    report = json.loads((tmp_path / "new" / "tier_parity.json").read_text())
    assert report["rejudged_from"] == str(stored) and report["figures"] == figures and report["rejudged_by_commit"]
    assert {r["tier"]: r["within"] for r in report["rows"]} == {"cupti": True, "sync": True}
    assert report["full_speed_rows"][0]["ratio"] == pytest.approx(42.0 / 44.0)
    assert "The sync tier at the host's full speed" in (tmp_path / "new" / "tier_parity.md").read_text()
    assert json.loads(stored.read_text())["rows"] == []  # the recorded file is left as it was


def test_a_file_that_is_no_cross_check_is_a_clear_error(tmp_path, capsys):
    from tools.tier_parity import main

    for name, text in (("broken.json", "{not json"), ("other.json", '{"rows": []}')):
        (tmp_path / name).write_text(text)
        assert main(["--rejudge", str(tmp_path / name), "--out", str(tmp_path / "out")]) == 2
        assert str(tmp_path / name) in capsys.readouterr().err
    assert main(["--rejudge", str(tmp_path / "missing.json"), "--out", str(tmp_path / "out")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_each_side_is_judged_against_itself_by_its_repeats_split_in_halves(tmp_path):
    assert split_half_ratio([40.0]) is None  # one repeat: nothing to compare
    assert split_half_ratio([40.0, 80.0]) == pytest.approx(0.5)  # first over second, in the order measured
    assert split_half_ratio([40.0, 80.0, 44.0]) == pytest.approx(42.0 / 80.0)  # odd repeats over even ones
    harness = {("copy", 1): {"sync": [20.0, 21.0], "cupti": [2.0, 2.1]},
               ("cuda-v4", 1): {"sync": [20.0, 30.0], "cupti": [2.0]},
               ("cuda-v4[bfloat16-state]", 1): {"sync": [20.0, 40.0]}}  # the plain side does not time it
    plain = {("copy", 1): {"sync": [17.0, 34.0], "cupti": [2.0, 2.0]}, ("cuda-v4", 1): {"sync": [20.0, 22.0]}}
    counts = repeatability(harness, plain)
    assert counts["sync"] == {"harness": {"within": 1, "points": 2}, "plain": {"within": 1, "points": 2}}
    assert counts["cupti"] == {"harness": {"within": 0, "points": 1}, "plain": {"within": 1, "points": 1}}
    assert "events" not in counts  # no side has two repeats of it
    report = judged({"hardware": "a GPU", "date": "now", "git_commit": "abc", "command": "c", "plain_repeats": 2},
                    harness, plain)
    assert report["repeatability"] == counts
    assert "the plain sync timer against itself: 1 of 2" in summary(report)
    # the paired test: copy neither (20.5 / 34 and 17 / 34), cuda-v4 both (25 / 22 and 20 / 22): no discordant point
    assert report["paired"]["sync"] == {"harness_only": 0, "plain_only": 0, "both": 1, "neither": 1}
    write_report(tmp_path, report)
    assert ("| sync | ±15% | 0 of 2 | 1 of 2 | 1 of 2 | harness only 0, plain only 0 (p = 1.00) | met |"
            in (tmp_path / "tier_parity.md").read_text())


def test_the_paired_test_sorts_each_point_by_which_ratio_over_the_plain_even_repeats_is_within():
    harness = {("a", 1): {"sync": [20.0]}, ("b", 1): {"sync": [30.0]}, ("c", 1): {"sync": [20.0, 22.0]},
               ("d", 1): {"sync": [40.0]}, ("e", 1): {"sync": [20.0], "events": [5.0]}}
    plain = {("a", 1): {"sync": [20.0, 21.0]},        # 20 / 21 and 20 / 21: both within
             ("b", 1): {"sync": [20.0, 21.0]},        # 30 / 21 out, 20 / 21 in: the plain side's
             ("c", 1): {"sync": [30.0, 21.0]},        # 21 / 21 in (the harness's median), 30 / 21 out: the harness's
             ("d", 1): {"sync": [30.0, 20.0, 31.0]},  # 40 / 20 and 30.5 / 20: neither
             ("e", 1): {"sync": [20.0], "events": [5.0]}}  # one plain repeat: not a paired point
    assert paired_counts(harness, plain) == {"sync": {"harness_only": 1, "plain_only": 1, "both": 1, "neither": 1}}


def test_the_paired_test_is_the_one_sided_sign_test_on_the_discordant_points():
    count = dict.fromkeys(("harness_only", "plain_only", "both", "neither"), 0)
    assert paired_p({**count, "both": 20}) == 1.0  # nothing discordant: no evidence either way
    assert paired_p({**count, "plain_only": 5}) == pytest.approx(1 / 32)  # five of five to the plain side
    assert paired_p({**count, "harness_only": 5}) == 1.0
    assert paired_p({**count, "harness_only": 14, "plain_only": 23}) == pytest.approx(0.094, abs=0.001)


def test_the_proposed_yardstick_holds_events_and_sync_to_the_paired_test_and_the_others_to_every_point():
    count = dict.fromkeys(("harness_only", "plain_only", "both", "neither"), 0)
    assert yardstick("sync", 14, 20, {**count, "both": 12, "harness_only": 2, "plain_only": 4}) == "met"
    assert yardstick("events", 12, 20, {**count, "both": 12, "plain_only": 5}) == "missed"  # p = 1/32
    assert yardstick("sync", 14, 20, None) == "–"  # one plain repeat: no yardstick
    assert yardstick("cupti", 19, 20, {**count, "both": 19}) == "missed"  # cupti keeps every point
    assert yardstick("contest", 20, 20, None) == "met"


def test_the_paired_test_passes_a_copy_of_the_timer_and_catches_one_that_reads_high():
    """Seeded draws: a harness that is the named timer (the same lognormal spread, 6%) against one that reads 8% high
    on every point, six runs of 20 points pooled as tools/parity_pool.py pools them."""
    import random

    rng = random.Random(29)

    def pooled(skew: float) -> dict[str, int]:
        harness, plain = {}, {}
        for point in range(120):
            draw = [rng.lognormvariate(0.0, 0.06) for _ in range(3)]
            harness[(f"s{point}", 1)] = {"events": [draw[0] * skew]}
            plain[(f"s{point}", 1)] = {"events": draw[1:]}
        return paired_counts(harness, plain)["events"]

    assert yardstick("events", 0, 120, pooled(1.0)) == "met"
    assert yardstick("events", 0, 120, pooled(1.08)) == "missed"


def test_a_recorded_cross_check_kept_compressed_is_judged_again(tmp_path):
    import gzip
    import json

    from tools.tier_parity import main

    figures = {side: {"copy B=1": {"sync": [20.0, 21.0]}} for side in ("harness", "plain")}
    stored = tmp_path / "tier_parity.json.gz"
    stored.write_bytes(gzip.compress(json.dumps({"hardware": "a GPU", "date": "then", "git_commit": "abc",
                                                 "command": "c", "plain_repeats": 2, "figures": figures}).encode()))
    assert main(["--rejudge", str(stored), "--out", str(tmp_path / "new")]) == 0
    report = json.loads((tmp_path / "new" / "tier_parity.json").read_text())
    assert report["repeatability"]["sync"]["plain"] == {"within": 1, "points": 1}


def test_with_clock_log_nvidia_smi_runs_beside_both_sides_and_the_report_gives_its_clocks_by_phase(
        monkeypatch, tmp_path):
    import json
    import os
    import stat

    import tools.tier_parity as parity

    fake = tmp_path / "bin" / "nvidia-smi"  # a stand-in that prints a sample every 0.1 s, as nvidia-smi -l does
    fake.parent.mkdir()
    fake.write_text("#!/usr/bin/env bash\necho 'timestamp, clocks.current.sm [MHz]'\n"
                    "while true; do echo \"$(date +'%Y/%m/%d %H:%M:%S.%3N'), 1980, 3201, 40, 150.00, "
                    "0x0000000000000000\"; sleep 0.1; done\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")

    slow_sides(monkeypatch, parity)
    out = tmp_path / "out"
    assert parity.main(["--out", str(out), "--solutions", "", "--batches", "1", "--repeats", "1", "--clock-log"]) == 0
    report = json.loads((out / "tier_parity.json").read_text())
    assert [row["side"] for row in report["gpu_clocks"]] == ["harness", "plain"]
    assert all(row["samples"] > 0 and row["sm_mhz_busy_median"] == 1980 for row in report["gpu_clocks"])
    assert (out / parity.CLOCK_LOG).read_text().count("1980") >= 2
    assert "The GPU's clocks beside the run" in (out / "tier_parity.md").read_text()


def test_each_harness_run_is_set_over_the_plain_median_where_there_were_several():
    from tools.parity_compare import harness_run_rows

    report = {"figures": {"harness": {"cuda-v4 B=64": {"contest": [18.1, 18.0], "cupti": [17.9]}},
                          "plain": {"cuda-v4 B=64": {"contest": [17.9, 17.8, 18.0], "cupti": [17.9]}}}}
    assert [(r["point"], r["tier"]) for r in harness_run_rows(report)] == [("cuda-v4 B=64", "contest")]
    assert [round(v, 4) for v in harness_run_rows(report)[0]["ratios"]] == [round(18.1 / 17.9, 4), round(18.0 / 17.9, 4)]
