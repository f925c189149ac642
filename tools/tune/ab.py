"""Installed launch tables against a tune's, side by side: which to keep.

    python -m tools.tune.ab OLD_RUN [OLD_RUN ...] -- NEW_RUN [NEW_RUN ...]

The A/B after ``python -m tools.tune``: each RUN is a run folder of ``run_local.py --workloads
sweep --tiers cupti`` (or a folder holding run folders), made on one machine alternately with the
installed tables (old) and with the tuned ones (new, e.g. in the copy of the tree the tune wrote
into; ``scripts/gpu_judge_check.sh OUT tune-ab`` makes both). A tune's own rounds time each config
on one set of buffers; the runs time the tables as the judge does, and two runs of one table move
by a CUPTI tick or two at small B, which is why each side takes several runs.

Prints, per solution and batch size, each run's CUPTI median (µs) and new − old of the medians over
each side's runs; then per solution the mean of new / old over the batch sizes both sides measured
and the verdict: ``install`` (below 1: the tuned table reads faster on average, the rule of the
``results/tuning/*`` READMEs since 2026-11-26) or ``keep``; the copy floor's mean is the machine's
drift between the two sides, which the verdicts should be read against. Exit status 0; 2 after an error line
(no ``--``, a side without runs, a run folder without ``summary.csv``).
"""

from __future__ import annotations

import csv
import io
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.facts import COPY_FLOOR
from harness.records.store import read_stored

#: ``{(solution, batch size): CUPTI µs}`` of one run.
RunFigures = dict[tuple[str, int], float]


class BadRuns(ValueError):
    """A side without runs, or a folder that holds no run's summary."""


def summaries(folder: Path) -> list[Path]:
    """The ``summary.csv`` (or ``.csv.gz``) of ``folder`` if it is a run folder, else of the run
    folders under it (``--results DIR`` writes ``DIR/runs/<run>/``).

    Raises:
        BadRuns: none found.
    """
    found = sorted({p.with_suffix("") if p.suffix == ".gz" else p  # the name read_stored takes
                    for p in [*folder.glob("summary.csv*"), *folder.glob("**/runs/*/summary.csv*")]})
    if not found:
        raise BadRuns(f"{folder}: no summary.csv of a run in it")
    return found


def run_figures(summary: Path) -> RunFigures:
    """CUPTI medians by (solution, batch size) of one run's ``summary.csv`` (one workload per batch
    size in the sweep set; rows without a CUPTI figure are left out)."""
    rows = csv.DictReader(io.StringIO(read_stored(summary).decode()))
    return {(r["solution"], int(r["batch_size"])): float(r["cupti_value_us"]) for r in rows if r["cupti_value_us"]}


def side_medians(runs: list[RunFigures]) -> dict[tuple[str, int], float]:
    """Per (solution, batch size), the median over the runs that measured it."""
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for run in runs:
        for key, us in run.items():
            values[key].append(us)
    return {key: statistics.median(v) for key, v in values.items()}


def verdicts(old: list[RunFigures], new: list[RunFigures]) -> dict[str, tuple[float, int]]:
    """``{solution: (mean of new / old over its batch sizes, how many)}`` over the keys both sides
    measured (the copy floor is a solution label too: its ratio shows how far the machine drifted)."""
    before, after = side_medians(old), side_medians(new)
    ratios: dict[str, list[float]] = defaultdict(list)
    for key in sorted(before.keys() & after.keys()):
        ratios[key[0]].append(after[key] / before[key])
    return {solution: (statistics.mean(r), len(r)) for solution, r in ratios.items()}


def format_ab(old: list[RunFigures], new: list[RunFigures]) -> str:
    """The markdown tables :func:`main` prints."""
    before, after = side_medians(old), side_medians(new)
    heads = [f"old {i + 1}" for i in range(len(old))] + [f"new {i + 1}" for i in range(len(new))]
    lines = ["| solution | B | " + " | ".join(heads) + " | new − old µs |", "|---|---|" + "---|" * (len(heads) + 1)]
    for key in sorted(before.keys() & after.keys()):
        cells = [f"{run[key]:.3f}" if key in run else "—" for run in (*old, *new)]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {after[key] - before[key]:+.3f} |")
    lines += ["", "| solution | mean new / old | batch sizes | verdict |", "|---|---|---|---|"]
    for solution, (mean, count) in sorted(verdicts(old, new).items()):
        verdict = "the machine's drift (no table)" if solution.startswith(COPY_FLOOR) else "install" if mean < 1 else "keep"
        lines.append(f"| {solution} | {mean:.4f} | {count} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if "--" not in args:
        print("python -m tools.tune.ab: error: usage: OLD_RUN [OLD_RUN ...] -- NEW_RUN [NEW_RUN ...]", file=sys.stderr)
        return 2
    cut = args.index("--")
    try:
        sides = [[run_figures(s) for folder in part for s in summaries(Path(folder))] for part in (args[:cut], args[cut + 1:])]
        if not all(sides):
            raise BadRuns("each side needs at least one run folder: OLD_RUN ... -- NEW_RUN ...")
    except (BadRuns, OSError, KeyError, ValueError) as exc:
        print(f"python -m tools.tune.ab: error: {exc}", file=sys.stderr)
        return 2
    print(format_ab(*sides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
