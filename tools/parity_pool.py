"""The proposed yardstick over several recorded cross-checks (issue #29):

    python -m tools.parity_pool --out DIR RUN [RUN ...]

RUN: a ``tier_parity.json`` of ``tools/tier_parity.py`` (or its ``.gz``), or the folder holding it. Each run is
judged again by this version's comparisons (:func:`tools.parity_compare.judged_again`; nothing is measured), and per
tier its counts are summed over the runs: the points within the issue's target, the points the proposed yardstick
counts, each side against itself and the paired test's points (:func:`tools.parity_compare.paired_counts`); and the
sync tier's points at the host's full speed. The pooled verdict is the yardstick's
(:func:`tools.parity_compare.yardstick`) on those sums: for events and sync, the paired sign test over every run's
points. Why: one run's count against one run's count is
itself a draw, two or three points either way on 20 (docs/timing.md, "Each timer against itself"), so a verdict on a
timer is taken over several runs of the same tiers.
Pool only runs of the same tier code and the same subjects; the table names each run's commit so a reader can check.

Writes ``DIR/parity_pool.json`` and ``DIR/parity_pool.md`` and prints the Markdown. Exit 2 with one line on stderr
when a RUN cannot be read or holds no figures of both sides.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.facts import Tier
from harness.records.environment import git_commit
from harness.run_lock import writing_into
from tools.parity_compare import (PAIRED_KEYS, PAIRED_LEVEL, PLACEMENT_BOUND_BATCH, TARGETS, full_speed_count,
                                  judged_again, paired_cell, share, tier_counts, yardstick)

REPORT = "tier_parity.json"
COUNTED = ("within", "yardstick", "points")
SIDES = ("plain_self", "harness_self")


def stored_report(run: Path) -> Path:
    """The ``tier_parity.json`` a RUN argument names: the file itself, or the one in the folder."""
    return run / REPORT if run.is_dir() else run


def pool(counts: list[dict[str, dict]]) -> dict[str, dict]:
    """Per tier, :func:`tools.parity_compare.tier_counts` summed over runs: the counts of :data:`COUNTED`, each side
    against itself (``{"within", "points"}``) and the paired test's points (``paired``), each summed over the runs
    that have it (None where none has)."""
    pooled: dict[str, dict] = {}
    for run in counts:
        for tier, count in run.items():
            total = pooled.setdefault(tier, {**{key: 0 for key in COUNTED}, **{side: None for side in SIDES},
                                             "paired": None})
            for key in COUNTED:
                total[key] += count[key]
            for side, keys in [(side, ("within", "points")) for side in SIDES] + [("paired", PAIRED_KEYS)]:
                if count.get(side):
                    mine = total[side] or dict.fromkeys(keys, 0)
                    total[side] = {key: mine[key] + count[side][key] for key in keys}
    return pooled


def verdict(tier: str, count: dict) -> str:
    """The proposed yardstick's verdict on one tier's (pooled) counts."""
    return yardstick(tier, count["yardstick"], count["points"], count.get("paired"))


def markdown(runs: list[dict], pooled: dict[str, dict]) -> str:
    """The per-run counts and the pooled ones, one table per tier."""
    lines = ["# The proposed yardstick over recorded cross-checks (issue #29)", "",
             "Each run judged again by this version's comparisons (`tools/parity_compare.py`); per tier: the points "
             "within the issue's target, the points the proposed yardstick counts (for contest also a point at "
             f"B <= {PLACEMENT_BOUND_BATCH} whose two sides' trials meet), the plain timer against itself, the harness "
             "against itself (where a run had two harness repeats), the paired test (the harness's median and the "
             "plain timer's odd repeats, each over its even repeats: the points where only one is within the target, "
             "and the one-sided sign test on them) and the yardstick's verdict (events and sync: not worse by the "
             "paired test, "
             f"p >= {PAIRED_LEVEL}; cupti and contest: every point).", ""]
    for tier in pooled:
        lines += [f"## {tier} (±{TARGETS[Tier(tier)]:.0%})", "",
                  "| run | commit | hardware | within | yardstick counts | plain against itself | "
                  "harness against itself | paired test | verdict |", "|---|---|---|---|---|---|---|---|---|"]
        for run in runs:
            count = run["counts"].get(tier)
            if count:
                lines.append(f"| {run['run']} | {run['git_commit']} | {run['hardware']} | {count['within']} of "
                             f"{count['points']} | {count['yardstick']} | {share(count['plain_self'])} | "
                             f"{share(count['harness_self'])} | {paired_cell(count.get('paired'))} | "
                             f"{verdict(tier, count)} |")
        total = pooled[tier]
        lines += [f"| **pooled** | | | {total['within']} of {total['points']} | {total['yardstick']} | "
                  f"{share(total['plain_self'])} | {share(total['harness_self'])} | {paired_cell(total['paired'])} | "
                  f"**{verdict(tier, total)}** |", ""]
    fast = [f"{run['git_commit']} {run['sync_full_speed']['within']} of {run['sync_full_speed']['judged']}"
            for run in runs]
    within, judged = (sum(run["sync_full_speed"][key] for run in runs) for key in ("within", "judged"))
    lines += ["The sync tier at the host's full speed (points both sides had full-speed trials at, within "
              f"±{TARGETS[Tier.SYNC]:.0%}): "
              f"{', '.join(fast)}; pooled **{within} of {judged}**.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN")
    args = parser.parse_args(argv)
    runs = []
    for run in args.runs:
        try:
            report = judged_again(stored_report(run))
        except (OSError, ValueError) as exc:  # judged_again's message names the file
            print(f"error: {exc if str(run) in str(exc) else f'{run}: {exc}'}", file=sys.stderr)
            return 2
        runs.append({"run": str(run), "git_commit": report.get("git_commit"), "hardware": report.get("hardware"),
                     "date": report.get("date"), "counts": tier_counts(report),
                     "sync_full_speed": full_speed_count(report)})
    pooled = pool([run["counts"] for run in runs])
    text = markdown(runs, pooled)
    with writing_into([args.out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        args.out.mkdir(parents=True, exist_ok=True)
        verdicts = {tier: verdict(tier, count) for tier, count in pooled.items()}
        made = {"command": "python -m tools.parity_pool " + " ".join(argv if argv is not None else sys.argv[1:]),
                "git_commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        (args.out / "parity_pool.json").write_text(json.dumps({**made, "runs": runs, "pooled": pooled,
                                                               "verdicts": verdicts}, indent=2) + "\n")
        (args.out / "parity_pool.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
