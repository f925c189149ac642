#!/usr/bin/env python3
"""The tables of this folder's README from runs-slim.jsonl.gz: six `--algo all` runs on contest-v1 on one H200,
main (a73021f) and the clock-busy candidate (a73021f+clockbusy) alternating.

    python results/judge-check/20261128-H200-clock-busy-ab/ab_tables.py

runs-slim.jsonl.gz holds, per run, its run.json's commit, start and timeline, the `real` time of the command, and
per trace the solution, workload, status and per tier median_us, value_us, wall_s (the judge's clock) and
host_probe_us, cut from the runs' traces.jsonl (1.4 MB each) to keep the tracked tree small.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path

HERE = Path(__file__).parent


def load() -> list[dict]:
    with gzip.open(HERE / "runs-slim.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def side(run: dict) -> str:
    return "candidate" if "clockbusy" in run["git_commit"] else "main"


def per_solution(run: dict, tier: str, field: str) -> dict[str, list[float]]:
    """Per solution, the tier's field over its workloads in the order they ran."""
    out: dict[str, list[float]] = {}
    for trace in run["traces"]:
        value = trace["tiers"].get(tier, {}).get(field)
        if value is not None:
            out.setdefault(trace["solution"], []).append(value)
    return out


def geomean_ratio(a: list[float], b: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x / y) for x, y in zip(a, b)))


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def runs_table(runs: list[dict]) -> None:
    print("| run | side | command `real` | timeline total s | traces passed |")
    print("|---|---|---|---|---|")
    for run in runs:
        total = sum(step["seconds"] for step in run["timeline"])
        passed = sum(t["status"] == "PASSED" for t in run["traces"])
        print(f"| {run['run'][:16]} | {side(run)} | {run['wall']} | {total:.1f} | {passed}/{len(run['traces'])} |")


def first_sync_table(runs: list[dict]) -> None:
    """The sync tier's wall_s on a solution's first workload against the median of its others."""
    print("\n| solution | " + " | ".join(f"{side(r)} first / others s" for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    walls = [per_solution(r, "sync", "wall_s") for r in runs]
    for solution in walls[0]:
        cells = [f"{w[solution][0]:.2f} / {statistics.median(w[solution][1:]):.2f}" for w in walls]
        print(f"| {solution} | " + " | ".join(cells) + " |")


def figures_table(runs: list[dict]) -> None:
    """Per solution and tier: the spread of main against main (three pairs), and the candidate's median per
    workload over its three runs against main's (geometric mean over the 20 workloads)."""
    main = [r for r in runs if side(r) == "main"]
    cand = [r for r in runs if side(r) == "candidate"]
    fields = {"cupti": "median_us", "events": "median_us", "sync": "value_us"}
    print("\n| solution | tier | main / main, three pairs | candidate / main | per run, geomean µs (order run) |")
    print("|---|---|---|---|---|")
    for solution in per_solution(runs[0], "cupti", "median_us"):
        for tier, field in fields.items():
            series = {r["run"]: per_solution(r, tier, field)[solution] for r in runs}
            pairs = [geomean_ratio(series[a["run"]], series[b["run"]])
                     for a, b in ((main[0], main[1]), (main[1], main[2]), (main[0], main[2]))]
            med = {s: [statistics.median(v) for v in zip(*(series[r["run"]] for r in group))]
                   for s, group in (("m", main), ("c", cand))}
            per_run = ", ".join(f"{side(r)[0]} {geomean(series[r['run']]):.1f}" for r in runs)
            print(f"| {solution} | {tier} | {min(pairs):.3f}–{max(pairs):.3f} | {geomean_ratio(med['c'], med['m']):.3f} | {per_run} |")


def main() -> None:
    runs = load()
    runs_table(runs)
    first_sync_table(runs)
    figures_table(runs)


if __name__ == "__main__":
    main()
