"""A GPU's launch-table file in a solution folder: what ``python -m tools.tune`` writes there
(and ``python -m tools.tune.install`` from a report already measured: both through
:func:`write_table_files`).

Each tuned solution keeps one table file per GPU it was measured on, named by
the device slug (:func:`harness.records.plots.slug`, as run folders are) and
keyed inside by the exact device name the harness records
(:func:`harness.records.environment.hardware_name`); the solution picks the
file of the current GPU at run time (docs/tuning.md). Besides the table the
file records where it came from (:func:`provenance`). The Python solutions'
files are JSON, written here (:func:`json_table_file`); cuda-v4's are C++
headers (:mod:`tools.tune.cuda_v4`).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from harness.paths import REPO_ROOT
from harness.records.plots import slug
from harness.run_lock import writing_into

#: The launch-table files of a tuned solution, as glob patterns relative to its folder: the
#: Python solutions' ``launch_tables/<device slug>.json``, cuda-v4's
#: ``launch_table.<device slug>.cuh`` and the index that includes them (``tools.tune.cuda_v4``).
TABLE_FILE_PATTERNS = ("launch_tables/*.json", "launch_table.*.cuh", "launch_tables.cuh")

#: The provenance fields every table file holds, in this order.
PROVENANCE_FIELDS = ("device", "commit", "command", "date_utc", "tier", "report")


def table_stem(device: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``: a table file's name without its suffix."""
    return slug(device)


def provenance(report: dict, report_path: Path) -> dict:
    """The table file's record of where it came from: device name, commit, command line, UTC
    date and timing tier of the tune (``report``, :func:`tools.tune.report.build_report`), and the
    path of its full report (relative to the repository where it lies inside it)."""
    path = Path(report_path).resolve()
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    return {"device": report["device"], "commit": report["commit"], "command": report["command"],
            "date_utc": report["date_utc"], "tier": report["timing"]["tier"], "report": shown.as_posix()}


#: The batch sizes a launch table is chosen over (the tuner's default ``--batches``). A table's last
#: entry covers every larger batch and its first every smaller one, so a tune that left one of these
#: out would give its choices at the sizes it measured to the sizes it did not (``--batches 256,512``
#: would put B = 256's pick at B = 1): such a tune, or its report, has no table to write.
TABLE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def missing_table_batches(batches) -> list[int]:
    """The sizes of :data:`TABLE_BATCHES` that ``batches`` (measured batch sizes) lacks, ascending:
    empty when a table may be chosen from them."""
    return sorted(set(TABLE_BATCHES) - set(batches))


def no_table_reason(*, only: str | None = None, batches=None, defines=()) -> str | None:
    """Why a tune with these settings has no table to write or install, or None: a table holds the
    shipped build's choice over its whole search space at every size of :data:`TABLE_BATCHES`.
    The one wording of the rule, for the tuner's arguments (:func:`tools.tune.cli.main`, before
    a Modal tune: :func:`tools.tune.remote.tuner_argv`) and for a report's settings
    (:func:`tools.tune.install.read_report`).

    Args:
        only: the ``--only`` pattern, if any.
        batches: the batch sizes measured (None: not asked).
        defines: the ``--defines`` macros of a candidate build, if any.
    """
    if only:
        return f"--only {only!r} measured part of the search space"
    if batches is not None and (missing := missing_table_batches(batches)):
        return (f"--batches left out B = {', '.join(map(str, missing))} (a table is chosen over every "
                "batch size of tools.tune.table_files.TABLE_BATCHES)")
    if defines:
        return f"--defines {','.join(defines)} built a candidate, not the shipped kernel"
    return None


def report_tables(report: dict) -> dict[str, list[list]]:
    """State dtype -> ``[[largest batch | None, config name]]`` chosen by a tune (``report``:
    :func:`tools.tune.report.build_report`); a state dtype without a table (no correct config at
    any batch size) is left out, and a report of another form (no ``state_dtypes``) has none."""
    parts = report.get("state_dtypes") or {}
    return {dtype: part["table"] for dtype, part in parts.items() if isinstance(part, dict) and part.get("table")}


def write_table_files(adapter, report: dict, report_path: Path) -> list[Path]:
    """Write the table files of the GPU a tune measured into the solution folder
    (``adapter.source_dir``; :meth:`tools.tune.protocol.Adapter.table_files`), replacing that GPU's
    file if there is one; the paths written. A report without a table (:func:`report_tables`)
    writes nothing.

    Args:
        adapter: the solution's :class:`tools.tune.protocol.Adapter`, its solution loaded.
        report: the tune's report; ``report_path``: where it lies (recorded in the file, :func:`provenance`).

    Raises:
        KeyError: the table names a config the solution's search space lacks.
    """
    tables = report_tables(report)
    if not tables:
        return []
    written = []
    files = adapter.table_files(tables, provenance(report, report_path))
    with writing_into([adapter.source_dir]):  # never while a run's vault watches the solution (harness/run_lock.py)
        for relative, text in files.items():
            target = Path(adapter.source_dir) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            written.append(target)
    return written


def json_table_file(solution: str, origin: dict, tables: dict[str, list[list]]) -> tuple[str, str]:
    """``(file name, text)`` of a Python solution's table file ``launch_tables/<device slug>.json``.

    Args:
        solution: the solution's name.
        origin: :func:`provenance`.
        tables: state dtype -> ``[[largest batch | None, {LaunchConfig field: value}]]``.
    """
    data = {"solution": solution, **{field: origin[field] for field in PROVENANCE_FIELDS}, "tables": tables}
    return f"launch_tables/{table_stem(origin['device'])}.json", json.dumps(data, indent=2) + "\n"


def json_entries(table: list[list], configs: dict[str, object]) -> list[list]:
    """``[[limit, config name]]`` -> ``[[limit, {field: value}]]`` of the named NamedTuple configs."""
    return [[limit, dict(configs[name]._asdict())] for limit, name in table]


def is_table_file(relative: PurePosixPath) -> bool:
    """Whether ``relative`` (a path inside a solution folder) is one of its launch-table files
    (:data:`TABLE_FILE_PATTERNS`, matched whole, not as a suffix)."""
    relative = PurePosixPath(relative)
    return any(len(relative.parts) == len(PurePosixPath(pattern).parts) and relative.match(pattern)
               for pattern in TABLE_FILE_PATTERNS)


def table_files(solution_dir: Path) -> list[Path]:
    """The launch-table files a solution folder holds (regular files, links not followed), sorted."""
    root = Path(solution_dir)
    found = {path for pattern in TABLE_FILE_PATTERNS for path in root.glob(pattern)}
    return sorted(path for path in found if path.is_file() and not path.is_symlink())
