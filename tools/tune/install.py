"""Install a GPU's launch-table files from tuning reports already measured: no GPU, nothing re-timed.

Usage (from the repository root)::

    python -m tools.tune.install REPORT.json [REPORT.json ...]

Each ``REPORT`` is a report of ``python -m tools.tune``
(``results/tuning/<UTC>/<solution>/<device slug>.json``). The command writes
the files that tune would have written into the solution folder: that GPU's
table file (replacing it if there is one) and, for cuda-v4, the line of the
index ``launch_tables.cuh``. It goes through the tuner's own code
(:func:`tools.tune.table_files.write_table_files`), so the files are the same,
and they record the report's device, commit, command, date and timing tier,
and the report's path. It is for a report whose tune wrote no table file:
one made before the tuner wrote them, or on a copy of the tree.

The solution is loaded through the harness's loader to read its search space
(cuda-v4: its default build, so nvcc is needed). Every report is read and
checked before any file is written. A bad input prints one line on stderr and
exits with status 2: a missing or unreadable file, a file that is not JSON,
a report of a solution that has no adapter, or a report with no table. A
report has no table when it comes from another tuner's form, when ``--only``
measured only part of the search space, when ``--batches`` left out one of the
table's batch sizes, when ``--defines`` built a candidate instead of the shipped
kernel, or when it had no correct config.
A table that names a config the solution no longer has is also an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR
from harness.records.store import UnreadableStoredFile, read_stored
from tools.tune import ADAPTERS
from tools.tune.table_files import no_table_reason, report_tables, write_table_files

PROG = "python -m tools.tune.install"


class InstallError(Exception):
    """A report that cannot be installed; the message is one line."""


@dataclass(frozen=True)
class Report:
    """One report to install: its path, its JSON object, and its solution's name."""

    path: Path
    data: dict
    solution: str


def read_report(path: Path) -> Report:
    """Read and check one report.

    Raises:
        InstallError: unreadable, not a JSON object, no known solution, or no table to install.
    """
    try:
        raw = read_stored(Path(path))  # the report, or its .gz (committed reports are kept compressed)
        if raw is None:
            raise FileNotFoundError(2, "No such file or directory")
        data = json.loads(raw)
    except UnreadableStoredFile as exc:  # a cut or corrupt .gz: its message names the file
        raise InstallError(str(exc)) from None
    except OSError as exc:
        raise InstallError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: not JSON: {exc}") from None
    solution = data.get("solution") if isinstance(data, dict) else None
    if solution not in ADAPTERS:
        raise InstallError(f"{path}: a report of {solution!r}, not of a tuned solution ({', '.join(ADAPTERS)})")
    if why := no_table_reason(only=data.get("only"), defines=data.get("defines") or ()):
        raise InstallError(f"{path}: {why}: no table to install")
    if not report_tables(data):
        raise InstallError(f"{path}: no launch table in it (not a python -m tools.tune report, "
                           "or no correct config at any batch size)")
    for dtype, part in data["state_dtypes"].items():
        if why := no_table_reason(batches=[row.get("batch") for row in part.get("batches") or ()]):
            raise InstallError(f"{path}: its {dtype} tune: {why}: no table to install")
    return Report(Path(path), data, solution)


def load_adapter(solution: str):
    """The adapter of ``solution`` with the solution loaded by the harness (its default build).

    Raises:
        InstallError: it cannot be built or imported here.
    """
    try:
        return ADAPTERS[solution](load_solution(load_meta(SOLUTIONS_DIR / solution)))
    except Exception as exc:  # a build or import failure: say which, in one line
        first_line = next(iter(str(exc).splitlines()), "")
        raise InstallError(f"cannot load {solution}: {type(exc).__name__}: {first_line}") from None


def check_configs(report: Report, adapter) -> None:
    """Raise :class:`InstallError` if the report's tables name a config the solution's search space
    lacks (it changed since the tune), so that nothing is written for a table that cannot be."""
    for dtype, table in report_tables(report.data).items():
        missing = sorted({name for _, name in table} - set(adapter.configs(dtype)))
        if missing:
            raise InstallError(f"{report.path}: its {dtype} table names configs {report.solution} no longer has: "
                               f"{', '.join(missing)}")


def install(paths, adapter_for=load_adapter) -> list[Path]:
    """Install the tables of the reports at ``paths``, in order; the files written.

    Args:
        paths: report files.
        adapter_for: solution name -> its loaded adapter (tests pass adapters whose
            ``source_dir`` is a copy of the solution folder).

    Raises:
        InstallError: a report is bad (:func:`read_report`, :func:`check_configs`); then nothing is written.
    """
    reports = [read_report(path) for path in paths]
    adapters = {name: adapter_for(name) for name in dict.fromkeys(report.solution for report in reports)}
    for report in reports:
        check_configs(report, adapters[report.solution])
    return [written for report in reports
            for written in write_table_files(adapters[report.solution], report.data, report.path)]


def main(argv: list[str] | None = None, *, adapter_for=load_adapter) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); 0, or 2 after one line on stderr."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="reports of python -m tools.tune")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        written = install(args.reports, adapter_for)
    except InstallError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
