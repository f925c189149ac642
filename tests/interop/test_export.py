"""`python -m harness export-dataset`: a set as a flashinfer-bench dataset folder
that flashinfer-bench's TraceSet loads and our external-dataset reader reads back
(harness/interop/export.py)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO
from harness.data.dataset import open_dataset
from harness.interop.export import export_dataset


def test_an_exported_set_loads_in_flashinfer_bench_and_reads_back_the_same(tmp_path):
    from flashinfer_bench.data import TraceSet

    out = export_dataset("contest-v1", tmp_path / "ds", show_progress=False)
    traces = TraceSet.from_path(str(out))
    ours = open_dataset("contest-v1", show_progress=False)
    name = ours.definition.name
    assert list(traces.definitions) == [name]
    assert [t.workload.uuid for t in traces.workloads[name]] == [w.uuid for w in ours.workloads]
    back = open_dataset(str(out), show_progress=False)
    assert [w.as_json() for w in back.workloads] == [w.as_json() for w in ours.workloads]
    blobs = {s.path for w in ours.workloads for s in w.inputs.values() if s.kind == "safetensors"}
    assert blobs and all((out / p).read_bytes() == (ours.files.root / p).read_bytes() for p in blobs)


def test_export_refuses_a_folder_that_holds_a_dataset(tmp_path):
    (tmp_path / "workloads").mkdir()
    done = subprocess.run([sys.executable, "-m", "harness", "export-dataset", "contest-v1", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and "already holds a dataset" in done.stderr and "Traceback" not in done.stderr


def test_a_missing_tensor_file_is_named_before_anything_is_written(tmp_path, capsys):
    import json

    from conftest import write_small_dataset
    from harness.interop.cli import main

    dataset = write_small_dataset(tmp_path / "dataset", batch_sizes=(1,), scales=(0.0,))
    jsonl = next(dataset.glob("workloads/*/*.jsonl"))
    workload = json.loads(jsonl.read_text())
    workload["inputs"]["state"] = {"type": "safetensors", "path": "blob/gone.safetensors", "tensor_key": "state"}
    jsonl.write_text(json.dumps(workload) + "\n")
    assert main(["export-dataset", str(dataset), "--out", str(tmp_path / "out")]) == 2
    assert f"{dataset / 'blob' / 'gone.safetensors'}: a workload's tensor file is missing" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # so the same command runs again once the file is back
