#!/usr/bin/env python3
"""Two runs side by side: per (solution, batch size) and tier, the figure before
and after, and per tier the spread of after / before. For "the numbers do not
move" checks (a judge change, a timing change, the same solution on another GPU of the host).

    python tools/compare_runs.py BEFORE_TRACES.jsonl AFTER_TRACES.jsonl [--tiers cupti,events,sync] [--per solution]

``--per solution`` compares each solution's median over its workloads instead (a set like
contest-v1, whose 20 workloads all have B = 1, has one row per solution then).
``--per workload`` pairs the two runs' figures of the same solution and workload and prints, per
solution, the spread of after / before over its workloads and the devices each run judged it on
(two runs of one set: a ``--gpus all`` run beside a one-GPU run, issue #31).

Reads the traces (``.jsonl`` or ``.jsonl.gz``) as plain JSON (a run made by an older harness need not
validate under today's trace model) and prints a markdown table; a figure one
run lacks is shown as "—". The copy floor of runs that kept it in
``floors.jsonl`` is read from the ``floors.jsonl`` next to the traces: per tier
the fastest of the copies measured (harness/records/best_floor.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import ValidationError

from harness.facts import Tier
from harness.records.best_floor import best_floors
from harness.records.store import read_stored
from harness.records.trace import FloorMeasurement

PER = ("batch", "solution", "workload")


class Figures(dict):
    """``{(solution label, batch size | "all" | workload uuid): {tier: figure µs}}`` of one run, and in
    ``devices`` the devices each solution label (or floor label) was judged on."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: dict[str, set[str]] = defaultdict(set)


def figures(traces: Path, per: str = "batch") -> Figures:
    """The PASSED traces' figures (and the floors') of one run (``traces``: its ``traces.jsonl``, the
    ``.gz`` of that, or the run folder), keyed by :data:`PER` ``per``: per batch
    size the last workload's figure of that size, per solution the median over its workloads, per
    workload each workload's own.

    Raises:
        FileNotFoundError: neither ``traces`` nor its ``.gz`` exists.
        OSError: the file cannot be read back (a cut ``.gz``; the message names it).
        ValueError: a line that is not a trace (the message names the file and line).
    """
    every: dict[tuple[str, int | str], dict[str, list[float]]] = {}
    found = Figures()
    traces = traces / "traces.jsonl" if traces.is_dir() else traces
    for where, trace in _traces(traces):
        try:
            performance = trace["evaluation"].get("performance") or {}
            if not performance:
                continue
            key = (trace["solution"], _second_key(per, trace["workload"].get("axes", {}).get("batch_size"),
                                                  trace["workload"].get("uuid")))
            found.devices[trace["solution"]].add(trace["evaluation"].get("environment", {}).get("device") or "?")
            for tier, figure in performance.get("tiers", {}).items():
                if figure.get("available"):
                    every.setdefault(key, {}).setdefault(tier, []).append(float(figure["value_us"]))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"{where}: not a trace this tool reads ({type(exc).__name__}: {exc})") from exc
    # per batch size the last workload's figure, as before; per solution the median
    found.update({key: {t: (statistics.median(v) if per == "solution" else v[-1]) for t, v in tiers.items()}
                  for key, tiers in every.items()})
    # the run folder's floors.jsonl, or X_floors.jsonl beside an X_traces.jsonl (a file named neither
    # way has no floors: never the traces file itself)
    floors = traces.with_name(traces.name.replace("traces.jsonl", "floors.jsonl"))
    floor_data = read_stored(floors) if floors != traces and per != "solution" else None
    if floor_data is not None:  # written by today's store, so its lines validate (per batch size only)
        try:
            measured = [FloorMeasurement.model_validate_json(line) for line in floor_data.decode().splitlines()
                        if line.strip()]
        except (UnicodeDecodeError, ValidationError) as exc:
            raise ValueError(f"{floors}: not a floors file this tool reads ({type(exc).__name__})") from exc
        for floor in best_floors(measured):  # per tier the fastest of the copies measured
            found.devices[floor.label].add(floor.environment.device if floor.environment else "?")
            found.setdefault((floor.label, _second_key(per, floor.batch_size, floor.workload)), {
                t: f.value_us for t, f in floor.tiers.items() if f.available})
    return found


def _traces(traces: Path):
    """``(file:line, trace dict)`` of each non-blank line of ``traces`` (or its ``.gz``).

    Raises:
        FileNotFoundError, OSError, ValueError: as :func:`figures` says.
    """
    data = read_stored(traces)  # traces.jsonl, or its .gz
    if data is None:
        raise FileNotFoundError(f"{traces}: no such file (nor {traces.name}.gz)")
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{traces}: not a traces file (not UTF-8 text: {exc})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            trace = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{traces}:{number}: not valid JSON ({exc})") from exc
        if not isinstance(trace, dict):
            raise ValueError(f"{traces}:{number}: not a trace (a JSON {type(trace).__name__}, not an object)")
        yield f"{traces}:{number}", trace


def _second_key(per: str, batch_size: int | None, workload: str | None) -> int | str | None:
    """The second half of a :func:`figures` key."""
    return {"batch": batch_size, "solution": "all", "workload": workload}[per]


def compare(before: dict, after: dict, tiers: list[str]) -> tuple[list[str], dict[str, list[float]]]:
    """Markdown rows and, per tier, the after / before ratios of the figures both runs have."""
    rows, ratios = [], {t: [] for t in tiers}
    for key in sorted(set(before) | set(after)):
        cells = []
        for tier in tiers:
            old, new = before.get(key, {}).get(tier), after.get(key, {}).get(tier)
            if old and new:
                ratios[tier].append(new / old)
                cells.append(f"{old:.2f} → {new:.2f} ({(new / old - 1) * 100:+.1f}%)")
            else:
                cells.append(f"{old:.2f} → —" if old else (f"— → {new:.2f}" if new else "—"))
        rows.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return rows, ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="traces.jsonl of the first run")
    parser.add_argument("after", type=Path, help="traces.jsonl of the second run")
    parser.add_argument("--tiers", default="cupti,events,sync", help="comma-separated tiers (default: %(default)s)")
    parser.add_argument("--per", choices=PER, default="batch",
                        help="a row per (solution, batch size); per solution: the median over its workloads; "
                             "per workload: the spread over workloads per solution (default: %(default)s)")
    args = parser.parse_args(argv)
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = sorted(set(tiers) - {t.value for t in Tier})
    if unknown or not tiers:
        parser.error(f"--tiers: unknown tier {', '.join(unknown) or '(none given)'} "
                     f"(known: {', '.join(t.value for t in Tier)})")
    try:
        before, after = figures(args.before, args.per), figures(args.after, args.per)
    except (OSError, ValueError) as exc:  # a missing, cut or malformed file: named, no traceback
        parser.error(str(exc))
    if args.per == "workload":
        print(per_solution_spread(before, after, tiers))
        return 0
    rows, ratios = compare(before, after, tiers)
    print("| solution | B | " + " | ".join(f"{t} µs before → after" for t in tiers) + " |")
    print("|---|---|" + "---|" * len(tiers))
    print("\n".join(rows))
    print("\n| tier | figures in both | median after/before | min | max |\n|---|---|---|---|---|")
    for tier, values in ratios.items():
        if values:
            print(f"| {tier} | {len(values)} | {statistics.median(values):.4f} | {min(values):.3f} | {max(values):.3f} |")
    return 0


def per_solution_spread(before: Figures, after: Figures, tiers: list[str]) -> str:
    """Markdown: per solution label and tier, the after / before ratios of its workloads that both runs
    timed (count, median, min, max) and the devices each run judged it on."""
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for key in set(before) & set(after):
        for tier in tiers:
            old, new = before[key].get(tier), after[key].get(tier)
            if old and new:
                ratios[(key[0], tier)].append(new / old)
    lines = ["| solution | devices before → after | tier | workloads | median after/before | min | max |",
             "|---|---|---|---|---|---|---|"]
    for (label, tier), values in sorted(ratios.items()):
        devices = f"{','.join(sorted(before.devices[label]))} → {','.join(sorted(after.devices[label]))}"
        lines.append(f"| {label} | {devices} | {tier} | {len(values)} | {statistics.median(values):.4f} "
                     f"| {min(values):.3f} | {max(values):.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
