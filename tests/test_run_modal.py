"""run_modal.py without Modal: the module imports, the image's package list
is pyproject's, and the remote function's body runs in process on the CPU."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_small_dataset
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


#: What every GPU run depends on (issue #18): each must be pinned to one version in the image.
GPU_DEPENDENCIES = ("torch", "triton", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu13", "flashinfer-python",
                    "cupti-python", "apache-tvm-ffi", "fla-core")


def test_the_image_installs_the_pinned_versions_of_pyproject(run_modal):
    from harness.records.environment import requirement_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = project["optional-dependencies"]["gpu"]
    packages = run_modal.image_packages()
    names = [requirement_name(p) for p in packages]
    assert len(names) == len(set(names))  # one requirement per distribution
    assert all(p in packages for p in pins)
    for dependency in GPU_DEPENDENCIES:
        (requirement,) = [p for p in packages if requirement_name(p) == dependency]
        assert re.fullmatch(rf"{re.escape(dependency)}==[0-9][0-9a-z.]*", requirement), requirement
    unpinned = {requirement_name(d) for d in project["dependencies"]} - set(GPU_DEPENDENCIES)
    assert unpinned <= set(names)  # the rest of the project's dependencies come along
    assert not any(n.startswith(("modal", "pytest")) for n in names)


def test_harness_argv(run_modal):
    assert run_modal.harness_argv("cuda-v4", "sweep", "cupti,events", "-n 1 --iters 50") == [
        "--algo", "cuda-v4", "--workloads", "sweep", "--tiers", "cupti,events", "-n", "1", "--iters", "50"]
    assert run_modal.harness_argv("all", "contest-v1") == ["--algo", "all", "--workloads", "contest-v1"]


def test_every_ratio_is_taken_inside_one_container(run_modal, tmp_path):
    def container(run_id, solution, us, reference_us, floor_us, hardware):
        """What a container returns: its solution and pt-reference on w0, and its own copy floor."""
        traces = [make_trace(solution, "w0", {"events": us})]
        if solution != "pt-reference":
            traces.append(make_trace("pt-reference", "w0", {"events": reference_us}))
        return {"run_id": run_id, "run": {"solutions": [t.solution for t in traces],
                                          "environment": {"hardware": hardware}},
                "traces": [t.model_dump(mode="json") for t in traces],
                "floors": [make_floor("w0", {"events": floor_us}).model_dump(mode="json")]}

    assert run_modal.container_algo("cuda-v4") == "cuda-v4,pt-reference"
    assert run_modal.container_algo("pt-reference") == "pt-reference"
    # two different machines: a slow one (floor 2, reference 100) and a fast one (floor 1, reference 50)
    results = [container("20260102T000000Z_GPU-X_sweep", "cuda-v4", 5.0, 100.0, 2.0, "GPU slow"),
               container("20260101T000000Z_GPU-X_sweep", "fla-recurrent", 5.0, 50.0, 1.0, "GPU fast")]
    run_id, run, traces, floors = run_modal.merge_results(results, ["cuda-v4", "fla-recurrent"], "all", "B200")
    assert run_id == "20260101T000000Z_GPU-X_sweep"
    assert run["solutions"] == ["cuda-v4", "fla-recurrent"] and run["modal"]["gpu"] == "B200"
    assert [lane["hardware"] for lane in run["lanes"]] == ["GPU slow", "GPU fast"]
    assert [t.solution for t in traces] == ["cuda-v4", "fla-recurrent"]  # pt-reference was not asked for
    assert sorted(f.tiers["events"].value_us for f in floors) == [1.0, 2.0]  # every container's floor
    cuda, fla = (t.evaluation.performance for t in traces)
    assert cuda.tiers["events"].x_copy_floor == pytest.approx(2.5) and fla.tiers["events"].x_copy_floor == 5.0
    assert cuda.speedup_factor == pytest.approx(20.0) and fla.speedup_factor == pytest.approx(10.0)
    assert run["headline_tiers"] == {"cuda-v4": ["events"], "fla-recurrent": ["events"]}
    assert not any("headline tiers differ" in n for n in run.get("notes", []))

    run_dir, frame = run_modal.write_run_files(tmp_path, run_id, run, traces, floors)
    assert sorted(p.name for p in run_dir.iterdir()) == ["floors.jsonl", "run.json", "skipped.jsonl", "summary.csv",
                                                         "traces.jsonl"]
    assert list(frame["solution"]) == ["copy-floor", "copy-floor", "cuda-v4", "fla-recurrent"]


def test_remote_body_runs_in_process_on_cpu(run_modal, tmp_path):
    """The Modal function's body against a two-workload dataset, pt-reference on the CPU,
    then the local side writes the run as run_local.py does."""
    dataset = str(write_small_dataset(tmp_path / "dataset"))
    out = run_modal.evaluate_remote("pt-reference", dataset, "", "--device cpu -n 1 --no-progress",
                                    results_dir=tmp_path / "container")
    traces = out["traces"]
    assert out["run"]["solutions"] == ["pt-reference"]
    assert out["run"]["environment"]["hardware"].startswith("CPU")
    reference = [t for t in traces if t["solution"] == "pt-reference"]
    assert len(reference) == 2 and all(t["evaluation"]["status"] == "PASSED" for t in reference)
    assert len(out["floors"]) == 2
    assert (tmp_path / "container" / "runs" / out["run_id"] / "traces.jsonl").exists()

    results_dir = tmp_path / "results"
    run_dir = run_modal.collect([out], ["pt-reference"], "pt-reference", "B200", results_dir)
    assert run_dir == results_dir / "runs" / out["run_id"]
    stored = load_run(run_dir)
    assert len(stored.traces) == 2 and len(stored.floors) == 2  # pt-reference and the copy floor
    assert all(t.evaluation.performance.speedup_factor == pytest.approx(1.0) for t in stored.traces)
    assert stored.meta["workloads"] == dataset
    assert set(pd.read_csv(run_dir / "summary.csv")["solution"]) == {"copy-floor", "pt-reference"}
    assert not (results_dir / "leaderboard.csv").exists()  # a run writes its run folder only, as run_local.py


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
    assert fake.calls == [("pt-reference", "sweep", "events", "-n 1"),
                          ("pt-compiled,pt-reference", "sweep", "events", "-n 1")]  # each its own reference
    err = capsys.readouterr().err
    assert "pt-reference: the container failed" in err and "out of memory" in err


def test_every_pin_is_recorded_and_a_run_names_the_versions_that_differ():
    from harness.records.environment import TRACKED_PACKAGES, pinned_versions, version_drift

    pins = pinned_versions()
    assert set(GPU_DEPENDENCIES) <= set(pins) <= set(TRACKED_PACKAGES)  # every trace records each pinned version
    assert version_drift({"torch": "2.11.0+cu130", "triton": "3.6.0"}, {"torch": "2.11.0", "triton": "3.6.0"}) == []
    assert version_drift({"torch": "2.13.0+cpu"}, {"torch": "2.11.0", "triton": "3.6.0"}) == [
        "torch 2.13.0+cpu (pinned 2.11.0)"]  # a package not installed is not drift


def test_containers_that_disagree_on_the_headline_tier_say_so(run_modal):
    def container(solution, tiers):
        traces = [make_trace(solution, "w0", tiers), make_trace("pt-reference", "w0", tiers)]
        return {"run_id": f"20260101T00000{len(tiers)}Z_X", "run": {"solutions": [solution, "pt-reference"]},
                "traces": [t.model_dump(mode="json") for t in traces], "floors": []}

    results = [container("cuda-v4", {"cupti": 2.0, "events": 4.0}), container("fla-recurrent", {"events": 4.0})]
    _, run, _, _ = run_modal.merge_results(results, ["cuda-v4", "fla-recurrent"], "all", "B200")
    assert run["headline_tiers"] == {"cuda-v4": ["cupti"], "fla-recurrent": ["events"]}
    assert any("headline tiers differ" in note for note in run["notes"])
