"""Datasets: our generated workload sets, or an external flashinfer-bench dataset.

``--workloads`` takes either the name of one of our sets (``contest-v1``,
``contest-v2``, ``sweep``), whose tensors are generated on demand into the
cache, or a path to a flashinfer-bench dataset laid out as the contest's is::

    <root>/definitions/<op_type>/<name>.json
    <root>/workloads/<op_type>/<name>.jsonl
    <root>/blob/...            (safetensors, paths relative to <root>)

With an external dataset, that dataset's definition and reference are used.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from harness.data import generator
from harness.data.definition import Definition, load_definition
from harness.facts import DEFINITION_NAME
from harness.errors import HarnessInputError
from harness.paths import WORKLOADS_DIR, cache_dir
from harness.data.workloads import TensorFiles, Workload, load_workloads

OUR_DEFINITION = WORKLOADS_DIR / f"{DEFINITION_NAME}.json"
CHECKSUMS_FILE = WORKLOADS_DIR / "checksums.json"
SET_NAMES = tuple(generator.SET_BATCH_SIZES)


@dataclass
class Dataset:
    """A definition, its workloads and the root their tensor paths are relative to."""

    name: str  # set name, or the external dataset's path
    definition: Definition
    workloads: list[Workload]
    files: TensorFiles
    sources: tuple[Path, ...] = ()  # the definition, workloads and checksum files it was read from

    def read_files(self) -> list[Path]:
        """Every file a run reads for this dataset: :attr:`sources`, the tensor files its workloads
        name and, for one of our sets, their ``.verified`` stamps (what the judge's
        :class:`~harness.judge.vault.FileVault` keeps)."""
        blobs = {self.files.root / s.path for w in self.workloads for s in w.inputs.values()
                 if s.kind == "safetensors"}
        stamps = {_stamp_path(b) for b in blobs} if self.name in SET_NAMES else set()
        return sorted(set(self.sources) | blobs | stamps)


def open_dataset(spec: str, definition_name: str = DEFINITION_NAME, show_progress: bool = True) -> Dataset:
    """Open a named set or an external dataset directory (see module doc), its tensors on disk:
    :func:`describe_dataset`, then :func:`make_tensors`.

    Raises:
        HarnessInputError: unknown set name, missing files, or malformed content.
    """
    dataset = describe_dataset(spec, definition_name)
    make_tensors(dataset, show_progress)
    return dataset


def describe_dataset(spec: str, definition_name: str = DEFINITION_NAME) -> Dataset:
    """A named set or an external dataset directory: its definition and workloads, validated, and
    where its tensor files are; no tensor file is read or made yet (a run builds the CUDA
    solutions while :func:`make_tensors` generates a set on first use).

    Raises:
        HarnessInputError: unknown set name, missing files, or malformed content.
    """
    if spec in SET_NAMES:
        definition = load_definition(OUR_DEFINITION)
        workloads_file = WORKLOADS_DIR / f"{spec}.jsonl"
        workloads = load_workloads(workloads_file, definition)
        return Dataset(spec, definition, workloads, TensorFiles(cache_dir() / "dataset"),
                       (OUR_DEFINITION, workloads_file, CHECKSUMS_FILE))
    path = Path(spec)
    if path.is_dir():
        return _open_external(path, definition_name)
    raise HarnessInputError(spec, None, f"neither a workload set ({', '.join(SET_NAMES)}) nor a dataset directory")


def make_tensors(dataset: Dataset, show_progress: bool = True) -> None:
    """Put one of our sets' tensor files in the cache: a cached file that is not what
    workloads/checksums.json records is made again, a missing one is generated (and checked
    against the checksums). An external dataset's files are the user's: nothing to do.

    Raises:
        RuntimeError: a generated tensor does not match its recorded checksum (the machine does
            not reproduce the data bit for bit: :func:`harness.data.generator.materialize`).
    """
    if dataset.name not in SET_NAMES:
        return
    root = dataset.files.root
    bank = generator.Bank(cache_dir())
    checksums = json.loads(CHECKSUMS_FILE.read_text())
    recipes = generator.set_recipes(dataset.name)
    for recipe in recipes:  # a cached file that is not what checksums.json records is made again
        path = root / recipe.blob_path
        if path.exists() and not cached_file_is_intact(path, checksums.get(recipe.uuid, {})):
            print(f"warning: {path} does not hold the tensors workloads/checksums.json records "
                  "(changed or truncated): generating it again", file=sys.stderr)
            path.unlink()
    missing = [r for r in recipes if not (root / r.blob_path).exists()]
    bank.fill(missing)
    for recipe in tqdm(missing, desc=f"generating {dataset.name} tensors", disable=not (show_progress and missing)):
        _write_stamp(generator.materialize(recipe, root, bank, checksums))  # materialize checked the checksums


def cached_file_is_intact(path: Path, expected: dict[str, str]) -> bool:
    """Whether the safetensors file ``path`` holds tensors with the SHA-256 ``expected`` records
    (``{tensor name: hex digest}``, from workloads/checksums.json).

    Hashing a set's files takes seconds, so a file is hashed again only when its
    size or modification time changed since it last matched (a stamp file next to it).
    """
    from safetensors.numpy import load_file

    stamp = _stamp_path(path)
    if stamp.is_file() and stamp.read_text() == _stamp_text(path):
        return True
    try:
        tensors = load_file(path)
        intact = all(name in tensors and generator.sha256(tensors[name]) == digest for name, digest in expected.items())
    except Exception:  # a truncated or garbled file: safetensors raises its own error types
        intact = False
    if intact:
        _write_stamp(path)
    return intact


def _stamp_path(path: Path) -> Path:
    """The stamp file beside a tensor file: it records the file's size and mtime when it last matched."""
    return path.with_name(path.name + ".verified")


def _stamp_text(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _write_stamp(path: Path) -> None:
    _stamp_path(path).write_text(_stamp_text(path))


def _find_one(root: Path, pattern: str) -> Path:
    matches = sorted(root.glob(pattern))
    if not matches:
        raise HarnessInputError(root, None, f"no file matches '{pattern}'")
    if len(matches) > 1:
        raise HarnessInputError(root, None, f"several files match '{pattern}': {[str(m) for m in matches]}")
    return matches[0]


def external_files(root: str | Path, definition_name: str = DEFINITION_NAME) -> list[Path]:
    """Every file a run reads from the external dataset at ``root``, relative to it: its
    definition, its workloads JSONL and the safetensors files those workloads name (what must
    travel with the dataset to another machine; the rest of a flashinfer-trace folder need not).

    Raises:
        HarnessInputError: as :func:`open_dataset`; or a named tensor file is missing.
    """
    root = Path(root)
    if not root.is_dir():
        raise HarnessInputError(root, None, "not a dataset directory")
    dataset = _open_external(root, definition_name)
    files = [_find_one(root, f"definitions/*/{definition_name}.json"),
             _find_one(root, f"workloads/*/{definition_name}.jsonl")]
    for workload in dataset.workloads:
        for name, spec in workload.inputs.items():
            if spec.kind != "safetensors":
                continue
            where = f"input '{name}' of workload {workload.uuid} ({workload.where})"
            if Path(spec.path).is_absolute() or ".." in Path(spec.path).parts:  # it would not travel with root
                raise HarnessInputError(spec.path, None, f"a tensor path must lie inside the dataset ({where})")
            if not (root / spec.path).is_file():
                raise HarnessInputError(root / spec.path, None, f"tensor file not found ({where})")
            files.append(root / spec.path)
    return sorted({path.relative_to(root) for path in files})


def _open_external(root: Path, definition_name: str) -> Dataset:
    definition_file = _find_one(root, f"definitions/*/{definition_name}.json")
    workloads_file = _find_one(root, f"workloads/*/{definition_name}.jsonl")
    definition = load_definition(definition_file)
    workloads = load_workloads(workloads_file, definition)
    return Dataset(str(root), definition, workloads, TensorFiles(root), (definition_file, workloads_file))
