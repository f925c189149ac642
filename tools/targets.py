"""The project's speed targets, checked against the stored traces.

    python -m tools.targets [--results results/] [--tier cupti] [--set sweep]

Each target comes from an issue of the project (quoted in ``TARGETS``) and
compares solutions with each other or with the copy floor (a device copy of
the same fp32 state bytes), per batch size, on one workload set and timing
tier. A target is judged on the *latest run that measured every solution it
names* on one GPU: side by side, in one process tree, against that run's own
copy floor, never across runs or GPUs. Every batch size it covers must hold
for MET; a batch size without a passing number in that run is MISSED, never
assumed; NO DATA means no run measured both sides.

Writes ``<results>/targets.md`` (one table per GPU: each target, the run it
was judged on, MET/MISSED and the worst batch size) and prints it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.facts import COPY_FLOOR
from harness.paths import RESULTS_DIR
from harness.records.leaderboard import load_measurements
from harness.run_lock import writing_into

TARGETS_FILE = "targets.md"


@dataclass(frozen=True)
class Target:
    """``solution µs <= factor * other µs`` at every batch size in ``[min_batch, max_batch]``.

    ``solution`` is one solution or a tuple of them, read as their best (the lowest median per
    batch size, each from the same run); ``other`` is another solution or ``copy-floor``;
    ``strict`` asks for ``<``.
    """

    issue: int
    solution: str | tuple[str, ...]
    other: str
    factor: float = 1.0
    min_batch: int = 1
    max_batch: int | None = None
    strict: bool = False

    def describe(self) -> str:
        relation = "<" if self.strict else "≤"
        scale = "" if self.factor == 1.0 else f"{self.factor:g}× "
        if self.max_batch is None:
            batches = "every B" if self.min_batch == 1 else f"B ≥ {self.min_batch}"
        elif self.max_batch == self.min_batch:
            batches = f"B = {self.min_batch}"
        else:
            batches = f"B = {self.min_batch}–{self.max_batch}"
        return f"{self.label()} {relation} {scale}{self.other}, {batches}"

    def label(self) -> str:
        """The solution side in words: its name, or "best of (a, b, ...)"."""
        return self.solution if isinstance(self.solution, str) else f"best of ({', '.join(self.solution)})"

    def solutions(self) -> tuple[str, ...]:
        """Every solution the solution side reads."""
        return (self.solution,) if isinstance(self.solution, str) else self.solution

    def covers(self, batch: int) -> bool:
        return batch >= self.min_batch and (self.max_batch is None or batch <= self.max_batch)


BF16 = "cutedsl-bf16[bfloat16-state]"
#: Issue #33's "best own fp32 kernel": the lowest of these per batch size, in one run.
OWN_FP32 = ("cuda-v4", "fla-recurrent", "cutedsl-bf16", "cuda-v1")
#: Issue #33's "bf16-state mode": the own kernels that declare the bf16 state, read as their best.
OWN_BF16 = (BF16, "cuda-v4[bfloat16-state]")
#: The targets of issues #4, #5, #6 and #33 (CUPTI tier, sweep set). #33's cuda-v4 ≤ 1.02× the
#: floor from B = 16, cutedsl-bf16 ≤ fi-baseline and cutedsl-bf16's bf16-state two are #5's and
#: #6's rows; #33's bf16-state rows read the best of every own bf16-state kernel.
TARGETS: tuple[Target, ...] = (
    Target(4, "fla-recurrent", "fla-upstream"),
    Target(4, "fla-recurrent", "fla-upstream-kernel"),  # the same comparison without fla's wrapper copy
    Target(4, "fla-recurrent", COPY_FLOOR, 1.02, min_batch=16),
    Target(4, "fla-recurrent", COPY_FLOOR, 1.3, min_batch=1, max_batch=1),
    Target(5, "cuda-v4", "cuda-v1"),
    Target(5, "cuda-v4", COPY_FLOOR, 1.02, min_batch=16),
    Target(5, "cuda-v4", "fla-recurrent", 1.05, min_batch=1, max_batch=1),
    Target(5, "cuda-v4", "fi-baseline", min_batch=1, max_batch=1, strict=True),
    Target(6, "cutedsl-bf16", "fi-baseline"),
    Target(6, BF16, "fi-bf16state[bfloat16-state]"),
    Target(6, BF16, COPY_FLOOR, 0.55, min_batch=64),
    Target(33, OWN_FP32, COPY_FLOOR, 1.08, min_batch=1, max_batch=8),
    Target(33, OWN_FP32, COPY_FLOOR, 1.02, min_batch=16),
    Target(33, OWN_BF16, COPY_FLOOR, 0.55, min_batch=64),
    Target(33, "cuda-v4[bfloat16-state]", "fi-bf16state[bfloat16-state]"),
    Target(33, "cuda-v4", "fi-baseline"),
    Target(33, "fla-recurrent", "fi-baseline"),
    Target(33, "cuda-v1", "fi-baseline"),
)


def per_batch(measurements: pd.DataFrame, run: str, solution: str | tuple[str, ...]) -> pd.Series:
    """Median µs per batch size of ``solution`` in ``run`` (passed workloads only); for a tuple,
    the lowest of its solutions' medians at each batch size (a batch size any of them passed)."""
    if not isinstance(solution, str):
        return pd.concat([per_batch(measurements, run, s) for s in solution], axis=1).min(axis=1)
    rows = measurements[(measurements["run"] == run) & (measurements["solution"] == solution)]
    return rows.dropna(subset=["value_us"]).groupby("batch_size")["value_us"].median()


def latest_common_run(measurements: pd.DataFrame, solutions: tuple[str, ...]) -> str | None:
    """The latest run (by start time) that timed every one of ``solutions``."""
    timed = measurements.dropna(subset=["value_us"])
    runs = [set(timed.loc[timed["solution"] == s, "run"]) for s in solutions]
    common = set.intersection(*runs) if runs else set()
    if not common:
        return None
    starts = timed[timed["run"].isin(common)].groupby("run")["started"].first()
    return starts.sort_values().index[-1]


def judge(target: Target, measurements: pd.DataFrame) -> dict:
    """MET / MISSED / NO DATA for one target on one GPU's measurements."""
    run = latest_common_run(measurements, (*target.solutions(), target.other))
    row = {"issue": target.issue, "target": target.describe(), "run": run or "", "verdict": "NO DATA",
           "worst": "", "detail": ""}
    if run is None:
        return row
    mine, theirs = per_batch(measurements, run, target.solution), per_batch(measurements, run, target.other)
    batches = [b for b in sorted(set(mine.index) | set(theirs.index)) if target.covers(b)]
    ratios = {b: mine.get(b, float("nan")) / theirs.get(b, float("nan")) for b in batches}
    missing = [b for b, r in ratios.items() if pd.isna(r)]
    failing = [b for b, r in ratios.items() if not pd.isna(r) and
               (r >= target.factor if target.strict else r > target.factor)]
    worst = max((b for b in ratios if not pd.isna(ratios[b])), key=lambda b: ratios[b], default=None)
    # a batch size without a passing number (failed, or absent) is not met
    row["verdict"] = "MISSED" if failing or missing or worst is None else "MET"
    if worst is not None:
        row["worst"] = f"B={worst}: {mine[worst]:.2f} / {theirs[worst]:.2f} µs = {ratios[worst]:.3f}"
    notes = []
    if failing:
        notes.append("over at B = " + ", ".join(str(b) for b in failing))
    if missing:
        notes.append("no passing number at B = " + ", ".join(str(b) for b in missing))
    row["detail"] = "; ".join(notes)
    return row


def judge_all(measurements: pd.DataFrame, set_name: str, tier: str) -> dict[str, pd.DataFrame]:
    """Per GPU: a frame of :func:`judge` rows for every target."""
    chosen = measurements[(measurements["set"] == set_name) & (measurements["tier"] == tier)]
    return {hw: pd.DataFrame([judge(t, chosen[chosen["hardware"] == hw]) for t in TARGETS])
            for hw in sorted(chosen["hardware"].unique())}


def to_markdown(tables: dict[str, pd.DataFrame], set_name: str, tier: str) -> str:
    """The report written to ``targets.md``."""
    lines = [f"# Speed targets — {set_name} set, {tier} tier", "",
             "Generated by `python -m tools.targets` from the traces under `results/runs/`; "
             "ratios are solution µs / other µs (median per batch size), each target judged on the "
             "latest run that measured both sides.", ""]
    for hardware, table in tables.items():
        lines += [f"## {hardware}", "", "| issue | target | verdict | worst batch size | note | run |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| #{r.issue} | {r.target} | {r.verdict} | {r.worst} | {r.detail} | {r.run} |"
                  for r in table.itertuples()]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check the project's speed targets against stored traces.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--set", default="sweep", dest="set_name")
    parser.add_argument("--tier", default="cupti")
    args = parser.parse_args(argv)
    if not Path(args.results).is_dir():
        parser.error(f"--results {args.results}: no such folder")
    measurements = load_measurements(args.results)
    if measurements.empty:
        print(f"no runs under {args.results}/runs", file=sys.stderr)
        return 1
    for option, value, column in (("--set", args.set_name, "set"), ("--tier", args.tier, "tier")):
        if value not in set(measurements[column]):  # nothing to judge: never write an empty report
            parser.error(f"{option} {value!r}: no stored run has it (they have: "
                         f"{', '.join(sorted(map(str, set(measurements[column]))))})")
    text = to_markdown(judge_all(measurements, args.set_name, args.tier), args.set_name, args.tier)
    with writing_into([args.results]):  # never while a run's vault watches results/ (harness/run_lock.py)
        (Path(args.results) / TARGETS_FILE).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
