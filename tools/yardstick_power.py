"""How often each form of the proposed yardstick (issue #29) calls a tier missed, on simulated cross-checks:

    python -m tools.yardstick_power --out DIR [--trials 2000] [--seed 29]

A simulated cross-check has ``--points`` points (20: the copy and four solutions at four batch sizes) of one tier. At
each point the plain timer's two repeats and the harness's one run are draws of the same lognormal spread (sigma, the
timer's run-to-run noise), the harness's multiplied by a skew (1.0: the harness tier *is* the named timer; above it: a
harness that reads that much high at every point). Each cross-check is judged by the code that judges recorded ones
(:mod:`tools.parity_compare`), both ways:

* ``counts``: the yardstick before 2026-11-28, harness / plain within the target (:func:`~tools.parity_compare.compare`,
  the harness over the median of the plain repeats) at least as often as the plain timer against itself
  (:func:`~tools.parity_compare.repeatability`);
* ``paired``: the paired sign test (:func:`~tools.parity_compare.paired_counts`,
  :func:`~tools.parity_compare.paired_verdict`, the events and sync verdict of the yardstick).

Each row gives the share of ``--trials`` simulated verdicts that read "missed", for one cross-check and for ``--runs``
pooled as tools/parity_pool.py pools them (the counts summed). With skew 1.0 that share is the rule's false alarm; above
it, its power. The events target (±10%) is used; what matters is sigma over the target. Nothing is measured: CPU only.

Writes ``DIR/yardstick_power.json`` and ``DIR/yardstick_power.md`` and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.facts import Tier
from harness.records.environment import git_commit
from harness.run_lock import writing_into
from tools.parity_compare import PAIRED_KEYS, TARGETS, compare, paired_counts, paired_verdict, repeatability

TIER = Tier.EVENTS
#: The timers' run-to-run spreads simulated (lognormal sigma): a quiet timer to a noisy one at the ±10% target.
SIGMAS = (0.03, 0.06, 0.10)
#: The harness's skews simulated: the named timer itself, and a harness reading 5% or 8% high at every point.
SKEWS = (1.0, 1.05, 1.08)


def simulated_run(rng: random.Random, points: int, sigma: float, skew: float) -> tuple[dict, dict]:
    """One cross-check's figures, ``(harness, plain)`` as :mod:`tools.parity_compare` takes them: per point one
    harness run and two plain repeats, each ``exp(N(0, sigma))``, the harness's times ``skew``."""
    harness, plain = {}, {}
    for point in range(points):
        harness[(f"s{point}", 1)] = {str(TIER): [rng.lognormvariate(0.0, sigma) * skew]}
        plain[(f"s{point}", 1)] = {str(TIER): [rng.lognormvariate(0.0, sigma) for _ in range(2)]}
    return harness, plain


def run_counts(harness: dict, plain: dict) -> dict:
    """What each rule sums over runs: harness / plain within, the plain timer against itself, the paired points."""
    return {"within": sum(row["within"] for row in compare(harness, plain)),
            "plain_self": repeatability(harness, plain)[str(TIER)]["plain"]["within"],
            "paired": paired_counts(harness, plain)[str(TIER)]}


def verdicts(runs: list[dict]) -> dict[str, bool]:
    """Whether each rule reads "missed" on ``runs`` pooled (the counts summed; every run has the same points)."""
    within, plain_self = sum(run["within"] for run in runs), sum(run["plain_self"] for run in runs)
    paired = {key: sum(run["paired"][key] for run in runs) for key in PAIRED_KEYS}
    return {"counts": within < plain_self, "paired": paired_verdict(paired) == "missed"}


def missed_shares(rng: random.Random, trials: int, points: int, pooled: int, sigma: float, skew: float) -> dict:
    """Per rule, the share of ``trials`` verdicts reading "missed", for one run (``one``) and ``pooled`` runs."""
    missed = {f"{rule} {scope}": 0 for rule in ("counts", "paired") for scope in ("one", "pooled")}
    for _ in range(trials):
        runs = [run_counts(*simulated_run(rng, points, sigma, skew)) for _ in range(pooled)]
        for scope, chosen in (("one", runs[:1]), ("pooled", runs)):
            for rule, miss in verdicts(chosen).items():
                missed[f"{rule} {scope}"] += miss
    return {key: count / trials for key, count in missed.items()}


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [f"# The yardstick's two forms on simulated cross-checks ({TIER} target ±{TARGETS[TIER]:.0%}, "
             f"{args.points} points a run, {args.trials} trials, seed {args.seed})", "",
             "Share of verdicts reading \"missed\". Skew 1.0: the harness is the named timer (a false alarm); above: "
             f"it reads that much high at every point (the power). One run, and {args.runs} runs pooled.", "",
             "| sigma | skew | counts, one run | paired, one run | counts, pooled | paired, pooled |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {row['sigma']:.2f} | {row['skew']:.2f} | {row['counts one']:.1%} | {row['paired one']:.1%} | "
              f"{row['counts pooled']:.1%} | {row['paired pooled']:.1%} |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--runs", type=int, default=6, help="runs pooled (default 6: the runs at main's tiers)")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args(argv)
    if args.trials < 1 or args.points < 1 or args.runs < 1:
        print("error: --trials, --points and --runs must be at least 1", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    rows = [{"sigma": sigma, "skew": skew, **missed_shares(rng, args.trials, args.points, args.runs, sigma, skew)}
            for sigma in SIGMAS for skew in SKEWS]
    text = markdown(rows, args)
    made = {"command": "python -m tools.yardstick_power " + " ".join(argv if argv is not None else sys.argv[1:]),
            "git_commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    with writing_into([args.out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "yardstick_power.json").write_text(json.dumps({**made, "rows": rows}, indent=2) + "\n")
        (args.out / "yardstick_power.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
