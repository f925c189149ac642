#!/usr/bin/env python3
"""Two runs side by side: per (solution, batch size) and tier, the figure before
and after, and per tier the spread of after / before. For "the numbers do not
move" checks (a judge change, a timing change) on the same GPU.

    python tools/compare_runs.py BEFORE_TRACES.jsonl AFTER_TRACES.jsonl [--tiers cupti,events,sync] [--per solution]

``--per solution`` compares each solution's median over its workloads instead (a set like
contest-v1, whose 20 workloads all have B = 1, has one row per solution then).

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
from pathlib import Path

from harness.records.best_floor import best_floors
from harness.records.store import read_stored
from harness.records.trace import FloorMeasurement


def figures(traces: Path, per_solution: bool = False) -> dict[tuple[str, int | str], dict[str, float]]:
    """``{(solution label, batch size): {tier: figure µs}}`` of the PASSED traces (and floors) of one run;
    with ``per_solution`` ``{(solution label, "all"): {tier: median µs over its workloads}}``."""
    every: dict[tuple[str, int | str], dict[str, list[float]]] = {}
    data = read_stored(traces)  # traces.jsonl, or its .gz
    if data is None:
        raise FileNotFoundError(f"{traces}: no such file (nor {traces.name}.gz)")
    for line in data.decode().splitlines():
        trace = json.loads(line) if line.strip() else None
        performance = trace and (trace["evaluation"].get("performance") or {})
        if performance:
            key = (trace["solution"], "all" if per_solution else trace["workload"]["axes"]["batch_size"])
            for tier, figure in performance.get("tiers", {}).items():
                if figure.get("available"):
                    every.setdefault(key, {}).setdefault(tier, []).append(figure["value_us"])
    # per batch size the last workload's figure, as before; per solution the median
    found = {key: {t: (statistics.median(v) if per_solution else v[-1]) for t, v in tiers.items()}
             for key, tiers in every.items()}
    # the run folder's floors.jsonl, or X_floors.jsonl beside an X_traces.jsonl (a file named neither
    # way has no floors: never the traces file itself)
    floors = traces.with_name(traces.name.replace("traces.jsonl", "floors.jsonl"))
    floor_data = read_stored(floors) if floors != traces and not per_solution else None
    if floor_data is not None:  # written by today's store, so its lines validate (per batch size only)
        measured = [FloorMeasurement.model_validate_json(line) for line in floor_data.decode().splitlines()
                    if line.strip()]
        for floor in best_floors(measured):  # per tier the fastest of the copies measured
            found.setdefault((floor.label, floor.batch_size), {
                t: f.value_us for t, f in floor.tiers.items() if f.available})
    return found


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
    parser.add_argument("--per", choices=("batch", "solution"), default="batch",
                        help="a row per (solution, batch size), or per solution: the median over its workloads "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    tiers = args.tiers.split(",")
    per_solution = args.per == "solution"
    rows, ratios = compare(figures(args.before, per_solution), figures(args.after, per_solution), tiers)
    print("| solution | B | " + " | ".join(f"{t} µs before → after" for t in tiers) + " |")
    print("|---|---|" + "---|" * len(tiers))
    print("\n".join(rows))
    print("\n| tier | figures in both | median after/before | min | max |\n|---|---|---|---|---|")
    for tier, values in ratios.items():
        if values:
            print(f"| {tier} | {len(values)} | {statistics.median(values):.4f} | {min(values):.3f} | {max(values):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
