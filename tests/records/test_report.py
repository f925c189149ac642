"""harness.records.report: the console table must render any mix of rows."""

import io

import pandas as pd
import pytest
from rich.console import Console

from harness.records.report import print_summary, print_table, solution_summary, trace_rows
from support.records import make_trace


def test_table_renders_a_skipped_row_beside_timed_ones():
    """A SKIPPED row has no headline tier (NaN in the frame); printing must not fail on it."""
    frame = pd.DataFrame([
        {"solution": "pt-reference", "workload": "w1", "batch_size": 1, "status": "PASSED", "headline_tier": "wall",
         "latency_us": 150.0, "output_max_abs_err": 0.0, "new_state_max_abs_err": 0.0},
        {"solution": "fla-recurrent", "workload": "w1", "batch_size": 1, "status": "SKIPPED"},
    ])
    out = io.StringIO()
    print_table(frame, Console(file=out, width=200))
    text = out.getvalue()
    assert "SKIPPED" in text and "150.00" in text


def _row(solution, workload, status="PASSED", us=None, x_floor=None, speedup=None, log=""):
    return {"solution": solution, "workload": workload, "batch_size": 1, "status": status,
            "headline_tier": "cupti" if status == "PASSED" else None, "latency_us": us,
            "cupti_x_copy_floor": x_floor, "cupti_speedup_vs_reference": speedup, "log": log}


def test_the_summary_has_one_row_per_solution_with_its_verdict_and_ratios():
    frame = pd.DataFrame([
        _row("copy-floor", "w1", us=1.0), _row("copy-floor", "w2", us=2.0),
        _row("fi-baseline", "w1", us=4.0, x_floor=4.0), _row("fi-baseline", "w2", us=8.0, x_floor=4.0),
        _row("mine", "w1", us=2.0, x_floor=2.0, speedup=50.0), _row("mine", "w2", us=2.0, x_floor=1.0, speedup=100.0),
        _row("broken", "w1", us=3.0, x_floor=3.0),
        _row("broken", "w2", "INCORRECT_NUMERICAL", log="trial 0: output: 5/1024 elements out of tolerance"),
        _row("bf16[bfloat16-state]", "w1", us=1.0, x_floor=0.9),
    ])
    summary = solution_summary(frame).set_index("solution")
    assert list(summary.index) == ["fi-baseline", "mine", "broken", "bf16[bfloat16-state]"]  # no floor rows
    mine = summary.loc["mine"]
    assert mine["passed"] == "2/2" and mine["median_us"] == 2.0 and mine["geomean_us"] == 2.0
    assert mine["score"] == 75.0 and mine["x_floor"] == 1.5
    assert mine["vs_flashinfer"] == pytest.approx((2.0 * 4.0) ** 0.5)  # geomean of 4/2 and 8/2
    broken = summary.loc["broken"]
    assert broken["passed"] == "1/2" and broken["problem"].startswith("1 INCORRECT_NUMERICAL: trial 0")
    assert pd.isna(summary.loc["bf16[bfloat16-state]"]["vs_flashinfer"])  # no bf16-state FlashInfer in the run
    assert summary.loc["bf16[bfloat16-state]"]["below_floor"] == 1
    out = io.StringIO()
    print_summary(solution_summary(frame), Console(file=out, width=200))
    assert "1/2" in out.getvalue() and "(1 < 1)" in out.getvalue() and "noise" not in out.getvalue()


def test_below_the_floor_is_called_noise_on_the_host_clock_only():
    """A kernel can beat torch's copy on the GPU (cuda-v4 did on 28 of contest-v2's 54 workloads on
    the H100); on the CPU's wall clock a figure under the copy is the clock's noise."""
    row = dict(_row("pt-reference", "w1", us=1.0), headline_tier="wallclock", wallclock_x_copy_floor=0.9)
    out = io.StringIO()
    print_summary(solution_summary(pd.DataFrame([row])), Console(file=out, width=200))
    assert "(1 < 1: noise)" in out.getvalue()


def test_a_state_dtype_label_is_printed_as_it_is_not_as_a_style_tag():
    """rich reads ``[bfloat16-state]`` as markup unless escaped: the bf16 row lost its suffix and looked
    like a second fp32 row of the same solution (seen in the H100 runs of 2026-11-23)."""
    frame = pd.DataFrame([_row("cutedsl-bf16", "w1", us=2.0), _row("cutedsl-bf16[bfloat16-state]", "w1", us=1.5)])
    for show in (lambda c: print_table(frame, c), lambda c: print_summary(solution_summary(frame), c)):
        out = io.StringIO()
        show(Console(file=out, width=200))
        assert "cutedsl-bf16[bfloat16-state]" in out.getvalue()


def test_vs_flashinfer_never_divides_one_gpus_time_by_anothers():
    rows = [dict(_row("cuda-v4", "w1", us=2.0), device="cuda:0"), dict(_row("fi-baseline", "w1", us=4.0), device="cuda:1"),
            dict(_row("cuda-v4", "w2", us=2.0), device="cuda:0"), dict(_row("fi-baseline", "w2", us=3.0), device="cuda:0")]
    summary = solution_summary(pd.DataFrame(rows)).set_index("solution")
    assert summary.loc["cuda-v4", "vs_flashinfer"] == pytest.approx(1.5)  # w2 only: both on cuda:0


def test_the_summary_score_reads_the_contest_tier_where_the_run_has_it():
    rows = [dict(_row("mine", w, us=2.0, speedup=s), contest_speedup_vs_reference=c)
            for w, s, c in (("w1", 50.0, 40.0), ("w2", 100.0, None))]
    summary = solution_summary(pd.DataFrame(rows)).set_index("solution")
    assert summary.loc["mine"]["score"] == 40.0 and summary.loc["mine"]["score_tier"] == "contest"
    out = io.StringIO()
    print_summary(solution_summary(pd.DataFrame(rows)), Console(file=out, width=200))
    assert "40.0 (contest)" in out.getvalue()
    plain = solution_summary(pd.DataFrame([_row("mine", "w1", us=2.0, speedup=50.0)])).set_index("solution")
    assert plain.loc["mine"]["score_tier"] == "cupti" and plain.loc["mine"]["score"] == 50.0


def test_the_table_keeps_the_sync_tiers_host_diagnostics_beside_its_figure():
    trace = make_trace("fla-recurrent", "w0", {"cupti": 2.1, "sync": 44.0})
    sync = trace.evaluation.performance.tiers["sync"]
    sync.host_call_us, sync.host_probe_us = 30.5, 6.4
    [row] = trace_rows([trace]).to_dict("records")
    assert (row["sync_value_us"], row["sync_host_call_us"], row["sync_host_probe_us"]) == (44.0, 30.5, 6.4)
    assert "cupti_host_probe_us" not in row  # a tier without the diagnostic gets no column
