"""tools/parity_pool.py: the proposed yardstick's counts summed over recorded cross-checks (issue #29)."""

import json

import pytest

from tools.parity_pool import main, pool, verdict


def stored_run(folder, commit: str, harness_sync: list[float], plain_sync: list[float]):
    """A recorded cross-check of one point (copy, B = 1) with its sync and cupti figures, as tier_parity writes it."""
    figures = {"harness": {"copy B=1": {"sync": harness_sync, "cupti": [2.0]}},
               "plain": {"copy B=1": {"sync": plain_sync, "cupti": [2.0, 2.01]}}}
    folder.mkdir(parents=True)
    (folder / "tier_parity.json").write_text(json.dumps({"hardware": "a GPU", "date": "then", "git_commit": commit,
                                                         "command": "c", "plain_repeats": 2, "figures": figures}))
    return folder


def paired(harness_only: int, plain_only: int, both: int = 10, neither: int = 5) -> dict[str, int]:
    return {"harness_only": harness_only, "plain_only": plain_only, "both": both, "neither": neither}


def test_counts_are_summed_per_tier_over_the_runs_and_judged_on_the_sums():
    one = {"sync": {"within": 10, "yardstick": 10, "points": 20, "plain_self": {"within": 8, "points": 20},
                    "harness_self": None, "paired": paired(0, 5)}}
    two = {"sync": {"within": 12, "yardstick": 12, "points": 20, "plain_self": {"within": 13, "points": 20},
                    "harness_self": {"within": 15, "points": 20}, "paired": paired(4, 1)}}
    pooled = pool([one, two])
    assert pooled["sync"] == {"within": 22, "yardstick": 22, "points": 40, "plain_self": {"within": 21, "points": 40},
                              "harness_self": {"within": 15, "points": 20}, "paired": paired(4, 6, 20, 10)}
    assert verdict("sync", one["sync"]) == "missed" and verdict("sync", two["sync"]) == "met"  # p = 1/32, then 1.0
    assert verdict("sync", pooled["sync"]) == "met"  # 6 of 10 discordant points to the plain side: the sums decide


def test_recorded_runs_are_judged_again_and_pooled_into_a_report(tmp_path, capsys):
    first = stored_run(tmp_path / "first", "aaa", [20.0], [20.0, 21.0])   # within; the plain loop agrees with itself
    second = stored_run(tmp_path / "second", "bbb", [40.0], [20.0, 30.0])  # a miss; the plain loop too (0.67)
    assert main(["--out", str(tmp_path / "pool"), str(first), str(second / "tier_parity.json")]) == 0
    report = json.loads((tmp_path / "pool" / "parity_pool.json").read_text())
    assert [run["git_commit"] for run in report["runs"]] == ["aaa", "bbb"]
    assert report["pooled"]["sync"]["within"] == 1 and report["pooled"]["sync"]["points"] == 2
    assert report["pooled"]["sync"]["plain_self"] == {"within": 1, "points": 2}
    assert report["verdicts"] == {"cupti": "met", "sync": "met"}
    text = (tmp_path / "pool" / "parity_pool.md").read_text()
    assert report["pooled"]["sync"]["paired"] == {"harness_only": 0, "plain_only": 0, "both": 1, "neither": 1}
    assert ("| **pooled** | | | 1 of 2 | 1 | 1 of 2 | – | harness only 0, plain only 0 (p = 1.00) | **met** |" in text
            and text in capsys.readouterr().out)


@pytest.mark.parametrize("content", [None, "{not json", '{"rows": []}', b"\x1f\x8b\x08\x00cut",
                                     '{"figures": {"harness": {"1": 5}, "plain": {"1": 5}}}',
                                     '{"figures": {"harness": {"a": {"cupti": 5}}, "plain": {"a": {}}}}',
                                     '{"figures": {"harness": {"1": {"cupti": [5]}}, "plain": {}}}'])
def test_a_run_that_is_no_cross_check_is_a_clear_error(tmp_path, capsys, content):
    run = tmp_path / ("run.json.gz" if isinstance(content, bytes) else "run.json")
    if isinstance(content, bytes):  # a .gz cut short
        run.write_bytes(content)
    elif content is not None:
        run.write_text(content)
    assert main(["--out", str(tmp_path / "pool"), str(run)]) == 2
    err = capsys.readouterr().err
    assert str(run) in err and "Traceback" not in err
    assert not (tmp_path / "pool").exists()  # nothing written for a run it could not read
