#!/usr/bin/env python3
"""A paired A/B of the sync tier: runs of two trees alternated on one machine, compared pair by pair
(issue #29: does a change to the worker move the host's speed the sync tier reads?).

    python -m tools.sync_ab DIR [--sides this,tree]

DIR holds one results folder per run, named ``<side>-<pair>`` (``this-1``, ``tree-1``, ``this-2``,
...), each as ``run_local.py --results`` leaves it (``runs/<id>/traces.jsonl``), as
``scripts/gpu_judge_check.sh sync-ab`` makes them. Per pair and side: the median over the run's
workloads of the sync figure (µs) and of the speed reading beside it (``host_probe_us``, µs of the
stand-in of harness/judge/timing/host_speed.py), and how many trials read the host slow: above
``FULL_SPEED_FACTOR`` x the fastest trial reading of every run (the cross-check's rule,
tools/parity_compare.py). Writes ``DIR/sync_ab.md`` and prints it. Exit 2 when DIR holds no pair.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.facts import Tier
from harness.records.store import load_run
from tools.parity_compare import FULL_SPEED_FACTOR, slow_line


@dataclass
class SyncRun:
    """One run's sync tier: per PASSED workload its figure (µs) and speed reading (µs), and every
    trial's speed reading (µs)."""

    figures_us: list[float]
    probes_us: list[float]
    trial_probes_us: list[float]

    @property
    def readings_us(self) -> list[float]:
        """The speed readings slow trials are counted over: each trial's, or each workload's where a
        run kept none per trial."""
        return self.trial_probes_us or self.probes_us


def read_run(folder: Path) -> SyncRun | None:
    """The sync figures of the one run under ``folder/runs/`` (``traces.jsonl`` or its ``.gz``); None
    where it has none (a run that failed, or was judged without the sync tier)."""
    run = SyncRun([], [], [])
    for run_folder in sorted(folder.glob("runs/*/")):
        for trace in load_run(run_folder).traces:  # the store's reader: traces.jsonl or its .gz
            performance = trace.evaluation.performance
            sync = performance.tiers.get(Tier.SYNC) if performance else None
            if sync and sync.available and sync.value_us is not None and sync.host_probe_us is not None:
                run.figures_us.append(sync.value_us)
                run.probes_us.append(sync.host_probe_us)
                run.trial_probes_us.extend(sync.host_probe_trials_us or [])
    return run if run.figures_us else None


def pairs_in(root: Path, sides: tuple[str, str]) -> dict[int, dict[str, SyncRun]]:
    """``{pair: {side: run}}`` for the pairs whose both runs have sync figures, in pair order."""
    found: dict[int, dict[str, SyncRun]] = {}
    for folder in root.iterdir():
        side, _, pair = folder.name.rpartition("-")
        if folder.is_dir() and side in sides and pair.isdigit():
            run = read_run(folder)
            if run is not None:
                found.setdefault(int(pair), {})[side] = run
    return {pair: runs for pair, runs in sorted(found.items()) if len(runs) == 2}


def report(pairs: dict[int, dict[str, SyncRun]], sides: tuple[str, str]) -> str:
    """The markdown table of ``pairs`` (side a over side b) and its summary lines."""
    a, b = sides
    limit = slow_line([p for runs in pairs.values() for run in runs.values() for p in run.readings_us])

    def slow(run: SyncRun) -> tuple[int, int]:
        return sum(p > limit for p in run.readings_us), len(run.readings_us)

    lines = [f"| pair | {a} sync µs | {b} sync µs | {a} / {b} | {a} speed µs | {b} speed µs | {a} slow trials | {b} slow trials |",
             "|---|---|---|---|---|---|---|---|"]
    ratios, fewer, ties, fast = [], 0, 0, {a: 0, b: 0}
    pooled = {a: [0, 0], b: [0, 0]}
    for pair, runs in pairs.items():
        med = {s: statistics.median(runs[s].figures_us) for s in sides}
        speed = {s: statistics.median(runs[s].probes_us) for s in sides}
        counts = {s: slow(runs[s]) for s in sides}
        ratios.append(med[a] / med[b])
        fewer += counts[a][0] < counts[b][0]
        ties += counts[a][0] == counts[b][0]
        for s in sides:
            fast[s] += speed[s] <= limit
            pooled[s] = [pooled[s][0] + counts[s][0], pooled[s][1] + counts[s][1]]
        lines.append(f"| {pair} | {med[a]:.1f} | {med[b]:.1f} | {ratios[-1]:.3f} | {speed[a]:.2f} | {speed[b]:.2f} | "
                     f"{counts[a][0]} of {counts[a][1]} | {counts[b][0]} of {counts[b][1]} |")
    lines += ["", f"Slow: a speed reading above {limit:.2f} µs ({FULL_SPEED_FACTOR} x the fastest trial reading of every run).",
              f"{a}'s sync run median lower in {sum(r < 1 for r in ratios)} of {len(ratios)} pairs; median {a} / {b} "
              f"{statistics.median(ratios):.3f}. {a}'s trials slow less often in {fewer} of {len(ratios)} ({ties} ties); "
              f"pooled: {a} {pooled[a][0]} of {pooled[a][1]}, {b} {pooled[b][0]} of {pooled[b][1]}. Runs whose median "
              f"reading is under the line: {a} {fast[a]}, {b} {fast[b]} of {len(ratios)}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--sides", default="this,tree", help="the two run-name prefixes, a over b (default this,tree)")
    args = parser.parse_args(argv)
    sides = tuple(args.sides.split(","))
    if not args.dir.is_dir():
        print(f"error: {args.dir}: no such folder", file=sys.stderr)
        return 2
    if len(sides) != 2:
        print(f"error: --sides {args.sides!r}: two run-name prefixes, a over b (e.g. this,tree)", file=sys.stderr)
        return 2
    pairs = pairs_in(args.dir, sides)
    if not pairs:
        print(f"error: {args.dir}: no pair of runs with sync figures named {sides[0]}-N and {sides[1]}-N", file=sys.stderr)
        return 2
    text = report(pairs, sides)
    (args.dir / "sync_ab.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
