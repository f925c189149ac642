"""The worker conditions probe (tools/worker_conditions_probe.py) on the CPU: how it sets each condition
beside ``plain``, and its command line without a GPU; the timing itself needs a GPU."""

import pytest

from tools.worker_conditions_probe import (CONDITIONS, FOOTPRINT_BYTES, beside_bytes, main, pad_bytes, parse_conditions,
                                          summary)


def rows(condition: str, contest: list[float], cupti: list[float]) -> list[dict]:
    return [{"round": r, "condition": condition, "subject": "cuda-v4", "batch_size": 64, "contest_us": c,
             "contest_trials_us": [c] * 3, "cupti_us": u} for r, (c, u) in enumerate(zip(contest, cupti))]


def test_each_condition_reads_its_median_over_the_rounds_and_its_ratio_to_plain():
    measured = (rows("plain", [17.8, 17.9, 18.0], [17.9, 17.9, 17.8])
                + rows("second-context", [18.1, 18.2, 18.3], [18.0, 18.1, 18.1])
                + rows("footprint", [17.9, 17.7, 17.8], [17.9, 17.8, 17.9]))
    table = {e["condition"]: e for e in summary(measured)}
    assert set(table) == set(CONDITIONS)
    assert table["plain"]["contest_over_plain"] == 1.0
    assert table["second-context"]["contest_us"] == 18.2
    assert table["second-context"]["contest_over_plain"] == pytest.approx(18.2 / 17.9)
    assert table["footprint"]["cupti_over_plain"] == pytest.approx(17.9 / 17.9)
    assert table["second-context"]["contest_rounds_us"] == [18.1, 18.2, 18.3]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the error is for a machine without a GPU")
def test_without_a_gpu_it_says_so_and_exits_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_bad_batches_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--batches", "one"]) == 2
    assert "--batches" in capsys.readouterr().err


def test_a_condition_beside_a_process_names_the_gib_that_process_holds():
    assert beside_bytes("beside-4") == 4 * 2**30
    assert beside_bytes("beside-0.5") == 2**29
    assert beside_bytes("second-context") == 0  # the same holder, holding nothing
    assert beside_bytes("plain") is None and beside_bytes("footprint") is None
    for bad in ("beside-", "beside-x", "beside-0", "beside--2", "beside-4096"):
        assert beside_bytes(bad) is None, bad


def test_a_pad_names_the_mib_the_process_holds_first_and_footprint_is_a_pad():
    assert pad_bytes("pad-34") == 34 * 2**20
    assert pad_bytes("footprint") == FOOTPRINT_BYTES
    assert pad_bytes("plain") is None and pad_bytes("beside-4") is None
    for bad in ("pad-", "pad-0", "pad--1", "pad-two"):
        assert pad_bytes(bad) is None, bad


def test_the_conditions_are_measured_and_summarized_in_the_order_given():
    assert parse_conditions("plain, beside-3,footprint,pad-6") == ["plain", "beside-3", "footprint", "pad-6"]
    measured = rows("beside-12", [18.0] * 3, [18.0] * 3) + rows("plain", [17.5] * 3, [18.0] * 3)
    table = summary(measured)
    assert [e["condition"] for e in table] == ["beside-12", "plain"]
    assert table[0]["contest_over_plain"] == pytest.approx(18.0 / 17.5)


@pytest.mark.parametrize("text", ["plain,beside-x", "second-context,footprint", "plain,plain", "plain,elsewhere", "plain,pad-0"])
def test_bad_conditions_exit_2_naming_the_option(tmp_path, capsys, text):
    assert main(["--out", str(tmp_path), "--conditions", text]) == 2
    err = capsys.readouterr().err
    assert "--conditions" in err and "beside-<GiB>" in err and "pad-<MiB>" in err
    assert not list(tmp_path.iterdir())
