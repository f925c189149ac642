"""tools/compare_runs.py: two runs side by side, per batch size or per solution."""

import gzip
import json

import pytest

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


def test_per_workload_pairs_the_same_workload_and_names_the_devices(tmp_path, capsys):
    def run(name, figures):  # [(solution, workload uuid, device, cupti µs)]
        lines = [{"solution": s, "workload": {"uuid": w, "axes": {"batch_size": 1}},
                  "evaluation": {"environment": {"device": d},
                                 "performance": {"tiers": {"cupti": {"available": True, "value_us": v}}}}}
                 for s, w, d, v in figures]
        (tmp_path / name).mkdir()
        (tmp_path / name / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        return str(tmp_path / name / "traces.jsonl")

    one = run("one", [("a", "w1", "cuda:0", 2.0), ("a", "w2", "cuda:0", 4.0), ("a", "w3", "cuda:0", 5.0)])
    two = run("two", [("a", "w1", "cuda:1", 2.2), ("a", "w2", "cuda:1", 3.6), ("a", "w4", "cuda:1", 9.0)])
    assert main([one, two, "--tiers", "cupti", "--per", "workload"]) == 0
    # w1 and w2 are in both (1.1 and 0.9); w3 and w4 in one run only
    assert "| a | cuda:0 → cuda:1 | cupti | 2 | 1.0000 | 0.900 | 1.100 |" in capsys.readouterr().out


def test_a_bad_file_is_named_and_exits_2_without_a_traceback(tmp_path, capsys):
    good = write_traces(tmp_path / "good", [("a", 1, 2.0)])
    full = gzip.compress(good.read_bytes())
    bad = {"cut.jsonl.gz": full[: len(full) // 2], "list.jsonl": b"[1, 2]\n", "text.jsonl": b"not json\n",
           "no-evaluation.jsonl": b'{"solution": "a"}\n'}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SystemExit) as exited:
            main([str(good), str(tmp_path / name), "--tiers", "cupti"])
        assert exited.value.code == 2
        message = capsys.readouterr().err
        assert str(tmp_path / name) in message and "Traceback" not in message, name
    with pytest.raises(SystemExit) as exited:
        main([str(good), str(good), "--tiers", "cupti,cuptii"])
    assert exited.value.code == 2 and "unknown tier cuptii" in capsys.readouterr().err


def test_a_run_folder_stands_for_its_traces(tmp_path, capsys):
    before = write_traces(tmp_path / "before", [("a", 1, 2.0)])
    after = write_traces(tmp_path / "after", [("a", 1, 3.0)])
    assert main([str(before.parent), str(after.parent), "--tiers", "cupti"]) == 0
    assert "| a | 1 | 2.00 → 3.00 (+50.0%) |" in capsys.readouterr().out
