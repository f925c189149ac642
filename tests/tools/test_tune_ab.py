"""python -m tools.tune.ab (tools/tune/ab.py) on the CPU: the installed tables' runs against the
tuned ones', per batch size and per solution, and bad input in one line with status 2."""

from support.records import make_floor, make_trace, write_run

from tools.tune.ab import main


def results(root, rows, floor_us=1.8):
    """A results folder as ``run_local.py --results ROOT`` leaves it: one run (the store's writer)
    of ``(solution, B, CUPTI µs)`` rows and a copy floor at B = 1."""
    records = [make_trace(s, f"w{b}", {"cupti": us}, batch=b) for s, b, us in rows]
    write_run(root, "run", [*records, make_floor("w1", {"cupti": floor_us})], set_name="sweep")
    return root


def test_each_solution_gets_the_mean_of_new_over_old_and_a_verdict(tmp_path, capsys):
    old = [results(tmp_path / f"old-{i}", [("cuda-v4", 1, 2.0), ("cuda-v4", 8, 4.0 + i / 10), ("fla-recurrent", 1, 2.0)])
           for i in (0, 2)]  # cuda-v4 at B = 8: 4.0 and 4.2, median 4.1
    new = [results(tmp_path / "new-1", [("cuda-v4", 1, 1.9), ("cuda-v4", 8, 4.1), ("fla-recurrent", 1, 2.1),
                                        ("fla-recurrent", 8, 3.0)])]
    assert main([*map(str, old), "--", str(new[0] / "runs" / "run")]) == 0  # a results folder, or a run folder
    out = capsys.readouterr().out
    assert "| cuda-v4 | 8 | 4.000 | 4.200 | 4.100 | +0.000 |" in out
    # (1.9 / 2.0 + 4.1 / 4.1) / 2; noise: old's B = 8 spans 0.2 around 4.1 (2.44% half), B = 1 none: 1.22%
    assert "| cuda-v4 | 0.9750 | 2 | 1.22% | install |" in out
    assert "| fla-recurrent | 1.0500 | 1 | 0.00% | keep |" in out  # B = 8 only measured by one side
    assert "| copy-floor | 1.0000 | 1 | | the machine's drift (no table) |" in out


def test_a_gain_within_the_noise_is_a_tie_and_kept(tmp_path, capsys):
    """The H100 tune-ab of 2026-11-27 (results/tuning/20261127-H100-tune-ab): fla-recurrent read
    0.9994 where the copy floor drifted 1.0021; a gain smaller than the drift is no gain."""
    old = [results(tmp_path / "old", [("cuda-v4", 1, 2.0), ("fla-recurrent", 1, 2.0)], floor_us=1.80)]
    new = [results(tmp_path / "new", [("cuda-v4", 1, 1.99), ("fla-recurrent", 1, 1.96)], floor_us=1.81)]
    assert main([str(old[0]), "--", str(new[0])]) == 0
    out = capsys.readouterr().out
    assert "| cuda-v4 | 0.9950 | 1 | 0.56% | keep (a tie within the noise) |" in out  # drift 1.81 / 1.80
    assert "| fla-recurrent | 0.9800 | 1 | 0.56% | install |" in out
    assert "| copy-floor | 1.0056 | 1 | | the machine's drift (no table) |" in out


def test_a_bf16_state_is_read_against_the_drift_of_its_own_copy(tmp_path, capsys):
    """A bf16-state label's noise is the bf16 copy's drift, not the fp32 copy's (a copy of half the
    bytes drifts by its own amount): here the bf16 copy drifted 1%, the fp32 one not at all."""
    def side(name, us, bf16_floor_us):
        records = [make_trace("cuda-v4", "w64", {"cupti": us}, batch=64),
                   make_trace("cuda-v4[bfloat16-state]", "w64", {"cupti": us / 2}, batch=64),
                   make_floor("w64", {"cupti": 20.0}, batch=64),
                   make_floor("w64", {"cupti": bf16_floor_us}, batch=64, state_dtype="bfloat16")]
        write_run(tmp_path / name, "run", records, set_name="sweep")
        return str(tmp_path / name)

    assert main([side("old", 20.0, 10.0), "--", side("new", 19.84, 10.1)]) == 0
    out = capsys.readouterr().out
    assert "| cuda-v4 | 0.9920 | 1 | 0.00% | install |" in out
    assert "| cuda-v4[bfloat16-state] | 0.9920 | 1 | 1.00% | keep (a tie within the noise) |" in out


def test_bad_input_is_one_line_and_status_2(tmp_path, capsys):
    run = results(tmp_path / "old", [("cuda-v4", 1, 2.0)])
    for argv, words in ((["x"], "usage: OLD_RUN"), ([str(run), "--"], "each side needs at least one run folder"),
                        ([str(run), "--", str(tmp_path / "nothing")], "nothing: no run folder in it")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
