"""tools.targets judges each target on one run, per batch size, and can say MISSED."""

import pandas as pd
import pytest

from tools.targets import Target, judge, latest_common_run


def measurements(rows):
    """rows: (run, started, solution, batch_size, value_us)."""
    frame = pd.DataFrame(rows, columns=["run", "started", "solution", "batch_size", "value_us"])
    frame["started"] = pd.to_datetime(frame["started"])
    return frame.assign(hardware="GPU", set="sweep", tier="cupti")


@pytest.fixture
def two_runs():
    return measurements([
        ("old", "2026-01-01", "a", 1, 1.0), ("old", "2026-01-01", "b", 1, 2.0),
        ("old", "2026-01-01", "a", 64, 10.0), ("old", "2026-01-01", "b", 64, 20.0),
        ("new", "2026-02-01", "a", 1, 3.0), ("new", "2026-02-01", "b", 1, 2.0),
        ("new", "2026-02-01", "a", 64, 10.0), ("new", "2026-02-01", "b", 64, 20.0),
        ("newest", "2026-03-01", "a", 1, 0.1),  # b not measured here: not a common run
    ])


def test_judged_on_the_latest_run_with_both_sides(two_runs):
    assert latest_common_run(two_runs, ("a", "b")) == "new"
    row = judge(Target(0, "a", "b"), two_runs)
    assert row["run"] == "new" and row["verdict"] == "MISSED" and "B = 1" in row["detail"]
    assert row["worst"].startswith("B=1: 3.00 / 2.00")


def test_batch_range_and_factor(two_runs):
    assert judge(Target(0, "a", "b", min_batch=16), two_runs)["verdict"] == "MET"  # B=64 only: 0.5
    assert judge(Target(0, "a", "b", 0.49, min_batch=16), two_runs)["verdict"] == "MISSED"
    assert judge(Target(0, "a", "b", 1.5, min_batch=1, max_batch=1), two_runs)["verdict"] == "MET"


def test_strict_needs_strictly_less():
    m = measurements([("r", "2026-01-01", "a", 1, 2.0), ("r", "2026-01-01", "b", 1, 2.0)])
    assert judge(Target(0, "a", "b"), m)["verdict"] == "MET"
    assert judge(Target(0, "a", "b", strict=True), m)["verdict"] == "MISSED"


def test_no_common_run_is_no_data_and_a_failed_batch_is_missed():
    m = measurements([("r", "2026-01-01", "a", 1, 1.0), ("s", "2026-01-02", "b", 1, 2.0)])
    assert judge(Target(0, "a", "b"), m)["verdict"] == "NO DATA"
    failed = measurements([("r", "2026-01-01", "a", 1, 1.0), ("r", "2026-01-01", "b", 1, 2.0),
                           ("r", "2026-01-01", "a", 2, float("nan")), ("r", "2026-01-01", "b", 2, 2.0)])
    row = judge(Target(0, "a", "b"), failed)  # a failed at B=2: its number is NaN
    assert row["verdict"] == "MISSED" and "no passing number at B = 2" in row["detail"]


def test_describe_names_the_batch_range():
    from tools.targets import Target

    assert Target(5, "a", "b").describe() == "a ≤ b, every B"
    assert Target(5, "a", "copy-floor", 1.02, min_batch=16).describe() == "a ≤ 1.02× copy-floor, B ≥ 16"
    assert Target(5, "a", "b", min_batch=1, max_batch=1, strict=True).describe() == "a < b, B = 1"
    assert Target(5, "a", "b", min_batch=2, max_batch=8).describe() == "a ≤ b, B = 2–8"


def test_a_best_of_side_takes_the_lowest_median_per_batch_size_of_one_run():
    m = measurements([
        ("r", "2026-01-01", "a", 1, 3.0), ("r", "2026-01-01", "c", 1, 2.1), ("r", "2026-01-01", "floor", 1, 2.0),
        ("r", "2026-01-01", "a", 8, 4.0), ("r", "2026-01-01", "c", 8, float("nan")), ("r", "2026-01-01", "floor", 8, 4.0),
        ("later", "2026-02-01", "a", 1, 1.0), ("later", "2026-02-01", "floor", 1, 2.0),  # c not timed: not this run
    ])
    target = Target(33, ("a", "c"), "floor", 1.08, max_batch=8)
    assert target.describe() == "best of (a, c) ≤ 1.08× floor, B = 1–8"
    row = judge(target, m)  # B = 1: c's 2.1 (1.05); B = 8: a's 4.0 (c failed there)
    assert row["run"] == "r" and row["verdict"] == "MET" and row["worst"] == "B=1: 2.10 / 2.00 µs = 1.050"
    assert judge(Target(33, ("a", "c"), "floor", 1.04, max_batch=8), m)["verdict"] == "MISSED"


def test_a_set_or_tier_no_run_has_is_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import tools.targets as targets

    monkeypatch.setattr(targets, "load_measurements", lambda results: measurements([
        ("run", "2026-01-01", "a", 1, 1.0)]))
    for argv, said in ((["--tier", "cuptii"], "--tier 'cuptii': no stored run has it (they have: cupti)"),
                       (["--set", "sweeep"], "--set 'sweeep': no stored run has it (they have: sweep)"),
                       (["--results", str(tmp_path / "nope")], "no such folder")):
        with pytest.raises(SystemExit) as stop:
            targets.main(argv if argv[0] == "--results" else ["--results", str(tmp_path), *argv])
        assert stop.value.code == 2 and said in capsys.readouterr().err, argv
    assert not (tmp_path / targets.TARGETS_FILE).exists()
