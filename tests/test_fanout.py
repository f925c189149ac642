"""One run over several devices (harness/fanout.py): the scheduler, each lane's command line,
the merge, and two real lanes on the CPU standing in for two GPUs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import FIXTURE_SOLUTIONS, REPO, write_small_dataset
from harness.cli import build_parser
from harness.fanout import LaneRun, expected_costs, fan_out, lane_argv, merge_lanes, schedule, share_out
from harness.records.store import load_run
from support.records import make_floor, make_trace


def test_the_longest_jobs_go_first_onto_the_least_loaded_lane():
    lanes = schedule({"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 1.0}, 2)
    loads = sorted(sum({"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 1.0}[n] for n in lane) for lane in lanes)
    assert loads == [8.0, 8.0] and sorted(n for lane in lanes for n in lane) == list("abcde")
    assert schedule({"a": 1.0}, 4) == [["a"]]  # no empty lanes


def test_costs_come_from_the_newest_stored_run_of_the_set():
    run = SimpleNamespace(name="20260101T000000Z_x", meta={"workloads": "sweep"}, traces=[
        make_trace("slow", "w0", {"events": 1.0}), make_trace("slow", "w1", {"events": 1.0})])
    run.traces[1].evaluation.timestamp = "2026-01-01T00:00:10+00:00"  # 10 s after the first
    costs = expected_costs(["slow", "new"], [run], "sweep")
    assert costs == {"slow": pytest.approx(20.0), "new": pytest.approx(20.0)}  # unknown: the median of the known
    assert expected_costs(["x"], [run], "contest-v2") == {"x": 1.0}  # another set tells nothing


def test_a_lane_keeps_the_users_options_but_its_own_solutions_device_and_folder(tmp_path):
    parser = build_parser()
    args = parser.parse_args(["--algo", "all", "--gpus", "all", "--workloads", "sweep", "-n", "2", "--tiers",
                              "cupti", "-v", "--results", "elsewhere"])
    argv = lane_argv(args, parser, ["cuda-v4"], "cuda:1", tmp_path)
    assert argv[2:9] == ["--algo", "cuda-v4,pt-reference", "--device", "cuda:1", "--results", str(tmp_path),
                         "--no-progress"]
    rest = " ".join(argv[9:])
    assert "--workloads sweep" in rest and "--trials 2" in rest and "--tiers cupti" in rest
    assert "--gpus" not in rest and "--verbose" not in rest and "elsewhere" not in rest


def test_the_merge_takes_every_ratio_on_its_own_lane():
    def lane(names, us, reference_us, floor_us, device):
        traces = [make_trace(n, "w0", {"events": us}) for n in names] + [
            make_trace("pt-reference", "w0", {"events": reference_us})]
        return LaneRun(names, f"2026010{len(names)}T000000Z_{device}",
                       {"solutions": [*names, "pt-reference"], "config": {"device": device}}, traces,
                       [make_floor("w0", {"events": floor_us})])

    run_id, meta, traces, floors = merge_lanes([lane(["a"], 5.0, 100.0, 2.0, "cuda:0"),
                                                lane(["b", "c"], 5.0, 50.0, 1.0, "cuda:1")], "all")
    assert [t.solution for t in traces] == ["a", "b", "c"] and len(floors) == 2
    a, b, _ = (t.evaluation.performance for t in traces)
    assert (a.speedup_factor, b.speedup_factor) == (pytest.approx(20.0), pytest.approx(10.0))
    assert (a.tiers["events"].x_copy_floor, b.tiers["events"].x_copy_floor) == (pytest.approx(2.5), 5.0)
    assert [lane["device"] for lane in meta["lanes"]] == ["cuda:0", "cuda:1"] and meta["solutions"] == ["a", "b", "c"]


def test_two_lanes_on_the_cpu_merge_into_one_run_folder(tmp_path):
    dataset = write_small_dataset(tmp_path / "dataset")
    parser = build_parser()
    args = parser.parse_args(["--algo", "good,slow", "--workloads", str(dataset), "--results", str(tmp_path / "r"),
                              "--solutions", str(FIXTURE_SOLUTIONS), "-n", "1", "--iters", "5", "--budget", "0.2",
                              "--device", "cpu"])
    args.device = None  # a lane sets its own
    run_dir, codes = fan_out(args, parser, ["good", "slow"], ["cpu", "cpu"], [])
    assert codes == [0, 0]
    run = load_run(run_dir)
    assert sorted({t.solution for t in run.traces}) == ["good", "slow"]
    assert all(t.evaluation.status.value == "PASSED" and t.evaluation.environment.device == "cpu"
               for t in run.traces)
    assert len(run.meta["lanes"]) == 2 and len(run.floors) == 4  # each lane measured its own floors


def test_a_lane_that_fails_is_said_and_the_others_rows_are_kept(tmp_path, monkeypatch):
    from harness import fanout
    from harness.records.store import RunWriter

    def lanes(commands, logs):  # lane 0 writes its run; lane 1 dies before its first write
        results = Path(commands[0][commands[0].index("--results") + 1])
        RunWriter(results / "runs" / "20260101T000000Z_x").write_run(
            {"solutions": ["good"], "config": {"device": "cpu"}}, [make_floor("w0", {"wallclock": 1.0})],
            [make_trace("good", "w0", {"wallclock": 2.0})])
        return [0, 1]

    monkeypatch.setattr(fanout, "run_lanes", lanes)
    parser = build_parser()
    args = parser.parse_args(["--algo", "good,slow", "--results", str(tmp_path / "r"),
                              "--solutions", str(FIXTURE_SOLUTIONS)])
    run_dir, codes = fan_out(args, parser, ["good", "slow"], ["cpu", "cuda:1"], [])
    assert codes == [0, 1]
    run = load_run(run_dir)
    assert {t.solution for t in run.traces} == {"good"}
    lost = [n for n in run.meta["notes"] if "cuda:1" in n]
    assert len(lost) == 1 and "(slow)" in lost[0] and "its solutions have no rows" in lost[0] and "log" in lost[0]


def test_pt_reference_runs_on_every_lane_so_it_weighs_on_none():
    shares = share_out(["pt-reference", "a", "b"], {"pt-reference": 400.0, "a": 10.0, "b": 10.0}, 2, True)
    assert sorted(map(sorted, shares)) == [["a", "pt-reference"], ["b"]]  # a and b apart; its rows kept once
    assert share_out(["a"], {"a": 1.0}, 2, False) == [["a"]]


def test_gpus_without_a_gpu_is_a_clear_error():
    import os

    hidden = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU, also on a GPU machine
    done = subprocess.run([sys.executable, "run_local.py", "--gpus", "all"], cwd=REPO, capture_output=True, text=True,
                          env=hidden)
    assert done.returncode == 2 and "PyTorch sees no CUDA GPU" in done.stderr and "Traceback" not in done.stderr


def test_tampering_seen_by_several_lanes_is_said_to_implicate_bystanders():
    tampered = "x changed files it must not touch: /repo/harness/judge/check.py; ..."
    lanes = [LaneRun(["a"], "20260101T000000Z_a", {"notes": [tampered]}), LaneRun(["b"], "20260101T000001Z_b", {})]
    _, meta, _, _ = merge_lanes(lanes, "all")
    assert any("re-run the solutions marked as tampering alone" in n for n in meta["notes"])


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="a lane on a second GPU needs two")
def test_a_lane_on_the_second_gpu_times_its_floor_and_solutions_there(tmp_path):
    """The lane of cuda:1 once died in its copy floor: CUPTI's flush waited on cuda:0 (a bare
    synchronize) and found cuda:1's copy records still open (2026-11-26, two H200s)."""
    dataset = write_small_dataset(tmp_path / "dataset")
    done = subprocess.run([sys.executable, "run_local.py", "--algo", "good", "--solutions", str(FIXTURE_SOLUTIONS),
                           "--workloads", str(dataset), "--device", "cuda:1", "--tiers", "cupti", "-n", "1",
                           "--results", str(tmp_path / "r"), "--no-progress"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = load_run(sorted((tmp_path / "r" / "runs").glob("*"))[-1])
    assert run.floors and all(t.evaluation.status.value == "PASSED" for t in run.traces)
    assert {t.evaluation.environment.device for t in run.traces} == {"cuda:1"}
