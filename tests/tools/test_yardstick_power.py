"""tools/yardstick_power.py: the yardstick's two forms on simulated cross-checks (issue #29), on the CPU."""

import json
import random

from tools.yardstick_power import main, simulated_run, verdicts


def test_a_simulated_cross_check_has_one_harness_run_and_two_plain_repeats_a_point():
    harness, plain = simulated_run(random.Random(1), points=5, sigma=0.05, skew=1.0)
    assert sorted(harness) == sorted(plain) and len(harness) == 5
    assert all(len(figures["events"]) == 1 for figures in harness.values())
    assert all(len(figures["events"]) == 2 for figures in plain.values())


def test_the_counts_rule_reads_a_one_point_shortfall_as_missed_where_the_paired_test_does_not():
    run = {"within": 13, "plain_self": 14,
           "paired": {"harness_only": 2, "plain_only": 3, "both": 11, "neither": 4}}
    assert verdicts([run]) == {"counts": True, "paired": False}
    skewed = {**run, "paired": {"harness_only": 0, "plain_only": 6, "both": 10, "neither": 4}}
    assert verdicts([skewed]) == {"counts": True, "paired": True}  # six of six to the plain side: p = 1/64


def test_the_tool_writes_its_table_and_refuses_an_empty_simulation(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "power"), "--trials", "5", "--runs", "2"]) == 0
    report = json.loads((tmp_path / "power" / "yardstick_power.json").read_text())
    assert len(report["rows"]) == 9 and all(0.0 <= row["paired pooled"] <= 1.0 for row in report["rows"])
    assert (tmp_path / "power" / "yardstick_power.md").read_text().strip() in capsys.readouterr().out
    assert main(["--out", str(tmp_path / "none"), "--trials", "0"]) == 2
    assert "--trials" in capsys.readouterr().err and not (tmp_path / "none").exists()
