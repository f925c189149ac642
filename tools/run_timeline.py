#!/usr/bin/env python3
"""Where a run's time went: per solution, when its first and last traces came and what its
tiers cost (issue #17: "measure where the time goes first, then cut it").

    python tools/run_timeline.py RUN_DIR

Reads ``RUN_DIR/run.json`` (its start) and ``RUN_DIR/traces.jsonl`` as plain JSON and prints a
markdown table, one row per solution in the order they ran: the seconds from the previous
solution's last trace to this one's first (worker start, loading, compiling, the first
workload), the seconds of its remaining workloads per workload, and per tier the median of the
judge's wall clock for the tier (``wall_s``), the median timed calls and why the tiers stopped
(``stop``: docs/timing.md). Trace timestamps have one-second resolution.

Runs that record run.json's ``timeline`` (the judge's own laps, to the millisecond) get a
second table first: seconds per step (tensors, build, copy floor, each variant) and, per
variant, its worker's load time, its first workload (compiling on first use), the median of
the others, and the time to write the run's files after it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

from harness.facts import TIERS
from harness.records.store import read_stored


def solution_rows(run_dir: Path) -> list[dict]:
    """One dict per solution label (copy floors left out), in the order the traces came. A line of
    traces.jsonl that is not a trace (no solution, no timestamp) is skipped with a note naming ``file:line``.

    Raises:
        FileNotFoundError: no run.json or traces.jsonl in ``run_dir``.
        ValueError: run.json without its ``started`` time, or a traces file that cannot be read back
            (a cut ``.gz``); the message names the file.
    """
    try:
        started = datetime.fromisoformat(run_meta(run_dir)["started"])
    except (KeyError, TypeError, ValueError) as exc:  # run_meta's own errors name the file already
        if isinstance(exc, ValueError) and "run.json" in str(exc):
            raise
        raise ValueError(f"{run_dir / 'run.json'}: no 'started' time of the run") from None
    by_label: dict[str, list[dict]] = {}
    for where, trace in _traces(run_dir / "traces.jsonl"):
        try:
            datetime.fromisoformat(trace["evaluation"]["timestamp"])
            label = str(trace["solution"])
        except (KeyError, TypeError, ValueError) as exc:
            print(f"note: {where}: not a trace with a solution and a timestamp ({exc!r}), skipped", file=sys.stderr)
            continue
        if label != "copy-floor":
            by_label.setdefault(label, []).append(trace)
    rows, previous = [], started
    for label, traces in by_label.items():
        stamps = [datetime.fromisoformat(t["evaluation"]["timestamp"]) for t in traces]
        tiers = [t["evaluation"].get("performance", {}) or {} for t in traces]
        # (tier, figure): the tier is the key (older traces do not repeat it inside the figure)
        figures = [(tier, f) for p in tiers for tier, f in (p.get("tiers") or {}).items() if f.get("available")]
        rows.append({"solution": label, "workloads": len(traces),
                     "first_s": (stamps[0] - previous).total_seconds(),
                     "per_workload_s": (stamps[-1] - stamps[0]).total_seconds() / max(1, len(traces) - 1),
                     "tiers": {tier: tier_cost([f for t, f in figures if t == tier]) for tier in TIERS
                               if any(t == tier for t, _ in figures)}})
        previous = stamps[-1]
    return rows


def run_meta(run_dir: Path) -> dict:
    """``run_dir``'s run.json, a JSON object.

    Raises:
        FileNotFoundError: there is none. ValueError: it is not a JSON object (the message names it).
    """
    path = run_dir / "run.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{path}: not a JSON object ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object")
    return meta


def _traces(path: Path):
    """``(file:line, trace dict)`` of each line of ``path`` (or its ``.gz``); a line that is not a JSON
    object is skipped with a note on stderr.

    Raises:
        FileNotFoundError: neither file is there. ValueError: it cannot be read back (named).
    """
    try:
        data = read_stored(path)  # or its .gz
    except OSError as exc:  # a cut or corrupt .gz: the message names it
        raise ValueError(str(exc)) from None
    if data is None:
        raise FileNotFoundError(f"{path}: no such file (nor .gz)")
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            trace = json.loads(line)
        except json.JSONDecodeError:
            trace = None
        if not isinstance(trace, dict):
            print(f"note: {path}:{number}: not a JSON object, skipped", file=sys.stderr)
            continue
        yield f"{path}:{number}", trace


def tier_cost(figures: list[dict]) -> str:
    """``wall s / calls / stops`` of one tier over a solution's workloads (medians)."""
    walls = [f["wall_s"] for f in figures if f.get("wall_s") is not None]
    calls = [f["iters"] for f in figures if f.get("iters")]
    stops = Counter(f.get("stop") for f in figures if f.get("stop"))
    wall = f"{statistics.median(walls):.3f} s" if walls else "—"
    count = f"{statistics.median(calls):g}" if calls else "—"
    return f"{wall}, {count} calls" + (
        f" ({', '.join(f'{n} {stop}' for stop, n in stops.most_common())})" if stops else "")


def timeline_rows(run_dir: Path) -> list[str]:
    """Markdown rows of run.json's ``timeline`` ([] for runs that did not record one)."""
    laps = run_meta(run_dir).get("timeline") or []
    rows = []
    for lap in laps:
        workloads = lap.get("workload_s") or []
        rows.append("| {} | {:.1f} | {} | {} | {} | {} |".format(
            lap["step"], lap["seconds"], ", ".join(f"{s:.1f}" for s in lap.get("load_s", [])) or "—",
            f"{workloads[0]:.2f}" if workloads else "—",
            f"{statistics.median(workloads[1:]):.2f}" if len(workloads) > 1 else "—",
            f"{lap['write_s']:.2f}" if lap.get("write_s") is not None else "—"))
    if rows:
        total = sum(lap["seconds"] for lap in laps)
        rows.append(f"| total | {total:.1f} | | | | |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"error: {args.run_dir}: not a run folder (pass the folder that holds run.json)", file=sys.stderr)
        return 2
    try:
        rows = solution_rows(args.run_dir)
        timeline = timeline_rows(args.run_dir)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        print(f"error: {args.run_dir}: not a run folder ({exc})", file=sys.stderr)
        return 2
    if timeline:
        print("| step | s | worker load s | first workload s | median workload s | write s |")
        print("|---" * 6 + "|")
        print("\n".join(timeline) + "\n")
    tiers = [t for t in TIERS if any(t in r["tiers"] for r in rows)]
    print("| solution | workloads | to its first trace s | per further workload s | "
          + " | ".join(f"{t}: wall, calls (stops)" for t in tiers) + " |")
    print("|---" * (4 + len(tiers)) + "|")
    for r in rows:
        print(f"| {r['solution']} | {r['workloads']} | {r['first_s']:.0f} | {r['per_workload_s']:.2f} | "
              + " | ".join(r["tiers"].get(t, "—") for t in tiers) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
