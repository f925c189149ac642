"""The one writer and the one loader of a run folder ``results/runs/<run id>/``.

A run folder holds:

* ``run.json``: the run's metadata (a dict: set, config, environment,
  ``started``, ``git_commit``, solutions, ...), as the judge builds it;
* ``traces.jsonl``: one :class:`~harness.records.trace.Trace` per line, every
  one a valid flashinfer-bench ``Trace`` (its loaders read the file as it is);
* ``skipped.jsonl``: the SKIPPED traces (a solution that could not run on this
  machine), in the same model: SKIPPED is not a flashinfer-bench status, so
  they are kept out of ``traces.jsonl`` (docs/interop.md);
* ``floors.jsonl``: one :class:`~harness.records.trace.FloorMeasurement` per
  line, each a copy measured for the copy floor of a workload (the floor is the
  best of them: :mod:`harness.records.best_floor`);
* ``summary.csv``: the flat per-trace table of :mod:`harness.records.report`.

:class:`RunWriter` rewrites a whole file from the full in-memory list each
time it is called (write to a temporary file, then ``os.replace``): the judge
calls it after every solution, so a run killed later keeps what finished, a
reader never sees half a file, and a file edited in between is replaced.

Older evidence may keep its data files compressed as ``<name>.gz`` (``gzip -n``, to keep the
checkout small): every reader here takes either (:func:`read_stored`), and the manifest's digests
are those of the bytes inside, which ``gunzip`` gives back as the writer wrote them (and
flashinfer-bench's loaders read).

:func:`load_run` reads a folder back, also in the format written before
``floors.jsonl`` existed (the copy floor as ``copy-floor`` rows of
``traces.jsonl``, PASSED without correctness): those rows become
:class:`FloorMeasurement` objects. A line that cannot be read is skipped
with a note on stderr naming ``file:line``; a truncated last line (a run that
died mid-write) is the common case.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
from pydantic import ValidationError

from harness.records.trace import EvaluationStatus, FloorMeasurement, Trace, is_floor_label, label_state_dtype

RUN_FILE = "run.json"
TRACES_FILE = "traces.jsonl"
SKIPPED_FILE = "skipped.jsonl"
FLOORS_FILE = "floors.jsonl"
SUMMARY_FILE = "summary.csv"
#: The key of ``run.json`` that lists the SHA-256 of every data file the writer wrote.
MANIFEST_KEY = "files"
#: A data file kept compressed (``gzip -n``) is ``<name>.gz``; the manifest names the bytes inside.
COMPRESSED_SUFFIX = ".gz"
#: ``method`` of a floor read from the old format (``dst.copy_(state)`` in torch).
OLD_FLOOR_METHOD = "torch copy_"


@dataclass
class StoredRun:
    """A run folder as read back by :func:`load_run`."""

    run_dir: Path
    """The folder; its name is the run id."""
    meta: dict[str, Any] = field(default_factory=dict)
    """``run.json`` ({} where absent or unreadable)."""
    traces: list[Trace] = field(default_factory=list)
    """The traces, in file order."""
    floors: list[FloorMeasurement] = field(default_factory=list)
    """The copy floors: ``floors.jsonl`` then any old-format rows of ``traces.jsonl``."""

    @property
    def name(self) -> str:
        """The run id (the folder's name)."""
        return self.run_dir.name

    @property
    def hardware(self) -> str:
        """``run.json``'s hardware, else the first trace's or floor's ('' if none)."""
        hardware = (self.meta.get("environment") or {}).get("hardware")
        if hardware:
            return hardware
        for record in (*self.traces, *self.floors):
            env = record.evaluation.environment if isinstance(record, Trace) else record.environment
            return env.hardware
        return ""


# -------------------------------------------------------------------- writer


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _jsonl(records: Iterable[Trace | FloorMeasurement]) -> str:
    return "".join(record.model_dump_json() + "\n" for record in records)


class RunWriter:
    """Writes the files of one run folder, each whole and atomically (see module doc)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)

    def write_run(self, meta: dict[str, Any], floors: list[FloorMeasurement], traces: list[Trace]) -> list[Path]:
        """Every file of the run so far: ``floors.jsonl``, ``traces.jsonl`` and ``skipped.jsonl``
        (see module doc), then ``run.json``: ``meta`` with :data:`MANIFEST_KEY`, the SHA-256 of each
        file written (what :func:`run_dirs` checks before a folder is read). Returns the paths."""
        skipped = [t for t in traces if t.evaluation.status == EvaluationStatus.SKIPPED]
        ran = [t for t in traces if t.evaluation.status != EvaluationStatus.SKIPPED]
        contents = {FLOORS_FILE: _jsonl(floors), TRACES_FILE: _jsonl(ran), SKIPPED_FILE: _jsonl(skipped)}
        for name, text in contents.items():
            _atomic_write(self.run_dir / name, text)
        manifest = {name: _sha256(text.encode("utf-8")) for name, text in contents.items()}
        _atomic_write(self.run_dir / RUN_FILE, json.dumps({**meta, MANIFEST_KEY: manifest}, indent=2) + "\n")
        return [self.run_dir / name for name in (*contents, RUN_FILE)]

    def write_summary(self, traces: list[Trace], floors: list[FloorMeasurement] = ()) -> pd.DataFrame:
        """``summary.csv`` (:func:`harness.records.report.trace_rows`, floors first); returns the table."""
        from harness.records.report import trace_rows

        frame = trace_rows(traces, floors)
        path = self.run_dir / SUMMARY_FILE
        _atomic_write(path, frame.to_csv(index=False, float_format="%.6g"))
        return frame


# -------------------------------------------------------------------- loader


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def floor_from_old_trace(row: dict[str, Any]) -> FloorMeasurement:
    """A ``copy-floor`` row of an old ``traces.jsonl`` as a :class:`FloorMeasurement`."""
    evaluation = row["evaluation"]
    performance = evaluation.get("performance") or {}
    return FloorMeasurement(
        workload=row["workload"]["uuid"], batch_size=row["workload"]["axes"]["batch_size"],
        state_dtype=label_state_dtype(row["solution"]), nbytes=performance.get("bytes_moved", 0),
        method=OLD_FLOOR_METHOD, tiers=performance.get("tiers") or {},
        environment=evaluation["environment"], timestamp=evaluation["timestamp"])


def record_from_row(row: Any) -> Trace | FloorMeasurement:
    """A parsed line of ``traces.jsonl``: a :class:`Trace`, or for an old
    copy-floor row a :class:`FloorMeasurement`. Raises ValueError (or
    pydantic's ValidationError) for anything else."""
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    if is_floor_label(str(row.get("solution", ""))):
        return floor_from_old_trace(row)
    return Trace.model_validate(row)


class UnreadableStoredFile(OSError):
    """A stored data file (or its ``.gz``) that cannot be read back whole; the message names it."""

    def __init__(self, path: Path, cause: BaseException):
        self.path = Path(path)
        what = "cut short" if isinstance(cause, EOFError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"{self.path}: cannot be read back ({what})")


def stored_file(path: Path) -> Path | None:
    """``path``, or ``path.gz`` where only that is there (older evidence is kept compressed,
    ``gzip -n``); None where neither is."""
    path = Path(path)
    for candidate in (path, path.with_name(path.name + COMPRESSED_SUFFIX)):
        if candidate.is_file():
            return candidate
    return None


def read_stored(path: Path) -> bytes | None:
    """The bytes of a data file as the writer wrote them: ``path``, or ``path.gz`` decompressed
    (:func:`stored_file`); None where neither is there.

    Raises:
        UnreadableStoredFile (an OSError naming the file): a ``.gz`` that is not gzip data or was cut
            short (a run killed while writing it), or a file that cannot be read.
    """
    found = stored_file(path)
    if found is None:
        return None
    try:
        data = found.read_bytes()
        return gzip.decompress(data) if found.name.endswith(COMPRESSED_SUFFIX) else data
    except (OSError, EOFError, zlib.error) as exc:  # gzip raises EOFError for a cut stream, not an OSError
        raise UnreadableStoredFile(found, exc) from exc


def _read_jsonl(path: Path, parse) -> list:
    """Records of one JSONL file (or its ``.gz``) via ``parse(dict)``; unreadable lines, and a file that
    cannot be read back at all, skipped with a note."""
    try:
        data = read_stored(path)
        text = data.decode("utf-8") if data is not None else ""
    except (UnreadableStoredFile, UnicodeDecodeError) as exc:
        _note(f"{path}: {exc}, skipped")
        return []
    lines = text.splitlines()
    last = max((i for i, line in enumerate(lines, 1) if line.strip()), default=0)
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            what = "truncated last line" if number == last else "not valid JSON"
            _note(f"{path}:{number}: {what}, skipped")
            continue
        try:
            records.append(parse(row))
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).strip().splitlines()
            _note(f"{path}:{number}: not a valid record ({type(exc).__name__}: "
                  f"{' '.join(first[:3])[:300]}), skipped")
    return records


#: The type of each field of ``run.json`` the judge writes (harness/judge/run.py) that a reader here relies on.
META_TYPES: dict[str, type] = {"algo": str, "workloads": str, "definition": str, "config": dict, "environment": dict,
                               "git_commit": str, "started": str, "solutions": list, "notes": list,
                               "timeline": list, "files": dict}


def load_meta(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of ``run_dir`` ({} where absent or unreadable, with a note for the latter). A field of
    :data:`META_TYPES` of another type (a hand-edited file) is left out with a note naming it, so the
    readers fall back as for an older run without it, instead of failing on every run they read."""
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        _note(f"{path}: not valid JSON ({exc}), ignored")
        return {}
    if not isinstance(meta, dict):
        return {}
    wrong = [k for k, kind in META_TYPES.items() if k in meta and not isinstance(meta[k], kind)]
    for key in wrong:
        _note(f"{path}: field '{key}' is of type {type(meta.pop(key)).__name__}, not {META_TYPES[key].__name__}; ignored")
    return meta


def load_run(run_dir: Path) -> StoredRun:
    """Read a run folder (see module doc): run.json, traces and floors, old format included."""
    run_dir = Path(run_dir)
    records = _read_jsonl(run_dir / TRACES_FILE, record_from_row) + _read_jsonl(run_dir / SKIPPED_FILE, Trace.model_validate)
    floors = _read_jsonl(run_dir / FLOORS_FILE, FloorMeasurement.model_validate)
    return StoredRun(run_dir=run_dir, meta=load_meta(run_dir),
                     traces=[r for r in records if isinstance(r, Trace)],
                     floors=floors + [r for r in records if isinstance(r, FloorMeasurement)])


def manifest_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not a folder as :meth:`RunWriter.write_run` left it (None when it is):
    no ``run.json`` or no manifest in it, or a data file whose SHA-256 differs from the manifest's."""
    manifest = load_meta(run_dir).get(MANIFEST_KEY)
    if not isinstance(manifest, dict) or not manifest:
        return f"{run_dir / RUN_FILE} has no '{MANIFEST_KEY}' manifest: not a folder the harness's writer wrote"
    for name, digest in manifest.items():
        path = run_dir / str(name)
        try:
            data = None if "/" in str(name) else read_stored(path)
        except UnreadableStoredFile as exc:
            return f"{exc}: not the file the harness wrote"
        if data is None or _sha256(data) != digest:  # a .gz holds the same bytes, compressed
            return f"{path} is not the file the harness wrote (missing or changed since)"
    return None


def run_dirs(results_dir: Path) -> list[Path]:
    """Run folders under ``<results_dir>/runs/`` as the harness's writer left them (their manifest
    holds: :func:`manifest_problem`; any other is skipped with a note naming it), sorted by name:
    what ``score``, the leaderboard and the earlier-reference lookup read."""
    runs = Path(results_dir) / "runs"
    if not runs.is_dir():
        return []
    found = []
    for path in sorted(p for p in runs.iterdir() if p.is_dir()):
        if not (stored_file(path / TRACES_FILE) or stored_file(path / FLOORS_FILE)):
            continue
        problem = manifest_problem(path)
        if problem:
            _note(f"{problem}; skipped")
            continue
        found.append(path)
    return found


def load_runs(results_dir: Path) -> list[StoredRun]:
    """Every run folder under ``<results_dir>/runs/`` (:func:`run_dirs`), loaded."""
    return [load_run(p) for p in run_dirs(results_dir)]


def stored_references(results_dir: Path, hardware: str, definition: str, reference_solution: str,
                      exclude: Path | None = None) -> tuple[list[Trace], list[str]]:
    """The PASSED traces of ``reference_solution`` for ``definition`` on GPU ``hardware`` in the
    run folders under ``results_dir`` (but ``exclude``, the run being written), and the names of
    the runs they come from: what :func:`harness.records.annotate.annotate` divides by where a
    run has no reference of its own."""
    found, names = [], []
    slug = re.sub(r"[^A-Za-z0-9]+", "-", hardware).strip("-")  # run folders are named <time>_<hardware>_<set>
    for run_dir in run_dirs(results_dir):
        if slug not in run_dir.name or (exclude is not None and run_dir.resolve() == Path(exclude).resolve()):
            continue
        mine = [t for t in load_run(run_dir).traces
                if t.solution == reference_solution and t.definition == definition and t.is_successful()
                and t.evaluation.environment.hardware == hardware]
        found += mine
        names += [run_dir.name] if mine else []
    return found, names
