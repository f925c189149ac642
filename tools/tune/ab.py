"""Installed launch tables against a tune's, side by side: which to keep.

    python -m tools.tune.ab OLD_RUN [OLD_RUN ...] -- NEW_RUN [NEW_RUN ...]

The A/B after ``python -m tools.tune``: each RUN is a run folder of ``run_local.py --workloads
sweep --tiers cupti`` (or a folder holding run folders), made on one machine alternately with the
installed tables (old) and with the tuned ones (new, e.g. in the copy of the tree the tune wrote
into; ``scripts/gpu_judge_check.sh OUT tune-ab`` makes both). A tune ranks configs that differ by
a CUPTI tick or two, and in the judge's runs (another process, other allocations) such a pick can
read a tick slower; two runs of one table move by as much at small B, which is why each side takes
several runs.

Prints, per solution and batch size, each run's CUPTI median (µs) and new − old of the medians over
each side's runs; then per solution the mean of new / old over the batch sizes both sides measured,
the noise it is read against and the verdict: ``install`` where the mean is below 1 by more than the
noise (the tuned table reads faster on average), else ``keep`` (slower, or a tie within the noise:
a table that changes nothing measurable is not worth the churn). The noise is the larger of the
machine's drift (the copy floor's own mean new / old, which no table moves; the copy of the same
state dtype as the solution's label) and the repeat spread
(half the range of a side's runs over their median, averaged over the solution's batch sizes and
both sides). Exit status 0; 2 after an error line (no ``--``, a side without runs, a folder with no
run in it).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.facts import COPY_FLOOR, Tier
from harness.records.store import TRACES_FILE, run_dirs, stored_file
from tools.compare_runs import figures

#: ``{(solution, batch size): CUPTI µs}`` of one run.
RunFigures = dict[tuple[str, int], float]


class BadRuns(ValueError):
    """A side without runs, or a folder that holds no run."""


def runs_in(folder: Path) -> list[Path]:
    """``folder`` if it is a run folder, else the run folders the harness's writer left under it
    (``--results DIR`` writes ``DIR/runs/<run>/``: :func:`harness.records.store.run_dirs`).

    Raises:
        BadRuns: none found.
    """
    found = [folder] if stored_file(folder / TRACES_FILE) else run_dirs(folder)
    if not found:
        raise BadRuns(f"{folder}: no run folder in it")
    return found


def run_figures(run: Path) -> RunFigures:
    """CUPTI figures by (solution, batch size) of one run (:func:`tools.compare_runs.figures`: the
    PASSED traces, and the copy floor as the best of its copies); a key without a CUPTI figure is
    left out."""
    return {key: tiers[Tier.CUPTI] for key, tiers in figures(run / TRACES_FILE).items() if Tier.CUPTI in tiers}


def side_figures(runs: list[RunFigures]) -> dict[tuple[str, int], list[float]]:
    """Per (solution, batch size), the figures of the runs that measured it (µs)."""
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for run in runs:
        for key, us in run.items():
            values[key].append(us)
    return values


def side_medians(runs: list[RunFigures]) -> dict[tuple[str, int], float]:
    """Per (solution, batch size), the median over the runs that measured it."""
    return {key: statistics.median(v) for key, v in side_figures(runs).items()}


def mean_ratios(old: list[RunFigures], new: list[RunFigures]) -> dict[str, tuple[float, int]]:
    """``{solution: (mean of new / old over its batch sizes, how many)}`` over the keys both sides
    measured (the copy floor is a solution label too: its ratio shows how far the machine drifted)."""
    before, after = side_medians(old), side_medians(new)
    ratios: dict[str, list[float]] = defaultdict(list)
    for key in sorted(before.keys() & after.keys()):
        ratios[key[0]].append(after[key] / before[key])
    return {solution: (statistics.mean(r), len(r)) for solution, r in ratios.items()}


def repeat_spread(sides: tuple[list[RunFigures], ...], solution: str) -> float:
    """Half the range of one side's runs over their median, as a fraction, averaged over the
    solution's (batch size, side) pairs that at least two runs measured; 0 where none did."""
    spreads = [(max(v) - min(v)) / (2 * statistics.median(v)) for runs in sides
               for key, v in side_figures(runs).items() if key[0] == solution and len(v) >= 2]
    return statistics.mean(spreads) if spreads else 0.0


def noise(old: list[RunFigures], new: list[RunFigures], solution: str, drift: float | None) -> float:
    """What a solution's mean new / old is read against, as a fraction: the larger of the
    machine's drift (``|drift - 1|``, the copy floor's mean new / old; None: no floor measured) and
    :func:`repeat_spread` over both sides."""
    return max(abs(drift - 1) if drift is not None else 0.0, repeat_spread((old, new), solution))


def floor_label(solution: str) -> str:
    """The copy floor's label for the state dtype of ``solution``'s label: its ``[...]`` suffix
    (``cuda-v4[bfloat16-state]`` -> ``copy-floor[bfloat16-state]``; ``cuda-v4`` -> ``copy-floor``).
    A bf16 state's copy moves half the bytes, so its drift is its own."""
    bracket = solution.find("[")
    return COPY_FLOOR + (solution[bracket:] if bracket >= 0 else "")


def verdict(mean: float, band: float) -> str:
    """``install`` where the tuned table reads faster by more than ``band`` (a fraction), else
    ``keep``, naming a tie within the noise as such."""
    if mean < 1 - band:
        return "install"
    return "keep (a tie within the noise)" if mean < 1 + band else "keep"


def format_ab(old: list[RunFigures], new: list[RunFigures]) -> str:
    """The markdown tables :func:`main` prints."""
    before, after = side_medians(old), side_medians(new)
    heads = [f"old {i + 1}" for i in range(len(old))] + [f"new {i + 1}" for i in range(len(new))]
    lines = ["| solution | B | " + " | ".join(heads) + " | new − old µs |", "|---|---|" + "---|" * (len(heads) + 1)]
    for key in sorted(before.keys() & after.keys()):
        cells = [f"{run[key]:.3f}" if key in run else "—" for run in (*old, *new)]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {after[key] - before[key]:+.3f} |")
    means = mean_ratios(old, new)
    lines += ["", "| solution | mean new / old | batch sizes | noise ± | verdict |", "|---|---|---|---|---|"]
    for solution, (mean, count) in sorted(means.items()):
        if solution.startswith(COPY_FLOOR):
            lines.append(f"| {solution} | {mean:.4f} | {count} | | the machine's drift (no table) |")
            continue
        drift = means.get(floor_label(solution), means.get(COPY_FLOOR, (None, 0)))[0]
        band = noise(old, new, solution, drift)
        lines.append(f"| {solution} | {mean:.4f} | {count} | {band:.2%} | {verdict(mean, band)} |")
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
        sides = [[run_figures(run) for folder in part for run in runs_in(Path(folder))] for part in (args[:cut], args[cut + 1:])]
        if not all(sides):
            raise BadRuns("each side needs at least one run folder: OLD_RUN ... -- NEW_RUN ...")
    except (BadRuns, OSError, KeyError, ValueError) as exc:
        print(f"python -m tools.tune.ab: error: {exc}", file=sys.stderr)
        return 2
    print(format_ab(*sides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
