"""The pure pieces the GPU tuners (solutions/*/tune.py) share."""

import json

import pytest

from harness.tuning import compress_table, fastest_correct, lookup_launch_config, write_report


def test_fastest_correct_ignores_wrong_configs():
    results = {"a": {"correct": True, "us": 3.0}, "b": {"correct": False, "us": 1.0},
               "c": {"correct": True, "us": 2.0}, "d": {"correct": False, "error": "no compile"}}
    assert fastest_correct(results) == "c"
    assert fastest_correct({"b": results["b"]}) is None


def test_compress_table_and_lookup_round_trip():
    best = [(1, "x"), (2, "x"), (4, "y"), (8, "y"), (16, "z")]
    table = compress_table(best)
    assert table == [[2, "x"], [8, "y"], [None, "z"]]
    assert [lookup_launch_config(table, b) for b in (1, 2, 3, 8, 9, 10**6)] == ["x", "x", "y", "y", "z", "z"]
    assert lookup_launch_config(((4, "small"),), 100) == "small"  # past the last limit: the last entry
    with pytest.raises(ValueError):
        lookup_launch_config((), 1)


def test_write_report(tmp_path):
    path = write_report(tmp_path / "new", "t.json", {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
