"""A workload set as a flashinfer-bench dataset folder (``python -m harness export-dataset SET --out DIR``).

The folder is laid out as the contest's dataset is, and as
``flashinfer_bench.data.TraceSet.from_path`` reads it::

    DIR/definitions/<op_type>/<definition>.json
    DIR/workloads/<op_type>/<definition>.jsonl   one {"definition", "workload"} line per workload
    DIR/blob/...                                  the safetensors files the workloads name

``--workloads DIR`` of run_local.py reads it back (the external-dataset path).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.data.dataset import Dataset, open_dataset
from harness.errors import HarnessInputError


def export_dataset(spec: str, out_dir: str | Path, show_progress: bool = True) -> Path:
    """Write set ``spec`` (a set name, or a dataset folder) under ``out_dir``; returns ``out_dir``.

    Raises:
        HarnessInputError: an unknown set or a malformed dataset, a workload's tensor file missing (nothing is
            written then); ``out_dir`` already holds a dataset (nothing is overwritten).
    """
    out_dir = Path(out_dir)
    if (out_dir / "definitions").exists() or (out_dir / "workloads").exists():
        raise HarnessInputError(out_dir, None, "already holds a dataset (definitions/ or workloads/); "
                                "choose an empty folder")
    dataset = open_dataset(spec, show_progress=show_progress)
    definition = dataset.definition
    blobs = sorted({s.path for w in dataset.workloads for s in w.inputs.values() if s.kind == "safetensors"})
    missing = [dataset.files.root / relative for relative in blobs if not (dataset.files.root / relative).is_file()]
    if missing:  # said before anything is written, so the same command can be run again once it is there
        raise HarnessInputError(missing[0], None, f"a workload's tensor file is missing ({len(missing)} in all); "
                                "nothing was written")
    write_definition(dataset, out_dir / "definitions" / definition.op_type / f"{definition.name}.json")
    lines = [json.dumps({"definition": definition.name, "workload": w.as_json()}) for w in dataset.workloads]
    workloads = out_dir / "workloads" / definition.op_type / f"{definition.name}.jsonl"
    workloads.parent.mkdir(parents=True, exist_ok=True)
    workloads.write_text("\n".join(lines) + "\n")
    for relative in blobs:
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dataset.files.root / relative, target)
    return out_dir


def write_definition(dataset: Dataset, path: Path) -> None:
    """The definition's JSON as the dataset holds it (its source file, byte for byte)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dataset.definition.source, path)
