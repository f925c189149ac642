"""The leaderboard from synthetic traces written to a temporary results folder (tests/support/records.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from support.records import B200, H100, make_floor, make_trace, row, write_run

from harness.records.leaderboard import LEADERBOARD_FILE, build_leaderboard, write_leaderboard

def floor_and_reference(ref_us=(10.0, 20.0), floor_us=(1.0, 1.0), tier="events") -> list:
    return [make_floor(f"w{i}", {tier: f}) for i, f in enumerate(floor_us)] + \
           [make_trace("pt-reference", f"w{i}", {tier: r}) for i, r in enumerate(ref_us)]


def test_score_is_arithmetic_mean_of_speedups(tmp_path):
    traces = floor_and_reference() + [make_trace("fast", "w0", {"events": 5.0}),
                                      make_trace("fast", "w1", {"events": 5.0})]
    write_run(tmp_path, "r1", traces)
    fast = row(build_leaderboard(tmp_path), "fast")
    assert fast["score"] == pytest.approx(3.0)  # speedups 10/5 = 2 and 20/5 = 4
    assert (fast["passed"], fast["total"]) == (2, 2)
    assert fast["median_us"] == pytest.approx(5.0) and fast["geomean_us"] == pytest.approx(5.0)
    assert fast["x_copy_floor"] == pytest.approx(5.0)
    assert fast["git_commit"] == "abc123" and fast["date"].startswith("2026-01-01")
    assert row(build_leaderboard(tmp_path), "pt-reference")["score"] == pytest.approx(1.0)
    assert "copy-floor" not in set(build_leaderboard(tmp_path)["solution"])


def test_failed_workload_scores_zero(tmp_path):
    traces = floor_and_reference() + [make_trace("half", "w0", {"events": 5.0}),
                                      make_trace("half", "w1", {}, status="INCORRECT_NUMERICAL")]
    write_run(tmp_path, "r1", traces)
    half = row(build_leaderboard(tmp_path), "half")
    assert half["score"] == pytest.approx(1.0)  # (2 + 0) / 2
    assert (half["passed"], half["total"]) == (1, 2)
    assert half["median_us"] == pytest.approx(5.0)


def test_workload_without_a_trace_scores_zero(tmp_path):
    write_run(tmp_path, "r1", floor_and_reference() + [make_trace("cut-short", "w0", {"events": 5.0})])
    cut = row(build_leaderboard(tmp_path), "cut-short")
    assert (cut["passed"], cut["total"]) == (1, 2)
    assert cut["score"] == pytest.approx(1.0)


def test_geomean_latency_and_flashinfer_ratio(tmp_path):
    traces = floor_and_reference() + [
        make_trace("fi-baseline", "w0", {"events": 8.0}), make_trace("fi-baseline", "w1", {"events": 8.0}),
        make_trace("fast", "w0", {"events": 4.0}), make_trace("fast", "w1", {"events": 2.0})]
    write_run(tmp_path, "r1", traces)
    fast = row(build_leaderboard(tmp_path), "fast")
    assert fast["geomean_us"] == pytest.approx(math.sqrt(8.0))
    assert fast["vs_flashinfer"] == pytest.approx(math.sqrt(2.0 * 4.0))


def test_other_gpus_and_tiers_are_not_compared(tmp_path):
    write_run(tmp_path, "h100", floor_and_reference(), hardware=H100)
    b200 = [make_floor(f"w{i}", {"cupti": 1.0, "events": 1.0}) for i in range(2)] + \
           [make_trace("fast", f"w{i}", {"cupti": 2.0, "events": 5.0}) for i in range(2)] + \
           [make_trace("pt-reference", f"w{i}", {"cupti": 100.0, "events": None}) for i in range(2)]
    write_run(tmp_path, "b200", b200, hardware=B200)
    board = build_leaderboard(tmp_path)
    # B200 events: the only events reference is on the H100, so no score
    assert math.isnan(row(board, "fast", hardware=B200, tier="events")["score"])
    # B200 cupti: compared with the B200 cupti reference only
    assert row(board, "fast", hardware=B200, tier="cupti")["score"] == pytest.approx(50.0)
    assert set(board["hardware"]) == {H100, B200}


def test_latest_run_wins_and_reference_falls_back(tmp_path):
    write_run(tmp_path, "old", floor_and_reference() + [make_trace("fast", f"w{i}", {"events": 5.0})
                                                        for i in range(2)], started="2026-01-01T00:00:00+00:00")
    newer = [make_floor(f"w{i}", {"events": 1.0}) for i in range(2)] + \
            [make_trace("fast", f"w{i}", {"events": 10.0}) for i in range(2)]
    write_run(tmp_path, "new", newer, started="2026-02-01T00:00:00+00:00", commit="def456")
    board = build_leaderboard(tmp_path)
    fast = row(board, "fast")
    assert fast["run"] == "new" and fast["git_commit"] == "def456"
    assert fast["median_us"] == pytest.approx(10.0)
    assert fast["reference_run"] == "old"  # the new run has no pt-reference
    assert fast["score"] == pytest.approx((1.0 + 2.0) / 2)
    assert row(board, "pt-reference")["run"] == "old"


def test_skipped_only_run_does_not_hide_a_real_one(tmp_path):
    write_run(tmp_path, "gpu", floor_and_reference() + [make_trace("cuda", "w0", {"events": 1.0})],
              started="2026-01-01T00:00:00+00:00")
    write_run(tmp_path, "later", floor_and_reference() + [make_trace("cuda", "w0", {}, status="SKIPPED")],
              started="2026-03-01T00:00:00+00:00")
    assert row(build_leaderboard(tmp_path), "cuda")["run"] == "gpu"


def test_bf16_state_variant_is_its_own_row(tmp_path):
    traces = floor_and_reference() + [
        make_trace("cutedsl-bf16", "w0", {"events": 5.0}), make_trace("cutedsl-bf16", "w1", {"events": 5.0}),
        make_trace("cutedsl-bf16[bfloat16-state]", "w0", {"events": 2.5}),
        make_trace("cutedsl-bf16[bfloat16-state]", "w1", {"events": 2.5}),
        make_trace("fi-baseline[bfloat16-state]", "w0", {"events": 1.0})]
    write_run(tmp_path, "r1", traces)
    board = build_leaderboard(tmp_path)
    fp32, bf16 = row(board, "cutedsl-bf16"), row(board, "cutedsl-bf16[bfloat16-state]")
    assert (fp32["state_dtype"], bf16["state_dtype"]) == ("float32", "bfloat16")
    assert fp32["score"] == pytest.approx(3.0) and fp32["median_us"] == pytest.approx(5.0)
    assert bf16["median_us"] == pytest.approx(2.5)
    # a bf16-state fi-baseline is never the FlashInfer baseline of the fp32 rows
    assert math.isnan(fp32["vs_flashinfer"])
    # every fp32 row is listed before every non-fp32 row
    dtypes = list(board["state_dtype"])
    assert dtypes == sorted(dtypes, key=lambda d: d != "float32")


def test_write_leaderboard_leaves_out_a_folder_changed_since_it_was_written(tmp_path, capsys):
    write_run(tmp_path, "r1", floor_and_reference())
    changed = write_run(tmp_path, "r2", floor_and_reference())
    with open(changed / "traces.jsonl", "a") as f:
        f.write('{"truncated": ')  # not what the writer wrote (it writes whole files, atomically)
    path = write_leaderboard(tmp_path)
    assert path == tmp_path / LEADERBOARD_FILE
    assert set(pd.read_csv(path)["run"]) == {"r1"}
    assert "r2" in capsys.readouterr().err


def test_empty_results(tmp_path):
    board = build_leaderboard(tmp_path)
    assert board.empty and "score" in board.columns


def test_the_command_refuses_a_folder_without_runs_and_never_empties_a_leaderboard(tmp_path, capsys):
    """``python -m harness.records.leaderboard``: a --results without runs/ (a typo, a file) is exit 2, not a
    new empty folder; where no run can be read any more, the leaderboard it had is left as it was."""
    from harness.records.leaderboard import main

    for results in (tmp_path / "typo", tmp_path / "a-file"):
        if results.name == "a-file":
            results.write_text("")
        with pytest.raises(SystemExit) as stop:
            main(["--results", str(results)])
        assert stop.value.code == 2 and "no runs/ folder in it" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()
    run = write_run(tmp_path, "run", [make_trace("a", "w0", {"events": 2.0})])
    assert main(["--results", str(tmp_path)]) == 0
    kept = (tmp_path / LEADERBOARD_FILE).read_text()
    assert len(pd.read_csv(tmp_path / LEADERBOARD_FILE)) == 1
    (run / "traces.jsonl").write_text("cut")  # its manifest no longer holds: the run is skipped
    assert main(["--results", str(tmp_path)]) == 2
    assert "left as it was" in capsys.readouterr().err and (tmp_path / LEADERBOARD_FILE).read_text() == kept
