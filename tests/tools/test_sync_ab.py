"""tools/sync_ab.py: the paired sync-tier A/B, from run folders written here (no GPU)."""

import gzip

from support.records import make_trace, write_run as write_run_folder

from tools import sync_ab


def write_run(root, name, rows):
    """A run folder as run_local.py leaves it, written by the store's writer: one trace per (sync µs,
    speed µs, trial speeds µs) row; a None row is a trace without performance (a failed workload)."""
    traces = []
    for index, row in enumerate(rows):
        if row is None:
            traces.append(make_trace("fla-recurrent", f"w{index}", {}, status="RUNTIME_ERROR"))
            continue
        trace = make_trace("fla-recurrent", f"w{index}", {"sync": row[0]})
        sync = trace.evaluation.performance.tiers["sync"]
        sync.host_probe_us, sync.host_probe_trials_us = row[1], row[2]
        traces.append(trace)
    write_run_folder(root / name, "20261127T000000Z_GPU-contest-v1", traces)


def test_pairs_are_compared_side_a_over_side_b_and_slow_trials_counted_by_the_cross_checks_rule(tmp_path):
    write_run(tmp_path, "this-1", [(50.0, 7.0, [6.0, 7.0, 9.0]), (54.0, 7.2, [6.5, 7.5, 7.0]), None])
    write_run(tmp_path, "tree-1", [(100.0, 12.0, [12.0, 13.0, 12.5]), (96.0, 12.5, [12.0, 12.0, 7.0])])
    write_run(tmp_path, "this-2", [(80.0, 12.0, [12.0, 12.0, 12.0])])
    write_run(tmp_path, "tree-2", [(64.0, 7.0, [6.0, 7.0, 7.0])])
    write_run(tmp_path, "this-3", [(50.0, 7.0, [6.0])])
    write_run(tmp_path, "tree-3", [None])  # a run with no sync figure: its pair is left out
    pairs = sync_ab.pairs_in(tmp_path, ("this", "tree"))
    assert list(pairs) == [1, 2]
    text = sync_ab.report(pairs, ("this", "tree"))
    # the line: 1.3 x the fastest trial reading (6.0) = 7.8
    assert "above 7.80 µs" in text
    assert "| 1 | 52.0 | 98.0 | 0.531 | 7.10 | 12.25 | 1 of 6 | 5 of 6 |" in text
    assert "| 2 | 80.0 | 64.0 | 1.250 | 12.00 | 7.00 | 3 of 3 | 0 of 3 |" in text
    assert "lower in 1 of 2 pairs; median this / tree 0.890" in text
    assert "slow less often in 1 of 2 (0 ties); pooled: this 4 of 9, tree 5 of 9" in text
    assert "under the line: this 1, tree 1 of 2" in text


def test_the_command_writes_its_report_and_refuses_what_it_cannot_compare(tmp_path, capsys):
    assert sync_ab.main([str(tmp_path / "missing")]) == 2
    assert sync_ab.main([str(tmp_path)]) == 2  # no pair
    write_run(tmp_path, "a-1", [(50.0, 7.0, [6.0])])
    write_run(tmp_path, "b-1", [(60.0, 7.0, [6.0])])
    b_traces = next((tmp_path / "b-1").glob("runs/*/traces.jsonl"))  # kept compressed, as old evidence is
    b_traces.with_name("traces.jsonl.gz").write_bytes(gzip.compress(b_traces.read_bytes()))
    b_traces.unlink()
    assert sync_ab.main([str(tmp_path), "--sides", "a"]) == 2
    assert sync_ab.main([str(tmp_path), "--sides", "a,b"]) == 0
    assert "| 1 | 50.0 | 60.0 | 0.833 |" in (tmp_path / "sync_ab.md").read_text()
    assert "error" in capsys.readouterr().err
