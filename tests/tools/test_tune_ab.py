"""python -m tools.tune.ab (tools/tune/ab.py) on the CPU: the installed tables' runs against the
tuned ones', per batch size and per solution, and bad input in one line with status 2."""

import gzip

from tools.tune.ab import main

HEADER = "solution,workload,batch_size,status,cupti_value_us\n"


def run_folder(root, name, rows, compressed=False):
    """A run folder as ``--results ROOT`` leaves it: ROOT/runs/<name>/summary.csv (or .csv.gz)."""
    folder = root / "runs" / name
    folder.mkdir(parents=True)
    text = HEADER + "".join(f"{s},w{b},{b},PASSED,{us}\n" for s, b, us in rows)
    if compressed:
        (folder / "summary.csv.gz").write_bytes(gzip.compress(text.encode()))
    else:
        (folder / "summary.csv").write_text(text)
    return root


def test_each_solution_gets_the_mean_of_new_over_old_and_a_verdict(tmp_path, capsys):
    old = [run_folder(tmp_path / f"old-{i}", "r", [("cuda-v4", 1, 2.0), ("cuda-v4", 8, 4.0 + i / 10),
                                                   ("fla-recurrent", 1, 2.0), ("copy-floor", 1, 1.8)])
           for i in (0, 2)]  # cuda-v4 at B = 8: 4.0 and 4.2, median 4.1
    new = [run_folder(tmp_path / "new-1", "r", [("cuda-v4", 1, 1.9), ("cuda-v4", 8, 4.1), ("fla-recurrent", 1, 2.1),
                                                ("fla-recurrent", 8, 3.0), ("copy-floor", 1, 1.8)], compressed=True)]
    assert main([*map(str, old), "--", *map(str, new)]) == 0
    out = capsys.readouterr().out
    assert "| cuda-v4 | 8 | 4.000 | 4.200 | 4.100 | +0.000 |" in out
    assert "| cuda-v4 | 0.9750 | 2 | install |" in out  # (1.9 / 2.0 + 4.1 / 4.1) / 2
    assert "| fla-recurrent | 1.0500 | 1 | keep |" in out  # B = 8 only measured by one side
    assert "| copy-floor | 1.0000 | 1 | the machine's drift (no table) |" in out


def test_bad_input_is_one_line_and_status_2(tmp_path, capsys):
    run = run_folder(tmp_path / "old", "r", [("cuda-v4", 1, 2.0)])
    for argv, words in ((["x"], "usage: OLD_RUN"), ([str(run), "--"], "each side needs at least one run folder"),
                        ([str(run), "--", str(tmp_path / "nothing")], "nothing: no summary.csv of a run in it")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
