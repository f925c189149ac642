"""tools/compare_runs.py: two runs side by side, per batch size or per solution."""

import json

from tools.compare_runs import main


def write_traces(path, figures):
    """``figures``: [(solution, batch size, cupti µs)] as PASSED traces."""
    lines = [{"solution": s, "workload": {"axes": {"batch_size": b}},
              "evaluation": {"performance": {"tiers": {"cupti": {"available": True, "value_us": v}}}}}
             for s, b, v in figures]
    path.mkdir()
    (path / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path / "traces.jsonl"


def test_per_solution_compares_the_medians_over_the_workloads(tmp_path, capsys):
    before = write_traces(tmp_path / "before", [("a", 1, 2.0), ("a", 1, 4.0), ("a", 1, 3.0)])
    after = write_traces(tmp_path / "after", [("a", 1, 3.3), ("a", 1, 2.0), ("a", 1, 9.0)])
    assert main([str(before), str(after), "--tiers", "cupti", "--per", "solution"]) == 0
    assert "| a | all | 3.00 → 3.30 (+10.0%) |" in capsys.readouterr().out
    assert main([str(before), str(after), "--tiers", "cupti"]) == 0  # per batch size: one workload's figure
    assert "| a | 1 | 3.00 → 9.00 (+200.0%) |" in capsys.readouterr().out


def test_a_traces_file_named_otherwise_is_not_read_as_its_own_floors(tmp_path, capsys):
    before = write_traces(tmp_path / "before", [("a", 1, 2.0)])
    after = write_traces(tmp_path / "after", [("a", 1, 3.0)])
    renamed = before.rename(tmp_path / "before" / "old-run.jsonl")
    assert main([str(renamed), str(after), "--tiers", "cupti"]) == 0
    assert "| a | 1 | 2.00 → 3.00 (+50.0%) |" in capsys.readouterr().out
