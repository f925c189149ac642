"""The reference rule of harness/records/score.py (``score --rule reference``, the starter kit's first):
mean over the set's workloads of pt-reference µs over the solution's, references from any run of the same
set on the same GPU. The final contest's rule: test_score_final.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.records.score import reference_scores
from harness.records.store import StoredRun
from support.records import make_trace

WORKLOADS = {"w0": 1, "w1": 4}  # uuid -> batch size


def run(name: str, traces, set_name: str = "contest-v2") -> StoredRun:
    return StoredRun(run_dir=Path(name), meta={"workloads": set_name}, traces=traces)


def test_the_score_counts_every_workload_and_reads_the_references_noise():
    runs = [run("20260101T000000Z_a", [make_trace("pt-reference", "w0", {"cupti": 100.0}),
                                       make_trace("pt-reference", "w1", {"cupti": 200.0})]),
            run("20260102T000000Z_b", [make_trace("pt-reference", "w0", {"cupti": 120.0}),
                                       make_trace("pt-reference", "w1", {"cupti": 180.0}),
                                       make_trace("x", "w0", {"cupti": 10.0}),
                                       make_trace("x", "w1", {}, status="INCORRECT_NUMERICAL")])]
    (score,) = [s for s in reference_scores(runs, "contest-v2", WORKLOADS) if s.solution == "x"]
    assert score.tier == "cupti" and (score.passed, score.workloads) == (1, 2)
    assert score.score == pytest.approx(110.0 / 10.0 / 2)  # the failed workload counts 0
    assert score.by_batch == pytest.approx({1: 5.5})
    assert score.reference_runs == 2
    assert score.reference_spread == pytest.approx(((20 / 110) + (20 / 190)) / 2)
    assert score.score_range == pytest.approx((100 / 10 / 2, 120 / 10 / 2))


def test_the_contest_tier_is_read_wherever_the_runs_hold_it():
    runs = [run("20260101T000000Z_a", [make_trace("pt-reference", w, {"cupti": 100.0, "contest": 110.0})
                                       for w in WORKLOADS]
                + [make_trace("x", w, {"cupti": 10.0, "contest": 11.0 * (1 + (w == "w1"))}) for w in WORKLOADS])]
    (score,) = [s for s in reference_scores(runs, "contest-v2", WORKLOADS) if s.solution == "x"]
    assert score.tier == "contest" and score.score == pytest.approx((10.0 + 5.0) / 2)
    (cupti,) = [s for s in reference_scores(runs, "contest-v2", WORKLOADS, tier="cupti") if s.solution == "x"]
    assert cupti.score == pytest.approx(10.0)


def test_gpus_never_mix_and_the_newest_run_of_a_solution_counts():
    other = "NVIDIA H200"
    runs = [run("20260101T000000Z_a", [make_trace("pt-reference", w, {"cupti": 100.0}) for w in WORKLOADS]
                + [make_trace("x", w, {"cupti": 50.0}) for w in WORKLOADS]),
            run("20260102T000000Z_b", [make_trace("x", w, {"cupti": 25.0}) for w in WORKLOADS]),
            run("20260103T000000Z_c", [make_trace("x", w, {"cupti": 1.0}, hardware=other) for w in WORKLOADS]),
            run("20260104T000000Z_d", [make_trace("x", w, {"cupti": 1.0}) for w in WORKLOADS], set_name="sweep")]
    scores = {(s.hardware, s.solution): s for s in reference_scores(runs, "contest-v2", WORKLOADS)}
    x = next(s for (hardware, name), s in scores.items() if name == "x" and hardware != other)
    assert x.score == pytest.approx(4.0)  # the newer run (25 µs), the same GPU's reference, not the sweep run
    assert x.by_batch == pytest.approx({1: 2.0, 4: 2.0}) and x.reference_spread is None
    assert scores[(other, "x")].score == 0.0  # no reference on that GPU: nothing to divide by


def test_score_on_the_command_line_reads_the_committed_runs_and_names_a_bad_folder(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    done = subprocess.run([sys.executable, "-m", "harness", "score"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "cuda-v4" in done.stdout and "cutedsl-bf16[bfloat16-state]" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "harness", "score", "--results", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "holds no runs/ folder" in bad.stderr and "Traceback" not in bad.stderr
