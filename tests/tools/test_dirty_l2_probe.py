"""The dirty-L2 probe (tools/dirty_l2_probe.py) on the CPU: its rows and its command line; the timing needs a GPU."""

import pytest

from tools.dirty_l2_probe import DEFAULT_BUILDS, main, rows_of
from tools.ablation_probe import BUILDS


def test_a_row_sets_each_flushs_spread_beside_the_dirty_flushs_excess():
    probed = {"times_us": {"dirty": {"full": [19.0, 18.9, 19.2]}, "clean": {"full": [17.0, 17.1, 16.8]}},
              "window_means_us": {"dirty": {"full": [18.95, 18.97, 19.1]}, "clean": {"full": [17.05, 17.0, 16.9]}}}
    (row,) = rows_of(128, probed)
    assert (row["batch_size"], row["subject"]) == (128, "full")
    assert row["dirty"]["median_us"] == 19.0 and row["clean"]["median_us"] == 17.0
    assert row["dirty_minus_clean_us"] == pytest.approx(2.0)
    assert row["window_dirty_minus_clean_us"] == pytest.approx(18.97 - 17.0)
    assert (row["clean"]["min_us"], row["clean"]["max_us"]) == (16.8, 17.1)


def test_the_default_builds_are_the_ablation_probes():
    assert DEFAULT_BUILDS[0] == "full" and set(DEFAULT_BUILDS) <= set(BUILDS)


def test_an_unknown_build_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--builds", "full,no-such"]) == 2
    assert "no-such" in capsys.readouterr().err
