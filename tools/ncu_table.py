"""Nsight Compute's details pages, side by side: one column per profiled subject, one row per metric.

    python -m tools.ncu_table r32=r32-details.csv r16=r16-details.csv [--launch -1] [--metrics all]

Each CSV is ``ncu --import REPORT --page details --csv`` of one profile (plain or gzipped), as
``scripts/gpu_judge_check.sh``'s ncu steps write them. A profile holds several launches of its
subject (``--launch-count``); ``--launch`` picks one by its position among them (default -1, the
last, which the profiles in results/cuda-notes.md were read at). The table is markdown, each
value as ncu printed it, with its unit; the default rows are the ones that say where a
memory-bound kernel's time goes (:data:`DEFAULT_METRICS`), in that order.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import pandas as pd

#: The default rows (ncu's metric names, sections of ``--set full`` or of LaunchStats, Occupancy,
#: SpeedOfLight, WarpStateStats, MemoryWorkloadAnalysis and SchedulerStats): duration and the units'
#: throughputs, the launch's shape and what bounds its residency, then how often a warp could issue.
DEFAULT_METRICS = (
    "Duration", "DRAM Throughput", "L2 Cache Throughput", "L1/TEX Cache Throughput", "L2 Hit Rate",
    "L1/TEX Hit Rate", "Grid Size", "Block Size", "Registers Per Thread", "Static Shared Memory Per Block",
    "Dynamic Shared Memory Per Block", "Shared Memory Configuration Size", "Block Limit Registers",
    "Block Limit Shared Mem", "Waves Per SM",
    "Theoretical Occupancy", "Achieved Occupancy", "Eligible Warps Per Scheduler",
    "Warp Cycles Per Issued Instruction",
)


def read_details(path: Path) -> pd.DataFrame:
    """The rows of one details-page CSV that carry a metric (``ID``, ``Metric Name``, ``Metric Unit``,
    ``Metric Value``, ...), with ncu's own text values.

    Raises:
        ValueError: ``path`` is not a details page (no ``ID`` and ``Metric Name`` columns).
    """
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not an ncu details page ({exc})") from None
    except (OSError, EOFError, zlib.error) as exc:  # a cut or corrupt .gz (gzip raises EOFError for a cut one)
        raise ValueError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    missing = {"ID", "Metric Name", "Metric Unit", "Metric Value"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path}: not an ncu details page (no {', '.join(sorted(missing))} column)")
    return frame[frame["Metric Name"] != ""]


def one_launch(frame: pd.DataFrame, launch: int, path: Path) -> tuple[pd.Series, dict[str, str]]:
    """``(metric -> value, metric -> unit)`` of the ``launch``-th profiled launch (a Python index: -1
    the last). A metric listed in more than one section keeps its first value.

    Raises:
        ValueError: fewer launches in the profile than ``launch`` asks for, or an ``ID`` not a number.
    """
    try:
        ids = sorted(frame["ID"].unique(), key=int)
    except ValueError:
        raise ValueError(f"{path}: not an ncu details page (a launch ID that is not a number)") from None
    try:
        chosen = ids[launch]
    except IndexError:
        raise ValueError(f"{path}: {len(ids)} profiled launch(es), no launch {launch}") from None
    rows = frame[frame["ID"] == chosen].drop_duplicates("Metric Name")
    values = pd.Series(rows["Metric Value"].to_numpy(), index=rows["Metric Name"].to_numpy())
    return values, dict(zip(rows["Metric Name"], rows["Metric Unit"]))


def side_by_side(profiles: dict[str, Path], launch: int = -1, metrics: tuple[str, ...] | None = DEFAULT_METRICS) -> str:
    """The markdown table of ``profiles`` (column label -> details CSV), rows ``metrics`` in order
    (None: every metric of the first profile, in its order); a metric a profile lacks reads ``-``.

    Raises:
        ValueError: a file that is not a details page, or has too few launches (:func:`one_launch`).
    """
    columns, units = {}, {}
    for label, path in profiles.items():
        values, unit = one_launch(read_details(path), launch, path)
        columns[label] = values
        units = {**unit, **units}
    names = list(metrics) if metrics is not None else list(next(iter(columns.values())).index)
    lines = ["| metric | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name in names:
        unit = units.get(name, "")
        label = f"{name} ({unit})" if unit else name
        lines.append(f"| {label} | " + " | ".join(values.get(name, "-") for values in columns.values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+", metavar="LABEL=CSV", help="a column label and its details-page CSV")
    parser.add_argument("--launch", type=int, default=-1, help="which profiled launch (default: %(default)s, the last)")
    parser.add_argument("--metrics", default="default",
                        help="'default' (DEFAULT_METRICS), 'all' (the first profile's), or comma-separated metric names")
    args = parser.parse_args(argv)
    pairs = [item.partition("=") for item in args.profiles]
    if any(not sep or not label or not path for label, sep, path in pairs):
        parser.error("each profile is LABEL=CSV")
    metrics = {"default": DEFAULT_METRICS, "all": None}.get(args.metrics, tuple(args.metrics.split(",")))
    try:
        sys.stdout.write(side_by_side({label: Path(path) for label, _, path in pairs}, args.launch, metrics))
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
