"""The final contest's score (harness/records/score.py, final rule): flashinfer-bench's
``TraceSet.get_solution_score`` (main, 40e6ca7), each case checked against a hand computation
of its rules: baseline µs / solution µs per workload, the lowest passed µs of each side, a
workload without a passed baseline left out, any failed trace scoring the solution 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessInputError
from harness.facts import FLASHINFER_SOLUTION as BASE
from harness.records.score import final_scores, gpus_without, reference_scores
from harness.records.store import StoredRun
from support.records import B200, H100, make_trace

WORKLOADS = {"w0": 1, "w1": 4, "w2": 4}  # uuid -> batch size


def run(name: str, traces, set_name: str = "contest-v2") -> StoredRun:
    return StoredRun(run_dir=Path("results/runs") / name, meta={"workloads": set_name}, traces=traces)


def cupti(solution: str, workload: str, us: float, **kw):
    return make_trace(solution, workload, {"cupti": us}, batch=WORKLOADS[workload], **kw)


def score_of(runs, solution: str = "x", **kw):
    (found,) = [s for s in final_scores(runs, "contest-v2", WORKLOADS, **kw) if s.solution == solution]
    return found


def test_any_failed_trace_scores_the_whole_solution_0():
    base = [cupti(BASE, w, us) for w, us in (("w0", 100.0), ("w1", 200.0))]
    x = [cupti("x", "w0", 10.0), cupti("x", "w1", 0, status="INCORRECT_NUMERICAL")]
    score = score_of([run("a", base + x)])
    # the old rule would count the failed workload 0: (100/10 + 0) / 2 = 5
    assert score.score == 0.0 and score.by_batch == {}
    assert (score.counted, score.passed) == (2, 1) and "INCORRECT_NUMERICAL at B=4 (w1)" in score.failed
    # a failure where the baseline has no figure (left out of the mean) still scores 0
    x = [cupti("x", "w0", 10.0), cupti("x", "w1", 20.0), cupti("x", "w2", 0, status="RUNTIME_ERROR")]
    assert score_of([run("a", base + x)]).score == 0.0
    # SKIPPED (this machine cannot run it) is no flashinfer-bench status: not a failure
    x = [cupti("x", "w0", 10.0), cupti("x", "w1", 20.0), cupti("x", "w2", 0, status="SKIPPED")]
    assert score_of([run("a", base + x)]).score == pytest.approx((10.0 + 10.0) / 2)


def test_a_workload_without_a_passed_baseline_is_left_out_not_counted_0():
    base = [cupti(BASE, "w0", 100.0), cupti(BASE, "w1", 0, status="RUNTIME_ERROR")]  # none on w2
    x = [cupti("x", w, us) for w, us in (("w0", 10.0), ("w1", 20.0), ("w2", 5.0))]
    score = score_of([run("a", base + x)])
    assert score.score == pytest.approx(100.0 / 10.0)  # not (10 + 0 + 0) / 3
    assert (score.counted, score.passed, score.workloads) == (1, 3, 3) and score.failed is None
    # a workload the solution has no trace of is left out too (flashinfer-bench: baseline ∩ solution)
    base = [cupti(BASE, w, 100.0) for w in WORKLOADS]
    score = score_of([run("a", base + [cupti("x", "w0", 50.0)])])
    assert score.score == pytest.approx(2.0) and (score.counted, score.untimed) == (1, 0)


def test_several_traces_of_a_workload_take_the_lowest_passed_latency():
    base = [cupti(BASE, "w0", us) for us in (100.0, 90.0, 95.0)]  # first 100, median 95, last 95
    x = [cupti("x", "w0", us) for us in (10.0, 8.0, 12.0)]  # first 10, median 10, last 12
    score = score_of([run("a", base + x)])
    assert score.score == pytest.approx(90.0 / 8.0)  # 11.25; first/first 10, median/median 9.5
    assert score.counted == 1


def test_the_batch_sizes_contributions_add_up_to_the_score():
    base = [cupti(BASE, w, us) for w, us in (("w0", 100.0), ("w1", 200.0), ("w2", 60.0))]
    x = [cupti("x", w, us) for w, us in (("w0", 10.0), ("w1", 40.0), ("w2", 20.0))]
    score = score_of([run("a", base + x)])
    assert score.score == pytest.approx((10.0 + 5.0 + 3.0) / 3)
    assert score.by_batch == pytest.approx({1: 10.0 / 3, 4: (5.0 + 3.0) / 3})
    assert sum(score.by_batch.values()) == pytest.approx(score.score)


def test_the_baseline_of_the_solutions_run_first_else_every_run_of_the_gpu():
    runs = [run("20260101T000000Z_a", [cupti(BASE, w, 100.0) for w in ("w0", "w1")]),
            run("20260102T000000Z_b", [cupti(BASE, w, 120.0) for w in ("w0", "w1")]
                + [cupti("x", w, 10.0) for w in ("w0", "w1")]),
            run("20260103T000000Z_c", [cupti("y", w, 10.0) for w in ("w0", "w1")])]
    x, y = score_of(runs, "x"), score_of(runs, "y")
    assert x.score == pytest.approx(12.0) and x.same_run and x.baseline_runs == ["20260102T000000Z_b"]
    # no baseline in y's run: the lowest over the runs that hold it (100 µs, run a), said so
    assert y.score == pytest.approx(10.0) and not y.same_run
    assert y.baseline_runs == ["20260101T000000Z_a", "20260102T000000Z_b"]
    assert x.baseline_spread == pytest.approx(20.0 / 110.0) and x.spread_runs == 2
    assert BASE not in {s.solution for s in final_scores(runs, "contest-v2", WORKLOADS)}  # not scored


def test_the_newest_run_of_a_solution_counts_whole():
    runs = [run("20260101T000000Z_a", [cupti(BASE, w, 100.0) for w in WORKLOADS]
                + [cupti("x", "w0", 0, status="COMPILE_ERROR")] + [cupti("x", w, 1.0) for w in ("w1", "w2")]),
            run("20260102T000000Z_b", [cupti("x", w, 50.0) for w in ("w0", "w1")])]
    score = score_of(runs)  # the older run's failure and its 1 µs figures are an older version's
    assert score.score == pytest.approx(2.0) and score.run == "20260102T000000Z_b" and score.counted == 2


def test_tier_and_gpu_never_mix():
    runs = [run("a", [make_trace(BASE, w, {"cupti": 100.0, "contest": 120.0}, batch=b) for w, b in WORKLOADS.items()]
                + [make_trace("x", w, {"cupti": 10.0, "contest": 20.0}, batch=b) for w, b in WORKLOADS.items()]),
            run("b", [cupti("x", w, 1.0, hardware=B200) for w in WORKLOADS])]
    score = score_of(runs)
    assert (score.hardware, score.tier, score.score) == (H100, "contest", pytest.approx(6.0))  # cupti: 10
    assert score_of(runs, tier="cupti").score == pytest.approx(10.0)
    assert gpus_without(runs, "contest-v2") == [B200]  # nothing to divide on the B200: no score there
    assert {s.hardware for s in final_scores(runs, "contest-v2", WORKLOADS)} == {H100}
    runs[0].traces[-1] = cupti("x", "w2", 10.0)  # passed, but no contest figure: left out, said so
    score = score_of(runs)
    assert (score.counted, score.untimed, score.score) == (2, 1, pytest.approx(6.0))


def test_the_reference_rule_keeps_its_own_numbers():
    traces = ([cupti(name, w, us) for name, us in (("pt-reference", 1000.0), (BASE, 100.0)) for w in WORKLOADS]
              + [cupti("x", "w0", 10.0), cupti("x", "w1", 0, status="INCORRECT_NUMERICAL"), cupti("x", "w2", 20.0)])
    (old,) = [s for s in reference_scores([run("a", traces)], "contest-v2", WORKLOADS) if s.solution == "x"]
    assert old.score == pytest.approx((100.0 + 0 + 50.0) / 3)  # vs pt-reference, the failure counting 0
    assert score_of([run("a", traces)]).score == 0.0


def test_bad_input_names_the_folder_and_field():
    runs = [run("a", [cupti(BASE, "w0", 100.0), cupti("x", "w0", 10.0)])]
    with pytest.raises(HarnessInputError, match=r"results/runs: field 'workloads': no run of contest-v1"):
        final_scores(runs, "contest-v1", WORKLOADS)
    with pytest.raises(HarnessInputError, match=r"field 'solution': .*'fi-bf16state'.*labels there: fi-baseline, x"):
        final_scores(runs, "contest-v2", WORKLOADS, baseline="fi-bf16state")


def test_the_command_names_its_rule_and_baseline(tmp_path, capsys):
    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition
    from harness.data.workloads import load_workloads
    from harness.interop.cli import main
    from harness.paths import WORKLOADS_DIR
    from support.records import write_run

    w0, w1 = load_workloads(WORKLOADS_DIR / "contest-v2.jsonl", load_definition(OUR_DEFINITION))[:2]
    write_run(tmp_path, "20260101T000000Z_a", [make_trace(name, w.uuid, {"cupti": us}, batch=w.batch_size)
                                               for name, us in (("pt-reference", 400.0), (BASE, 40.0), ("x", 10.0))
                                               for w in (w0, w1)], set_name="contest-v2")
    assert main(["score", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "FINAL rule" in out and f"{BASE} µs / solution µs" in out and " 4.00 " in out and "2/54" in out
    assert main(["score", "--results", str(tmp_path), "--rule", "reference"]) == 0
    out = capsys.readouterr().out
    # (40 + 40) / 54: the reference rule's mean is over every workload of the set
    assert "REFERENCE rule" in out and "pt-reference µs / solution µs" in out and " 1.5 " in out
    assert main(["score", "--results", str(tmp_path), "--baseline", "nope"]) == 2
    assert f"{tmp_path / 'runs'}: field 'solution'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["score", "--results", str(tmp_path), "--rule", "reference", "--baseline", BASE])
    assert stop.value.code == 2 and "--baseline applies to --rule final only" in capsys.readouterr().err


def test_the_default_baseline_is_the_contest_s_shipped_form_where_a_run_holds_it():
    from harness.facts import CONTEST_BASELINE_SOLUTION as WRAPPER
    from harness.records.score import default_baseline

    ours = run("20260101T000000Z_a", [cupti(BASE, w, 100.0) for w in WORKLOADS])
    assert default_baseline([ours], "contest-v2") == BASE  # no wrapper judged: our DPS form
    shipped = run("20260102T000000Z_b", [cupti(WRAPPER, w, 80.0) for w in WORKLOADS])
    assert default_baseline([ours, shipped], "contest-v2") == WRAPPER
    assert default_baseline([ours, shipped], "contest-v1") == BASE  # another set's runs do not count
