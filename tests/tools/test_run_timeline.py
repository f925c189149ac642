"""tools/run_timeline.py: where a run's time went, from its traces alone."""

import json

from tools.run_timeline import main, solution_rows


def trace(solution, stamp, wall_s=None, stop=None):
    tiers = {} if wall_s is None else {"cupti": {"tier": "cupti", "available": True, "wall_s": wall_s, "iters": 20,
                                                 "stop": stop}}
    return {"solution": solution, "evaluation": {"timestamp": stamp, "performance": {"tiers": tiers}}}


def write_run(folder, traces):
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"started": "2026-11-23T10:00:00+00:00"}))
    (folder / "traces.jsonl").write_text("\n".join(json.dumps(t) for t in traces) + "\n")
    return folder


def test_each_solution_gets_its_start_its_pace_and_its_tier_costs(tmp_path, capsys):
    run = write_run(tmp_path / "run", [
        trace("copy-floor", "2026-11-23T10:00:05+00:00"),
        trace("a", "2026-11-23T10:00:10+00:00", 0.3, "stable"), trace("a", "2026-11-23T10:00:12+00:00", 0.5, "iters"),
        trace("b", "2026-11-23T10:00:20+00:00", 0.1, "stable"), trace("b", "2026-11-23T10:00:21+00:00", 0.1, "stable"),
        trace("b", "2026-11-23T10:00:22+00:00", 0.1, "stable")])
    a, b = solution_rows(run)
    assert (a["solution"], a["workloads"], a["first_s"], a["per_workload_s"]) == ("a", 2, 10.0, 2.0)
    assert (b["first_s"], b["per_workload_s"]) == (8.0, 1.0)  # from a's last trace to b's first
    assert a["tiers"]["cupti"] == "0.400 s, 20 calls (1 stable, 1 iters)"
    assert main([str(run)]) == 0 and "| b | 3 | 8 | 1.00 |" in capsys.readouterr().out


def test_a_folder_that_is_no_run_is_named_and_exits_2(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2 and "not a run folder" in capsys.readouterr().err


def test_the_judges_own_laps_come_first_with_load_and_first_workload(tmp_path, capsys):
    run = write_run(tmp_path / "run", [trace("a", "2026-11-23T10:00:10+00:00", 0.3, "stable")])
    meta = json.loads((run / "run.json").read_text())
    meta["timeline"] = [{"step": "tensors", "seconds": 11.0},
                        {"step": "a", "seconds": 9.5, "load_s": [2.5], "workload_s": [3.0, 0.4, 0.6, 0.5],
                         "write_s": 0.05}]
    (run / "run.json").write_text(json.dumps(meta))
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "| a | 9.5 | 2.5 | 3.00 | 0.50 | 0.05 |" in out and "| total | 20.5 |" in out
    assert out.index("| step |") < out.index("| solution |")


def test_a_figure_without_its_tier_inside_is_read_by_its_key(tmp_path):
    """Traces written before figures repeated their tier (every run of 2026-11-23) still read."""
    old = trace("a", "2026-11-23T10:00:10+00:00", 0.3, "stable")
    del old["evaluation"]["performance"]["tiers"]["cupti"]["tier"]
    assert solution_rows(write_run(tmp_path / "run", [old]))[0]["tiers"]["cupti"] == "0.300 s, 20 calls (1 stable)"


def test_bad_lines_are_skipped_with_their_place_and_a_bad_file_is_named(tmp_path, capsys):
    import gzip

    run = write_run(tmp_path / "run", [trace("a", "2026-11-23T10:00:10+00:00", 0.3, "stable"), {"solution": "x"}])
    with open(run / "traces.jsonl", "a") as f:
        f.write("garbage\n")
    assert main([str(run)]) == 0
    captured = capsys.readouterr()
    assert f"{run / 'traces.jsonl'}:2: not a trace" in captured.err and f"{run / 'traces.jsonl'}:3: not a JSON" in captured.err
    assert "| a | 1 |" in captured.out
    whole = gzip.compress((run / "traces.jsonl").read_bytes())
    (run / "traces.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (run / "traces.jsonl").unlink()
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "run.json").write_text("[1]")
    for folder, said in ((run, "traces.jsonl.gz: cannot be read back (cut short)"), (tmp_path / "list", "not a JSON object"),
                         (run / "run.json", "pass the folder that holds run.json")):
        assert main([str(folder)]) == 2 and said in capsys.readouterr().err, folder
