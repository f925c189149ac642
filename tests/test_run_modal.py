"""run_modal.py without Modal: the module imports, the image's package list
is pyproject's, the remote functions' bodies run in process on the CPU, and the
Volume (harness/volume.py: cache root, uploads and their keys) is a local folder."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_small_dataset
from support.records import make_floor, make_trace
from support.tune import FakeTimer, tiny_fla  # noqa: F401  (tiny_fla: a fixture, used by name)

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


@pytest.mark.parametrize("options, said", [
    ('"unterminated', "No closing quotation"),
    ("--algo pt-compiled", "--options sets --algo"),  # argparse keeps the last: the local check would be moot
    ("--alg pt-compiled", "--options sets --algo"),  # an abbreviation argparse takes too
    ("--tiers bogus", "--options sets --tiers"),
    ("--workloads /no/such/folder", "--options sets --workloads"),
    ("--gpus all", "--options sets --gpus"),
    ("--results /tmp/elsewhere", "--options sets --results"),
])
def test_options_that_cannot_be_a_containers_exit_2_before_any_container(run_modal, tmp_path, capsys, options, said):
    fake = FakeFunction([])
    assert run_modal.run_on_modal(fake, "pt-reference", "contest-v1", "", "B200", options, tmp_path) == 2
    assert fake.calls == [] and said in capsys.readouterr().err


def test_two_entries_of_one_file_name_both_travel(tmp_path):
    from harness.volume import solutions_upload

    for folder, text in (("a", '{"name": "sol-a"}'), ("b", '{"name": "sol-b"}')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "entry.json").write_text(text)
    upload = solutions_upload([tmp_path / "a" / "entry.json", tmp_path / "b" / "entry.json"])
    assert upload.files == {"entry.json": b'{"name": "sol-a"}', "again-2/entry.json": b'{"name": "sol-b"}'}


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


# ------------------------------------------------------------------ the Volume (issue #18)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links not followed into): relative path -> content or link target."""
    return {p.relative_to(root).as_posix(): (str(p.readlink()).encode() if p.is_symlink() else p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def test_the_cache_root_is_pointed_into_the_volume(monkeypatch):
    from harness.judge.build import cache_root
    from harness.paths import cache_dir
    from harness.volume import cache_env

    env = cache_env("/cache")
    assert env == {"GDN_BENCH_CACHE": "/cache/gdn-bench"}  # only the judge's own cache: no worker-side JIT cache
    monkeypatch.setenv("GDN_BENCH_CACHE", env["GDN_BENCH_CACHE"])
    assert cache_dir() == Path("/cache/gdn-bench") and cache_root() == Path("/cache/gdn-bench/cuda")


def test_a_judging_container_reads_the_volume_and_writes_only_its_own_copy(tmp_path):
    from harness.volume import link_cache

    volume = tmp_path / "volume"
    for name in ("cuda/cuda-v4-0123/cuda-v4.so", "cuda/cuda-v4-0123/lock", "cuda/cuda-v4-0123/build.json",
                 "dataset/gdn/contest-v1/u0.safetensors", "dataset/gdn/contest-v1/u0.safetensors.verified",
                 "bank/v1/layer0_seq00.tmp"):
        (volume / name).parent.mkdir(parents=True, exist_ok=True)
        (volume / name).write_text(name)
    before = tree(volume)
    local = tmp_path / "local"
    assert link_cache(volume, local) == 3
    assert (local / "cuda/cuda-v4-0123/cuda-v4.so").read_text() == "cuda/cuda-v4-0123/cuda-v4.so"
    assert (local / "cuda/cuda-v4-0123/cuda-v4.so").is_symlink()
    # what a judge writes in place (a build lock, a check stamp) is not a link into the Volume
    assert not (local / "cuda/cuda-v4-0123/lock").exists()
    assert not (local / "dataset/gdn/contest-v1/u0.safetensors.verified").exists()
    (local / "cuda/cuda-v4-0123/lock").write_text("mine")
    (local / "dataset/gdn/contest-v1/u0.safetensors").unlink()  # a judge forgetting a changed tensor file
    assert tree(volume) == before
    assert link_cache(tmp_path / "empty-volume", tmp_path / "local2") == 0 and (tmp_path / "local2").is_dir()


def write_blob_dataset(root: Path) -> Path:
    """The small dataset whose first workload reads ``A_log`` from a safetensors file."""
    import json

    import torch
    from safetensors.torch import save_file

    write_small_dataset(root)
    (root / "blob" / "gdn").mkdir(parents=True)
    save_file({"A_log": torch.zeros(8)}, root / "blob" / "gdn" / "a.safetensors")
    jsonl = root / "workloads" / "gdn" / "gdn_decode_qk4_v8_d128_k_last.jsonl"
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    lines[0]["inputs"]["A_log"] = {"type": "safetensors", "path": "blob/gdn/a.safetensors", "tensor_key": "A_log"}
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def test_a_local_dataset_is_uploaded_under_the_hash_of_the_files_it_uses(tmp_path):
    from harness.errors import HarnessInputError
    from harness.volume import dataset_upload

    assert dataset_upload("contest-v1") is None  # the image has our sets
    root = write_blob_dataset(tmp_path / "dataset")
    (root / "traces").mkdir()
    (root / "traces" / "other.json").write_text("{}")  # not read by a run: not carried
    upload = dataset_upload(str(root))
    assert sorted(upload.files) == ["blob/gdn/a.safetensors", "definitions/gdn/gdn_decode_qk4_v8_d128_k_last.json",
                                    "workloads/gdn/gdn_decode_qk4_v8_d128_k_last.jsonl"]
    assert re.fullmatch(r"uploads/dataset/[0-9a-f]{16}", upload.volume_path)
    assert dataset_upload(str(root)).key == upload.key  # same files, same key: uploaded once
    (root / "traces" / "other.json").write_text("[]")
    assert dataset_upload(str(root)).key == upload.key
    (root / "blob" / "gdn" / "a.safetensors").write_bytes(b"changed")
    assert dataset_upload(str(root)).key != upload.key

    (root / "blob" / "gdn" / "a.safetensors").unlink()
    with pytest.raises(HarnessInputError, match=r"a\.safetensors: tensor file not found \(input 'A_log'"):
        dataset_upload(str(root))
    with pytest.raises(HarnessInputError, match="neither a workload set"):
        dataset_upload(str(tmp_path / "no-such-folder"))


def test_container_arguments_name_the_uploaded_folders(small_dataset, tmp_path):
    from harness.cli import build_parser
    from harness.volume import container_args, dataset_upload, solutions_upload

    assert container_args("contest-v1", "-n 1", None, None, "/cache-ro") == ("contest-v1", "-n 1")
    dataset = dataset_upload(str(small_dataset))
    solutions = solutions_upload([REPO / "solutions" / "pt-reference"])
    assert all(name.startswith("pt-reference/") for name in solutions.files)
    assert "pt-reference/solution.toml" in solutions.files
    workloads, options = container_args(str(small_dataset), f"-n 1 --solutions={tmp_path}", dataset, solutions,
                                        "/cache-ro")
    assert workloads == f"/cache-ro/uploads/dataset/{dataset.key}"
    args = build_parser().parse_args(["--workloads", workloads, *shlex.split(options)])
    assert args.solutions == Path(f"/cache-ro/uploads/solutions/{solutions.key}") and args.trials == 1


def test_a_changed_upload_is_refused(small_dataset, tmp_path):
    from harness.volume import dataset_upload, verify_upload

    upload = dataset_upload(str(small_dataset))
    volume = tmp_path / "volume"
    FakeVolume(volume).put(upload)
    verify_upload(volume, upload.volume_path)
    (volume / upload.volume_path / "workloads" / "gdn" / "gdn_decode_qk4_v8_d128_k_last.jsonl").write_text("\n")
    with pytest.raises(ValueError, match=f"modal volume rm -r gdn-decode-bench-cache /{upload.volume_path}"):
        verify_upload(volume, upload.volume_path)


class FakeVolume:
    """Stands in for the modal.Volume: a folder, with listdir and batch_upload."""

    def __init__(self, root: Path):
        self.root, self.puts = root, []

    def listdir(self, path: str):
        if not (self.root / path).exists():
            raise FileNotFoundError(path)
        return list((self.root / path).iterdir())

    def batch_upload(self, force: bool = False):
        volume = self

        class Batch:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def put_file(self, source, remote: str):
                target = volume.root / remote.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read() if hasattr(source, "read") else Path(source).read_bytes())
                volume.puts.append(remote)

        return Batch()

    def put(self, upload):
        with self.batch_upload() as batch:
            for name, content in upload.files.items():
                batch.put_file(content if isinstance(content, Path) else io.BytesIO(content),
                               f"/{upload.volume_path}/{name}")


def test_an_upload_already_in_the_volume_is_not_sent_again(run_modal, small_dataset, tmp_path):
    from harness.volume import dataset_upload

    volume = FakeVolume(tmp_path / "volume")
    upload = dataset_upload(str(small_dataset))
    run_modal.upload(volume, [upload])
    assert len(volume.puts) == 2
    run_modal.upload(volume, [upload])
    assert len(volume.puts) == 2


def test_a_local_dataset_and_solutions_folder_travel_to_the_containers(run_modal, small_dataset, tmp_path,
                                                                      monkeypatch, capsys):
    """run_on_modal end to end, with the Volume a local folder: the uploads, the prepare
    container (cache root in the Volume) and a judging container (the Volume read-only) run
    here, on the CPU, as Modal would call them."""

    from harness.judge import solutions as judge_solutions
    from harness.judge.build import cache_root
    from harness.volume import dataset_upload

    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "this-machine-cache"))
    volume_root = tmp_path / "volume"
    monkeypatch.setattr(run_modal, "WRITABLE_MOUNT", str(volume_root))
    monkeypatch.setattr(run_modal, "READ_ONLY_MOUNT", str(volume_root))
    mine = tmp_path / "my-solutions"
    shutil.copytree(REPO / "solutions" / "pt-reference", mine / "pt-reference")

    built = []

    def fake_build(meta, defines=()):  # stands in for nvcc: an entry under the cache root it would use
        built.append((meta.name, cache_root()))
        (cache_root() / f"{meta.name}-key").mkdir(parents=True)
        (cache_root() / f"{meta.name}-key" / "lib.so").write_text("built")

    monkeypatch.setattr(judge_solutions, "build_library", fake_build)

    class Prepare:
        def remote(self, algo, workloads, options):
            self.args = (algo, workloads, options)
            return run_modal.prepare_cache(algo, workloads, options, mount=volume_root)

    class Judge(FakeFunction):
        def starmap(self, inputs, return_exceptions=False):
            self.calls, outputs = list(inputs), []
            for algo, workloads, tiers, options in self.calls:
                self.before = tree(volume_root)
                outputs.append(run_modal.evaluate_in_container(algo, workloads, tiers, options, mount=volume_root,
                                                               local_cache=tmp_path / "container-cache"))
                self.after = tree(volume_root)
            return outputs

    prepare, judge, volume = Prepare(), Judge([]), FakeVolume(volume_root)
    assert run_modal.run_on_modal(judge, "no-such", str(small_dataset), "", "B200", f"--solutions {mine}",
                                  tmp_path / "results", prepare=prepare, volume=volume) == 2
    assert "unknown solution" in capsys.readouterr().err and volume.puts == []  # --solutions selects locally
    options = f"--device cpu -n 1 --no-progress --solutions {mine}"
    assert run_modal.run_on_modal(judge, "pt-reference", str(small_dataset), "", "B200", options,
                                  tmp_path / "results", prepare=prepare, volume=volume) == 0

    dataset = dataset_upload(str(small_dataset))
    container_dataset = str(volume_root / dataset.volume_path)
    (algo, workloads, tiers, remote_options), = judge.calls
    assert (algo, workloads) == ("pt-reference", container_dataset)
    solutions_folder = Path(shlex.split(remote_options)[-1])
    assert solutions_folder.parent == volume_root / "uploads" / "solutions"
    assert (solutions_folder / "pt-reference" / "solution.toml").is_file()
    assert prepare.args[1] == container_dataset
    # the prepare container built into the Volume's cache root; the judging one saw it and wrote nothing there
    assert built == [("pt-reference", volume_root / "gdn-bench" / "cuda")]
    assert (tmp_path / "container-cache" / "cuda" / "pt-reference-key" / "lib.so").is_symlink()
    assert judge.after == judge.before
    assert not (tmp_path / "this-machine-cache").exists()

    (run_dir,) = (tmp_path / "results" / "runs").iterdir()
    stored = load_run(run_dir)
    assert stored.meta["workloads"] == str(small_dataset)  # as the user named it
    assert stored.meta["modal"]["workloads_uploaded_as"] == container_dataset
    assert all(t.evaluation.status.value == "PASSED" for t in stored.traces)


def test_a_missing_local_dataset_stops_before_any_container(run_modal, tmp_path, capsys):
    fake = FakeFunction([])
    assert run_modal.run_on_modal(fake, "pt-reference", str(tmp_path / "nowhere"), "", "B200", "", tmp_path,
                                  volume=FakeVolume(tmp_path / "volume")) == 2
    assert fake.calls == [] and f"{tmp_path / 'nowhere'}: neither a workload set" in capsys.readouterr().err


def test_the_modal_app_defines_its_volume_without_the_cloud(monkeypatch):
    """With the modal client installed: the app, its two functions and the Volume are built as
    objects only (no network: any connection attempt fails the test)."""
    pytest.importorskip("modal")
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("run_modal.py contacted the network while being defined")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    spec = importlib.util.spec_from_file_location("run_modal_with_modal", REPO / "run_modal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.volume.name == "gdn-decode-bench-cache"
    judging, preparing, tuning = module.evaluate._spec_, module.prepare._spec_, module.tune_gpu._spec_
    assert list(judging.volumes) == ["/cache-ro"] and list(preparing.volumes) == ["/cache"]
    assert list(tuning.volumes) == ["/cache-ro"]
    assert judging.volumes["/cache-ro"]._mount_options.read_only  # solutions run there
    assert tuning.volumes["/cache-ro"]._mount_options.read_only  # and in the tuner
    assert not getattr(preparing.volumes["/cache"], "_read_only", False)
    assert judging.gpus and tuning.gpus == judging.gpus and not preparing.gpus


# ------------------------------------------------------------------ --tune (issue #18)


class FakeTune:
    """Stands in for the Modal tuning function: ``.remote(argv)`` runs ``body(argv)`` here."""

    def __init__(self, body):
        self.body, self.calls, self.gpu = body, [], None

    def with_options(self, gpu):
        self.gpu = gpu
        return self

    def remote(self, argv):
        self.calls.append(argv)
        return self.body(argv)


@pytest.mark.usefixtures("tiny_fla")
def test_a_modal_tune_runs_the_tuner_and_writes_its_reports_into_a_new_local_folder(run_modal, tmp_path, capsys):
    """The container body runs the real tuner (fla-recurrent under the Triton interpreter, a
    fake timer); the local side writes what came back into a new folder, then a second
    folder for a second tune of the same second."""
    from datetime import datetime, timezone

    from harness.records.environment import hardware_name
    from harness.records.plots import slug
    from tools.tune.remote import tune_in_container

    solutions = tmp_path / "solutions"
    body = FakeTune(lambda argv: tune_in_container(argv, solutions_dir=solutions, timer=FakeTimer(), device="cpu"))
    now = datetime(2026, 11, 24, 10, 15, 0, tzinfo=timezone.utc)
    tuning = tmp_path / "tuning"
    assert run_modal.tune_on_modal(body, "fla-recurrent", "H100", "--batches 1", tuning, now=now) == 0
    assert body.gpu == "H100" and body.calls == [["--algo", "fla-recurrent", "--batches", "1"]]
    folder = tuning / "20261124T101500Z-modal-H100"
    report = json.loads((folder / "fla-recurrent" / f"{slug(hardware_name('cpu'))}.json").read_text())
    assert report["solution"] == "fla-recurrent"
    assert [row["batch"] for row in report["state_dtypes"]["float32"]["batches"]] == [1]
    record = json.loads((folder / "modal.json").read_text())
    table = f"solutions/fla-recurrent/launch_tables/{slug(hardware_name('cpu'))}.json"  # the tuner's, in the container
    assert record["gpu"] == "H100" and record["exit_code"] == 0 and record["tables"] == [table]
    assert record["installed"] == [] and json.loads((folder / table).read_text())["solution"] == "fla-recurrent"
    assert record["tuner_argv"] == ["--algo", "fla-recurrent", "--batches", "1"]
    out = capsys.readouterr().out
    assert f"tuning results: {folder}" in out
    assert "--install-tables puts them into solutions/" in out  # kept in the results folder only

    assert run_modal.tune_on_modal(body, "fla-recurrent", "H100", "--batches 1", tuning, now=now) == 0
    assert sorted(p.name for p in tuning.iterdir()) == ["20261124T101500Z-modal-H100", "20261124T101500Z-modal-H100-2"]
    assert json.loads((folder / "modal.json").read_text()) == record  # the first folder is untouched


def fake_tuner_writing_tables(monkeypatch, solutions: Path):
    """``tools.tune.cli.main`` replaced by one that writes a report under ``--out`` and, as a tuner
    that keeps per-GPU tables does, a new table and a changed one in ``solutions``."""
    from tools.tune import cli

    def main(argv, timer=None, device=None):
        out = Path(argv[argv.index("--out") + 1])
        (out / "fla-recurrent").mkdir(parents=True)
        (out / "fla-recurrent" / "GPU.json").write_text('{"solution": "fla-recurrent"}')
        (solutions / "fla-recurrent" / "launch_tables" / "GPU.json").write_text("new table")
        (solutions / "fla-recurrent" / "launch_tables" / "OLD-GPU.json").write_text("changed")
        (solutions / "fla-recurrent" / "notes.txt").write_text("not a table")  # never returned
        return 0

    monkeypatch.setattr(cli, "main", main)


def solutions_with_tables(root: Path) -> Path:
    """A solutions folder: fla-recurrent with two tables, cuda-v4 with one and its index (left alone by
    the fake tune)."""
    for name, content in (("fla-recurrent/launch_tables/OLD-GPU.json", "old"),
                          ("fla-recurrent/launch_tables/SAME-GPU.json", "same"),
                          ("fla-recurrent/kernel.py", "code"), ("cuda-v4/launch_table.X.cuh", "x"),
                          ("cuda-v4/launch_tables.cuh", "#include")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return root


def test_the_container_returns_its_reports_and_the_new_or_changed_tables(monkeypatch, tmp_path):
    from tools.tune.remote import tune_in_container

    solutions = solutions_with_tables(tmp_path / "solutions")
    fake_tuner_writing_tables(monkeypatch, solutions)
    output = tune_in_container(["--algo", "fla-recurrent"], out_dir=tmp_path / "out", solutions_dir=solutions,
                               device="cpu")
    assert output["code"] == 0 and output["error"] == "" and output["device"].startswith("CPU")
    assert output["reports"] == {"fla-recurrent/GPU.json": b'{"solution": "fla-recurrent"}'}
    assert output["tables"] == {"solutions/fla-recurrent/launch_tables/GPU.json": b"new table",
                                "solutions/fla-recurrent/launch_tables/OLD-GPU.json": b"changed"}


def test_a_tune_that_crashes_still_returns_what_it_wrote(monkeypatch, tmp_path):
    from tools.tune import cli
    from tools.tune.remote import tune_in_container

    def main(argv, timer=None, device=None):
        out = Path(argv[argv.index("--out") + 1])
        (out / "fla-recurrent").mkdir(parents=True)
        (out / "fla-recurrent" / "GPU.json").write_text("{}")
        raise RuntimeError("cuda-v4 crashed")

    monkeypatch.setattr(cli, "main", main)
    output = tune_in_container(["--algo", "all"], out_dir=tmp_path / "out", solutions_dir=tmp_path, device="cpu")
    assert output["code"] == 1 and "RuntimeError: cuda-v4 crashed" in output["error"]
    assert list(output["reports"]) == ["fla-recurrent/GPU.json"]


def test_tables_reach_the_solution_folders_only_with_install_tables(run_modal, monkeypatch, tmp_path, capsys):
    from tools.tune.remote import tune_in_container

    remote = solutions_with_tables(tmp_path / "container-solutions")
    fake_tuner_writing_tables(monkeypatch, remote)
    body = FakeTune(lambda argv: tune_in_container(argv, solutions_dir=remote, device="cpu"))
    local = solutions_with_tables(tmp_path / "solutions")
    before = tree(local)

    assert run_modal.tune_on_modal(body, "fla-recurrent", "B200", "", tmp_path / "a", solutions_dir=local) == 0
    assert tree(local) == before  # kept in the results folder only
    (folder,) = (tmp_path / "a").iterdir()
    assert (folder / "solutions/fla-recurrent/launch_tables/GPU.json").read_text() == "new table"
    assert "--install-tables puts them into solutions/" in capsys.readouterr().out

    shutil.rmtree(remote)
    solutions_with_tables(remote)  # a new container starts from the image's files
    assert run_modal.tune_on_modal(body, "fla-recurrent", "B200", "", tmp_path / "b", install_tables=True,
                                   solutions_dir=local) == 0
    after = tree(local)
    assert after.pop("fla-recurrent/launch_tables/GPU.json") == b"new table"
    assert after.pop("fla-recurrent/launch_tables/OLD-GPU.json") == b"changed"
    before.pop("fla-recurrent/launch_tables/OLD-GPU.json")
    assert after == before  # nothing else changed
    (folder,) = (tmp_path / "b").iterdir()
    assert json.loads((folder / "modal.json").read_text())["installed"] == [
        str(local / "fla-recurrent/launch_tables/GPU.json"), str(local / "fla-recurrent/launch_tables/OLD-GPU.json")]


@pytest.mark.parametrize("kind, name", [
    ("reports", "/etc/passwd"), ("reports", "../fla-recurrent/x.json"), ("reports", "fla-recurrent/../../x"),
    ("reports", "fla-recurrent"), ("reports", "./fla-recurrent/x.json"), ("reports", "fla-recurrent//x.json"),
    ("reports", "fla-recurrent\\..\\x"), ("reports", "cuda-v4/x.json"),  # cuda-v4 was not tuned
    ("reports", "modal.json"), ("tables", "solutions/fla-recurrent/kernel.py"),
    ("tables", "solutions/fla-recurrent/launch_tables/../kernel.py"),
    ("tables", "solutions/cuda-v4/launch_table.X.cuh"), ("tables", "/root/solutions/fla-recurrent/launch_tables/x"),
    ("tables", "solutions/fla-recurrent/launch_tables/x.toml"), ("tables", "solutions/fla-recurrent/a/launch_table.X.cuh"),
    ("tables", "fla-recurrent/launch_tables/x"), ("tables", "solutions/fla-recurrent/launch_tables"),
])
def test_paths_from_the_container_outside_the_expected_folders_are_refused(run_modal, tmp_path, capsys, kind, name):
    """A container that ran solution code may return anything: a path that is not a plain
    relative one under the tuned solutions' folders stops the writing before any file."""
    output = {"code": 0, "device": "GPU", "error": "", "reports": {"fla-recurrent/GPU.json": b"{}"}, "tables": {}}
    output[kind][name] = b"evil"
    local = solutions_with_tables(tmp_path / "solutions")
    before = tree(local)
    body = FakeTune(lambda argv: output)
    assert run_modal.tune_on_modal(body, "fla-recurrent", "B200", "", tmp_path / "tuning", install_tables=True,
                                   solutions_dir=local) == 1
    assert "refused the tune's files" in capsys.readouterr().err
    assert not (tmp_path / "tuning").exists() or not any((tmp_path / "tuning").iterdir())
    assert tree(local) == before


def test_a_table_is_not_installed_through_a_link(run_modal, tmp_path, capsys):
    local = solutions_with_tables(tmp_path / "solutions")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (local / "fla-recurrent" / "launch_tables" / "GPU.json").symlink_to(elsewhere / "target")
    output = {"code": 0, "device": "GPU", "error": "", "reports": {},
              "tables": {"solutions/fla-recurrent/launch_tables/GPU.json": b"table"}}
    assert run_modal.tune_on_modal(FakeTune(lambda argv: output), "fla-recurrent", "B200", "", tmp_path / "tuning",
                                   install_tables=True, solutions_dir=local) == 1
    assert "a link" in capsys.readouterr().err and not (elsewhere / "target").exists()
    for content in ([b"not", b"bytes"], "text"):  # what is not bytes is refused too
        output["tables"] = {"solutions/fla-recurrent/launch_tables/GPU2.json": content}
        assert run_modal.tune_on_modal(FakeTune(lambda argv: output), "fla-recurrent", "B200", "",
                                       tmp_path / "tuning", solutions_dir=local) == 1
        assert "not bytes" in capsys.readouterr().err


def test_a_tune_that_returns_nothing_or_fails_says_so(run_modal, tmp_path, capsys):
    def failing(argv):
        raise RuntimeError("no GPU of that type")

    assert run_modal.tune_on_modal(FakeTune(failing), "all", "B200", "", tmp_path) == 1
    assert "the tuning container failed: RuntimeError: no GPU of that type" in capsys.readouterr().err
    empty = {"code": 0, "device": "GPU", "error": "", "reports": {}, "tables": {}}
    assert run_modal.tune_on_modal(FakeTune(lambda argv: empty), "all", "B200", "", tmp_path) == 1
    assert "returned no file" in capsys.readouterr().err
    assert run_modal.tune_on_modal(FakeTune(lambda argv: ["not", "a", "dict"]), "all", "B200", "", tmp_path) == 1
    assert "returned no file" in capsys.readouterr().err
    partial = dict(empty, code=1, error="Traceback ...\nRuntimeError: crashed", reports={"cuda-v4/GPU.json": b"{}"})
    assert run_modal.tune_on_modal(FakeTune(lambda argv: partial), "all", "B200", "", tmp_path / "t") == 1
    assert "RuntimeError: crashed" in capsys.readouterr().err
    (folder,) = (tmp_path / "t").iterdir()
    assert (folder / "cuda-v4" / "GPU.json").exists()  # what came back is kept


@pytest.mark.parametrize("arguments, message", [
    ({"tune": True}, "--tune needs --algo"),
    ({"tune": True, "algo": "pt-reference"}, "unknown solution pt-reference"),
    ({"tune": True, "algo": "cuda-v4", "workloads": "sweep"}, "--workloads judge a run"),
    ({"tune": True, "algo": "cuda-v4", "tiers": "events"}, "--tiers judge a run"),
    ({"tune": True, "algo": "cuda-v4", "options": "--batches 0"}, "each >= 1"),
    ({"tune": True, "algo": "cuda-v4", "options": "--out /tmp/x"}, "the container chooses its output folder"),
    ({"tune": True, "algo": "cuda-v4", "options": "--ou /tmp/x"}, "the container chooses its output folder"),
    ({"tune": True, "algo": "cuda-v4", "options": "--trials 3"}, "unrecognized arguments: --trials 3"),
    ({"install_tables": True, "algo": "cuda-v4"}, "--install-tables goes with --tune"),
    ({"tune": True, "install_tables": True, "algo": "cuda-v4", "options": "--batches 1,8,64"},
     "--install-tables: this tune would write no table file (--batches left out B = 2, 4, 16, 32, 128, 256, 512"),
    ({"tune": True, "install_tables": True, "algo": "cuda-v4", "options": "--only ^r4/"},
     "--install-tables: this tune would write no table file (--only '^r4/' measured part of the search space)"),
])
def test_bad_tune_arguments_exit_2_with_one_line_before_any_container(run_modal, tmp_path, capsys, arguments,
                                                                     message):
    objects = run_modal.ModalObjects(FakeFunction([]), None, FakeTune(lambda argv: pytest.fail("started")), None)
    assert run_modal.entry(objects, results=str(tmp_path), **arguments) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert objects.evaluate.calls == [] and objects.tune.calls == []


def test_the_entry_point_without_tune_judges_as_before(run_modal, tmp_path):
    fake = FakeFunction([RuntimeError("no GPU")])
    objects = run_modal.ModalObjects(fake, None, None, None)
    assert run_modal.entry(objects, algo="pt-reference", results=str(tmp_path)) == 1
    assert fake.calls == [("pt-reference", "contest-v1", "", "")]  # --algo all, contest-v1 unless given


def test_the_tuning_container_reads_the_volume_through_its_own_links(run_modal, monkeypatch, tmp_path):
    from tools.tune import remote

    volume = tmp_path / "volume"
    (volume / "gdn-bench" / "bank").mkdir(parents=True)
    (volume / "gdn-bench" / "bank" / "t.npy").write_text("tensor")
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "this-machine"))
    monkeypatch.setattr(remote, "tune_in_container",
                        lambda argv: {"argv": argv, "cache": os.environ["GDN_BENCH_CACHE"]})
    out = run_modal.tune_container(["--algo", "all"], mount=volume, local_cache=tmp_path / "local")
    assert out == {"argv": ["--algo", "all"], "cache": str(tmp_path / "local")}
    assert (tmp_path / "local" / "bank" / "t.npy").is_symlink()


def test_the_gpu_functions_share_one_set_of_settings(run_modal):
    class Volume:
        def with_mount_options(self, read_only):
            return ("read-only" if read_only else "writable", self)

    settings = run_modal.gpu_function_settings("image", Volume())
    assert settings["restrict_modal_access"] and settings["_experimental_restrict_output"]  # no pickle back
    assert settings["volumes"]["/cache-ro"][0] == "read-only" and settings["gpu"] == "B200"
