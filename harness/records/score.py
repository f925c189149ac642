"""The contest's score, predicted from stored runs (``python -m harness score``).

The contest scored a solution on one workload set (contest-v2, 54
workloads) as the arithmetic mean over its workloads of the reference's
latency over the solution's, pt-reference being the definition's own
reference run eagerly; a workload the solution did not pass counts 0.

This module computes that number from the run folders under a results
directory, per GPU (the ``hardware`` every trace records) and per solution
label, from one timing tier:

* the solution's figure per workload comes from the newest run that holds
  the solution on that set and GPU;
* the reference's figure per workload is the median over every run of the
  same set on the same GPU that holds pt-reference, so that a score can use a
  reference measured in another run of the same machine. The spread of those
  figures (``(max - min) / median`` per workload, the median of that over
  the workloads) and the score recomputed with each workload's fastest and
  slowest reference figure say how much of a score is the reference's noise;
* ``by_batch`` splits the score into the batch sizes' contributions (they
  add up to the score).

The tier is the ``contest`` tier (the final contest's own timer,
``--tiers contest``) wherever the runs hold it, else the runs' headline tier
(CUPTI on a GPU); the output names the tier it used.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from harness.facts import CONTEST_TIER, REFERENCE_SOLUTION
from harness.records.report import escape
from harness.records.store import StoredRun
from harness.records.trace import EvaluationStatus, Trace


@dataclass
class Score:
    """The predicted contest score of one solution label on one GPU."""

    solution: str
    hardware: str
    tier: str
    score: float
    """Mean over the set's workloads of reference µs / solution µs (0 where not passed or no reference)."""
    passed: int
    workloads: int
    by_batch: dict[int, float] = field(default_factory=dict)
    """Batch size -> its workloads' share of ``score`` (the values add up to ``score``)."""
    reference_runs: int = 0
    """Most runs that hold pt-reference for one workload of the set on this GPU."""
    reference_spread: float | None = None
    """Median over workloads of (max - min) / median of the reference's figures; None with one run."""
    score_range: tuple[float, float] | None = None
    """The score with every workload's fastest, then slowest, reference figure; None with one run."""


def _figure(trace: Trace, tier: str) -> float | None:
    """The tier's µs of a PASSED trace, None otherwise."""
    performance = trace.evaluation.performance
    if trace.evaluation.status != EvaluationStatus.PASSED or performance is None:
        return None
    figure = performance.tiers.get(tier)
    return figure.value_us if figure is not None and figure.available and figure.value_us else None


def _default_tier(runs: list[StoredRun]) -> str | None:
    """``contest`` where a PASSED trace of ``runs`` has it, else their most common headline tier."""
    if any(_figure(t, CONTEST_TIER) for r in runs for t in r.traces):
        return CONTEST_TIER
    tiers = [t.evaluation.performance.headline_tier for r in runs for t in r.traces
             if t.evaluation.performance is not None and t.evaluation.performance.headline_tier]
    return max(set(tiers), key=tiers.count) if tiers else None


def contest_scores(runs: list[StoredRun], set_name: str, workloads: dict[str, int],
                   tier: str | None = None) -> list[Score]:
    """Scores of every solution label in ``runs`` of set ``set_name`` (see module doc).

    Args:
        runs: stored runs (:func:`harness.records.store.load_runs`); runs of other sets are ignored.
        set_name: the set, as ``run.json``'s ``workloads`` names it (``contest-v2``).
        workloads: the set's workloads, uuid -> batch size (all of them count in the mean).
        tier: the timing tier; None takes ``contest`` where the runs hold it, else their headline tier.

    Returns:
        One :class:`Score` per (GPU, solution label) with at least one PASSED workload, best first per GPU.
    """
    runs = sorted((r for r in runs if r.meta.get("workloads") == set_name), key=lambda r: r.name)
    tier = tier or _default_tier(runs)
    if tier is None:
        return []
    references: dict[tuple[str, str], list[float]] = defaultdict(list)  # (hardware, uuid) -> µs per run
    newest: dict[tuple[str, str], dict[str, Trace]] = defaultdict(dict)  # (hardware, label) -> uuid -> trace
    for run in runs:
        for trace in run.traces:
            hardware = trace.evaluation.environment.hardware
            if trace.solution == REFERENCE_SOLUTION and (us := _figure(trace, tier)):
                references[(hardware, trace.workload.uuid)].append(us)
            newest[(hardware, trace.solution)][trace.workload.uuid] = trace  # a later run replaces an earlier
    scores = [_score(label, hardware, tier, traces, references, workloads)
              for (hardware, label), traces in newest.items()]
    scores = [s for s in scores if s is not None]
    return sorted(scores, key=lambda s: (s.hardware, -s.score))


def _score(label: str, hardware: str, tier: str, traces: dict[str, Trace],
           references: dict[tuple[str, str], list[float]], workloads: dict[str, int]) -> Score | None:
    mine = {uuid: _figure(t, tier) for uuid, t in traces.items() if uuid in workloads}
    passed = {uuid: us for uuid, us in mine.items() if us}
    if not passed:
        return None
    refs = {uuid: references.get((hardware, uuid), []) for uuid in workloads}

    def mean_speedup(pick) -> float:
        return sum(pick(refs[u]) / us for u, us in passed.items() if refs[u]) / len(workloads)

    by_batch: dict[int, float] = defaultdict(float)
    for uuid, us in passed.items():
        if refs[uuid]:
            by_batch[workloads[uuid]] += statistics.median(refs[uuid]) / us / len(workloads)
    runs = max((len(r) for r in refs.values()), default=0)
    spreads = [(max(r) - min(r)) / statistics.median(r) for r in refs.values() if len(r) > 1]
    return Score(solution=label, hardware=hardware, tier=tier, score=mean_speedup(statistics.median),
                 passed=len(passed), workloads=len(workloads), by_batch=dict(sorted(by_batch.items())),
                 reference_runs=runs, reference_spread=statistics.median(spreads) if spreads else None,
                 score_range=(mean_speedup(min), mean_speedup(max)) if spreads else None)


def print_scores(scores: list[Score], set_name: str, console=None) -> None:
    """One row per (GPU, solution): score, passed, the batch sizes' shares, the reference's noise."""
    import sys

    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    tiers = sorted({s.tier for s in scores})
    table = Table(title=f"predicted contest score on {set_name} (mean of pt-reference µs / solution µs, "
                        f"{', '.join(tiers)} tier)")
    for col in ("GPU", "solution", "score", "passed", "share by batch size", "reference runs",
                "reference spread", "score range"):
        table.add_column(col, justify="left" if col in ("GPU", "solution", "share by batch size") else "right",
                         overflow="fold")
    for s in scores:
        shares = ", ".join(f"B={b}: {100 * v / s.score:.0f}%" for b, v in s.by_batch.items()) if s.score else ""
        table.add_row(escape(s.hardware), escape(s.solution), f"{s.score:.1f}", f"{s.passed}/{s.workloads}", shares,
                      str(s.reference_runs), "" if s.reference_spread is None else f"{100 * s.reference_spread:.1f}%",
                      "" if s.score_range is None else f"{s.score_range[0]:.1f}–{s.score_range[1]:.1f}")
    console.print(table)
