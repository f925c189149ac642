"""run_modal.py without Modal: the module imports, the image's package list
is pyproject's, and the remote function's body runs in process on the CPU."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from test_leaderboard import make_floor, make_trace

from harness.records.store import load_run

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_modal(monkeypatch):
    """run_modal imported fresh with ``import modal`` failing, whether or not modal is installed."""
    monkeypatch.setitem(sys.modules, "modal", None)  # makes `import modal` raise ImportError
    spec = importlib.util.spec_from_file_location("run_modal_without_modal", REPO / "run_modal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imports_without_modal(run_modal, capsys):
    assert run_modal.modal is None
    assert not hasattr(run_modal, "app")
    assert run_modal.standalone_main() == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'gdn-decode-bench[modal]'" in err and "modal token new" in err


def test_image_packages_are_pyprojects(run_modal):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = ("triton", "cuda", "cutedsl", "flashinfer", "fla", "cupti")
    expected = list(project["dependencies"]) + [p for e in extras for p in project["optional-dependencies"][e]]
    packages = run_modal.image_packages()
    assert packages == list(dict.fromkeys(expected))
    assert len(packages) == len(set(packages))
    assert not any(p.startswith(("modal", "pytest")) for p in packages)


def test_harness_argv(run_modal):
    assert run_modal.harness_argv("cuda-v4", "sweep", "cupti,events", "-n 1 --iters 50") == [
        "--algo", "cuda-v4", "--workloads", "sweep", "--tiers", "cupti,events", "-n", "1", "--iters", "50"]
    assert run_modal.harness_argv("all", "contest-v1") == ["--algo", "all", "--workloads", "contest-v1"]


def test_merge_fills_speedups_across_containers(run_modal, tmp_path):
    def container(run_id, solution, us, floor_us):
        return {"run_id": run_id, "run": {"solutions": [solution], "environment": {"hardware": "GPU X"}},
                "traces": [make_trace(solution, "w0", {"events": us}).model_dump(mode="json")],
                "floors": [make_floor("w0", {"events": floor_us}).model_dump(mode="json")]}

    results = [container("20260102T000000Z_GPU-X_sweep", "cuda-v4", 5.0, 2.0),
               container("20260101T000000Z_GPU-X_sweep", "pt-reference", 50.0, 1.0)]
    run_id, run, traces, floors = run_modal.merge_results(results, "all", "B200")
    assert run_id == "20260101T000000Z_GPU-X_sweep"
    assert run["solutions"] == ["cuda-v4", "pt-reference"] and run["modal"]["gpu"] == "B200"
    assert [t.solution for t in traces] == ["cuda-v4", "pt-reference"]
    # the floors come from the container that ran pt-reference
    assert [f.tiers["events"].value_us for f in floors] == [1.0]
    cuda = traces[0].evaluation.performance
    assert cuda.tiers["events"].speedup_vs_reference == pytest.approx(10.0)
    assert cuda.tiers["events"].x_copy_floor == pytest.approx(5.0)
    assert cuda.speedup_factor == pytest.approx(10.0) and cuda.reference_latency_ms == pytest.approx(0.05)

    run_dir, frame = run_modal.write_run_files(tmp_path, run_id, run, traces, floors)
    assert sorted(p.name for p in run_dir.iterdir()) == ["floors.jsonl", "run.json", "skipped.jsonl", "summary.csv",
                                                         "traces.jsonl"]
    assert list(frame["solution"]) == ["copy-floor", "cuda-v4", "pt-reference"]


def test_remote_body_runs_in_process_on_cpu(run_modal, tmp_path):
    """The Modal function's body against contest-v1, pt-reference on the CPU,
    then the local side writes the run as run_local.py does."""
    out = run_modal.evaluate_remote("pt-reference", "contest-v1", "", "--device cpu -n 1 --no-progress",
                                    results_dir=tmp_path / "container")
    traces = out["traces"]
    assert out["run"]["solutions"] == ["pt-reference"]
    assert out["run"]["environment"]["hardware"].startswith("CPU")
    reference = [t for t in traces if t["solution"] == "pt-reference"]
    assert len(reference) == 20 and all(t["evaluation"]["status"] == "PASSED" for t in reference)
    assert len(out["floors"]) == 20
    assert (tmp_path / "container" / "runs" / out["run_id"] / "traces.jsonl").exists()

    results_dir = tmp_path / "results"
    run_dir = run_modal.collect([out], ["pt-reference"], "pt-reference", "B200", results_dir)
    assert run_dir == results_dir / "runs" / out["run_id"]
    stored = load_run(run_dir)
    assert len(stored.traces) == 20 and len(stored.floors) == 20  # pt-reference and the copy floor
    assert all(t.evaluation.performance.speedup_factor == pytest.approx(1.0) for t in stored.traces)
    assert stored.meta["workloads"] == "contest-v1"
    assert set(pd.read_csv(run_dir / "summary.csv")["solution"]) == {"copy-floor", "pt-reference"}
    board = pd.read_csv(results_dir / "leaderboard.csv")
    assert list(board["solution"]) == ["pt-reference"] and board["score"].iloc[0] == pytest.approx(1.0)


class FakeFunction:
    """Stands in for the Modal function: records calls, returns canned outputs."""

    def __init__(self, outputs):
        self.outputs, self.calls, self.gpu = outputs, [], None

    def with_options(self, gpu):
        self.gpu = gpu
        return self

    def starmap(self, inputs, return_exceptions=False):
        self.calls = list(inputs)
        return self.outputs


def test_run_on_modal_checks_arguments_before_starting(run_modal, tmp_path, capsys):
    fake = FakeFunction([])
    assert run_modal.run_on_modal(fake, "no-such-solution", "contest-v1", "", "B200", "", tmp_path) == 2
    assert run_modal.run_on_modal(fake, "pt-reference", "contest-v1", "bogus", "B200", "", tmp_path) == 2
    assert fake.calls == []
    assert "no-such-solution" in capsys.readouterr().err


def test_run_on_modal_one_container_per_solution(run_modal, tmp_path, capsys):
    fake = FakeFunction([RuntimeError("image build failed"), RuntimeError("out of memory")])
    code = run_modal.run_on_modal(fake, "pt-compiled,pt-reference", "sweep", "events", "H100", "-n 1", tmp_path)
    assert code == 1  # no container returned anything
    assert fake.gpu == "H100"
    assert fake.calls == [("pt-reference", "sweep", "events", "-n 1"), ("pt-compiled", "sweep", "events", "-n 1")]
    err = capsys.readouterr().err
    assert "pt-reference: the container failed" in err and "out of memory" in err
