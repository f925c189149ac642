"""The contest's score, predicted from stored runs (``python -m harness score``).

Two rules, never mixed: every result and every table names its rule.

**final** (the default, :func:`final_scores`): what the final contest computed,
flashinfer-bench's ``TraceSet.get_solution_score`` (``flashinfer_bench/data/trace_set.py``
on its main branch, read at 40e6ca7; docs/interop.md, "The contest's score"). Per solution
label and GPU, against one baseline label (by default ``fi-baseline-wrapper``, FlashInfer's own
kernel in the form the contest's ``baseline`` author shipped it, where the runs hold it, else
``fi-baseline``: :func:`default_baseline`):

* each side's figure on a workload is its lowest PASSED latency (µs) there;
* a workload counts where the baseline has a figure and the solution has a trace; the
  score is the mean over those workloads of baseline µs / solution µs (a workload without
  a passed baseline is left out of the mean, not counted 0);
* any trace of the solution that did not pass makes the whole score 0;
* the baseline itself is not scored.

The solution's traces are those of the newest run of the set on that GPU that holds it
(the contest judged one submission once; an older run of an older version does not count).
The baseline's come from that same run where it holds the baseline, else from every run
of the set on that GPU that does (the lowest over them, the rule for several traces); each
result names the runs. SKIPPED (ours: the solution cannot run on this machine) is no
flashinfer-bench status and never reaches its traces (docs/interop.md): it is left out.

**reference** (:func:`reference_scores`): the starter kit's first rule (its FAQ until
PR #27): the mean over the set's workloads of pt-reference µs / solution µs, a workload the
solution did not pass counting 0. The solution's figure per workload comes from the newest
run that holds it; the reference's is the median over every run of the set on the GPU that
holds pt-reference, and its spread and the score with the fastest and slowest reference
figures say how much of the score is the reference's noise.

Both rules split a score into the batch sizes' contributions (``by_batch``, adding up to
the score) and read one tier for baseline and solution alike: the ``contest`` tier (the
final contest's own timer, ``--tiers contest``) wherever the runs hold it, else the runs'
headline tier (CUPTI on a GPU); the output names the tier.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessInputError
from harness.facts import CONTEST_BASELINE_SOLUTION, CONTEST_TIER, FLASHINFER_SOLUTION, REFERENCE_SOLUTION
from harness.records.report import escape
from harness.records.store import StoredRun
from harness.records.trace import EvaluationStatus, Trace


def _figure(trace: Trace, tier: str) -> float | None:
    """The tier's µs of a PASSED trace, None otherwise."""
    performance = trace.evaluation.performance
    if trace.evaluation.status != EvaluationStatus.PASSED or performance is None:
        return None
    figure = performance.tiers.get(tier)
    return figure.value_us if figure is not None and figure.available and figure.value_us else None


def _tier_of(traces: list[Trace]) -> str | None:
    """``contest`` where a PASSED trace of ``traces`` has it, else their most common headline tier."""
    if any(_figure(t, CONTEST_TIER) for t in traces):
        return CONTEST_TIER
    tiers = [t.evaluation.performance.headline_tier for t in traces
             if t.evaluation.performance is not None and t.evaluation.performance.headline_tier]
    return max(set(tiers), key=tiers.count) if tiers else None


def _default_tier(runs: list[StoredRun]) -> str | None:
    """:func:`_tier_of` over every trace of ``runs``."""
    return _tier_of([t for r in runs for t in r.traces])


# -------------------------------------------------------------------- the final rule


@dataclass
class FinalScore:
    """The score of one solution label on one GPU under the final rule (see module doc)."""

    solution: str
    hardware: str
    tier: str
    """The timing tier both the solution's and the baseline's figures come from."""
    baseline: str
    """The baseline's label (the numerator of every ratio)."""
    score: float
    """Mean over the counted workloads of baseline µs / solution µs; 0 when a trace failed."""
    counted: int
    """Workloads in the mean: the baseline has a figure there and the solution a trace."""
    passed: int
    """The set's workloads where the solution has a PASSED trace."""
    workloads: int
    """The set's workloads."""
    run: str
    """The run the solution's traces come from (the newest of the set on this GPU that holds it)."""
    baseline_runs: list[str] = field(default_factory=list)
    """The runs the baseline's figures come from."""
    same_run: bool = True
    """Whether the baseline was measured in ``run``; else in ``baseline_runs``, other runs of the set."""
    failed: str | None = None
    """Why the score is 0 (the traces that did not pass), None when every trace passed."""
    by_batch: dict[int, float] = field(default_factory=dict)
    """Batch size -> its workloads' share of ``score`` (the values add up to ``score``; {} when 0)."""
    untimed: int = 0
    """Workloads left out of ``counted`` as the solution's PASSED traces there have no ``tier`` figure
    (flashinfer-bench has one latency per trace and would stop; here the table says so)."""
    baseline_spread: float | None = None
    """Median over workloads of (max - min) / median of the baseline's figures in the runs of the
    set on this GPU that hold it (each run's lowest); None where no workload is in two runs."""
    spread_runs: int = 0
    """Most runs that hold a baseline figure for one workload (what the spread is over)."""


def _lowest(traces: list[Trace], tier: str) -> dict[str, float]:
    """uuid -> the lowest ``tier`` figure (µs) over the PASSED traces of ``traces``."""
    best: dict[str, float] = {}
    for trace in traces:
        us = _figure(trace, tier)
        if us and us < best.get(trace.workload.uuid, math.inf):
            best[trace.workload.uuid] = us
    return best


def _ran(run: StoredRun) -> dict[str, list[Trace]]:
    """GPU -> the run's traces on it, SKIPPED left out (not a flashinfer-bench status)."""
    by_gpu: dict[str, list[Trace]] = defaultdict(list)
    for trace in run.traces:
        if trace.evaluation.status != EvaluationStatus.SKIPPED:
            by_gpu[trace.evaluation.environment.hardware].append(trace)
    return by_gpu


def _set_runs(runs: list[StoredRun], set_name: str, where: Path | None) -> dict[str, list[tuple[str, list[Trace]]]]:
    """GPU -> [(run id, its traces on that GPU)] of the runs of ``set_name``, oldest first.

    Raises:
        HarnessInputError: no run of ``set_name`` (``where``, field ``workloads`` of run.json).
    """
    chosen = sorted((r for r in runs if r.meta.get("workloads") == set_name), key=lambda r: r.name)
    if not chosen:
        raise HarnessInputError(_folder(runs, where), "workloads", f"no run of {set_name} (run.json's field)")
    by_gpu: dict[str, list[tuple[str, list[Trace]]]] = defaultdict(list)
    for run in chosen:
        for hardware, traces in _ran(run).items():
            by_gpu[hardware].append((run.name, traces))
    return by_gpu


def _folder(runs: list[StoredRun], where: Path | None) -> Path:
    """The folder an error names: ``where``, else the runs' parent folder."""
    return where or (runs[0].run_dir.parent if runs else Path("runs"))


def final_scores(runs: list[StoredRun], set_name: str, workloads: dict[str, int],
                 baseline: str = FLASHINFER_SOLUTION, tier: str | None = None,
                 where: Path | None = None) -> list[FinalScore]:
    """Scores under the final rule (baseline µs / solution µs, see module doc) of every solution
    label but ``baseline`` in the runs of set ``set_name``, per GPU.

    Args:
        runs: stored runs (:func:`harness.records.store.load_runs`); runs of other sets are ignored.
        set_name: the set, as ``run.json``'s ``workloads`` names it (``contest-v2``).
        workloads: the set's workloads, uuid -> batch size; traces of other workloads are ignored.
        baseline: the baseline's solution label (default ``fi-baseline``).
        tier: the timing tier; None takes, per GPU, ``contest`` where its runs hold it, else their
            headline tier.
        where: the folder errors name (default: the runs' parent folder).

    Returns:
        One :class:`FinalScore` per (GPU, solution label) with a workload to compare, best first
        per GPU. A GPU whose runs hold no baseline has none (:func:`gpus_without`).

    Raises:
        HarnessInputError: no run of ``set_name``, or none of them holds a trace of ``baseline``.
    """
    by_gpu = _set_runs(runs, set_name, where)
    labels = {t.solution for gpu_runs in by_gpu.values() for _, traces in gpu_runs for t in traces}
    if baseline not in labels:
        raise HarnessInputError(_folder(runs, where), "solution", f"no {set_name} run holds the baseline "
                                f"{baseline!r}; labels there: {', '.join(sorted(labels)) or 'none'}")
    scores = [s for hardware, gpu_runs in by_gpu.items()
              for s in _gpu_scores(hardware, gpu_runs, baseline, tier, workloads)]
    return sorted(scores, key=lambda s: (s.hardware, -s.score, s.solution))


def default_baseline(runs: list[StoredRun], set_name: str) -> str:
    """The final rule's baseline when none is named: the contest's baseline in its shipped form
    (:data:`~harness.facts.CONTEST_BASELINE_SOLUTION`, judged from ``baselines/``) where a run of
    ``set_name`` holds it, else ``fi-baseline`` (the same kernel in our destination-passing form,
    which pays a state copy the contest's baseline did not: docs/interop.md)."""
    held = set().union(*_labels_by_gpu(runs, set_name).values())
    return CONTEST_BASELINE_SOLUTION if CONTEST_BASELINE_SOLUTION in held else FLASHINFER_SOLUTION


def gpus_without(runs: list[StoredRun], set_name: str, baseline: str = FLASHINFER_SOLUTION) -> list[str]:
    """The GPUs with runs of ``set_name`` where none holds a trace of ``baseline`` (not scored)."""
    return sorted(hardware for hardware, labels in _labels_by_gpu(runs, set_name).items() if baseline not in labels)


def _labels_by_gpu(runs: list[StoredRun], set_name: str) -> dict[str, set[str]]:
    """GPU -> the solution labels of the runs of ``set_name`` on it (SKIPPED left out: :func:`_ran`)."""
    by_gpu: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        if run.meta.get("workloads") == set_name:
            for hardware, traces in _ran(run).items():
                by_gpu[hardware] |= {t.solution for t in traces}
    return by_gpu


def _gpu_scores(hardware: str, gpu_runs: list[tuple[str, list[Trace]]], baseline: str, tier: str | None,
                workloads: dict[str, int]) -> list[FinalScore]:
    """The scores of one GPU's runs (oldest first); [] without a baseline or a tier there."""
    tier = tier or _tier_of([t for _, traces in gpu_runs for t in traces])
    held = {name: [t for t in traces if t.solution == baseline] for name, traces in gpu_runs}
    held = {name: traces for name, traces in held.items() if traces}
    if tier is None or not held:
        return []
    spread, spread_runs = _spread([_lowest(traces, tier) for traces in held.values()], workloads)
    newest: dict[str, tuple[str, list[Trace]]] = {}
    for name, traces in gpu_runs:  # a later run replaces an earlier one whole
        for label in {t.solution for t in traces} - {baseline}:
            newest[label] = (name, [t for t in traces if t.solution == label])
    scores = []
    for label, (name, mine) in newest.items():
        same = name in held
        source = {name: held[name]} if same else held
        about = dict(solution=label, hardware=hardware, tier=tier, baseline=baseline, run=name,
                     baseline_runs=list(source), same_run=same, baseline_spread=spread, spread_runs=spread_runs)
        base_us = _lowest([t for traces in source.values() for t in traces], tier)
        scores.append(_final_score(mine, base_us, workloads, tier, about))
    return [s for s in scores if s is not None]


def _final_score(mine: list[Trace], base_us: dict[str, float], workloads: dict[str, int], tier: str,
                 about: dict) -> FinalScore | None:
    """One solution's score from its traces and the baseline's lowest µs per workload; None
    where no workload compares (flashinfer-bench scores nothing then either)."""
    mine = [t for t in mine if t.workload.uuid in workloads]
    common = {t.workload.uuid for t in mine} & base_us.keys()
    if not common:
        return None
    passed = len({t.workload.uuid for t in mine if t.is_successful()})
    failures = [t for t in mine if not t.is_successful()]
    if failures:  # flashinfer-bench: any failed trace scores the whole solution 0
        return FinalScore(score=0.0, counted=len(common), passed=passed, workloads=len(workloads),
                          failed=_failure(failures, workloads), **about)
    best = _lowest(mine, tier)
    ratios = {uuid: base_us[uuid] / best[uuid] for uuid in common if uuid in best}
    if not ratios:
        return None
    by_batch: dict[int, float] = defaultdict(float)
    for uuid, ratio in ratios.items():
        by_batch[workloads[uuid]] += ratio / len(ratios)
    return FinalScore(score=sum(ratios.values()) / len(ratios), counted=len(ratios), passed=passed,
                      workloads=len(workloads), by_batch=dict(sorted(by_batch.items())),
                      untimed=len(common) - len(ratios), **about)


def _failure(failures: list[Trace], workloads: dict[str, int]) -> str:
    """``N not passed, first: STATUS at B=b (uuid)``."""
    first = failures[0]
    return (f"{len(failures)} not passed, first: {first.evaluation.status.value} at "
            f"B={workloads[first.workload.uuid]} ({first.workload.uuid})")


def _spread(per_run: list[dict[str, float]], workloads: dict[str, int]) -> tuple[float | None, int]:
    """Median over the workloads in two runs or more of (max - min) / median of the runs' µs,
    and the most runs one workload is in."""
    figures: dict[str, list[float]] = defaultdict(list)
    for run in per_run:
        for uuid, us in run.items():
            if uuid in workloads:
                figures[uuid].append(us)
    spreads = [(max(f) - min(f)) / statistics.median(f) for f in figures.values() if len(f) > 1]
    return (statistics.median(spreads) if spreads else None), max(map(len, figures.values()), default=0)


def print_final_scores(scores: list[FinalScore], set_name: str, baseline: str, console=None) -> None:
    """The final rule's table: one row per (GPU, solution): tier, score, workloads counted and
    passed, the batch sizes' shares, where the baseline's figures come from and their spread, and
    why a score is 0."""
    from rich.table import Table

    console = console or _console()
    table = Table(title=f"predicted contest score, {set_name}, FINAL rule: mean of {baseline} µs / solution µs",
                  caption="the final contest's rule (flashinfer-bench get_solution_score): lowest passed µs per "
                          "workload; a workload without a passed baseline left out; any failed trace scores 0")
    for col in ("GPU", "solution", "tier", "score", "counted", "passed", "share by batch size",
                "baseline from", "baseline spread", "problem"):
        table.add_column(col, justify="right" if col in ("score", "counted", "passed", "baseline spread")
                         else "left", overflow="fold", no_wrap=col == "solution")  # a label stays whole
    for s in scores:
        table.add_row(escape(s.hardware), escape(s.solution), s.tier, f"{s.score:.2f}",
                      f"{s.counted}/{s.workloads}", f"{s.passed}/{s.workloads}", _shares(s.by_batch, s.score),
                      _baseline_from(s), "" if s.baseline_spread is None
                      else f"{100 * s.baseline_spread:.1f}% ({s.spread_runs} runs)", escape(_problem(s)))
    console.print(table)


def _baseline_from(score: FinalScore) -> str:
    """``same run``, or ``other runs: <time>, ...`` (a run id's time stamp)."""
    if score.same_run:
        return "same run"
    return "other runs: " + ", ".join(name.split("_")[0] for name in score.baseline_runs)


def _problem(score: FinalScore) -> str:
    """Why a score is 0, or how many counted workloads had no figure in the tier."""
    if score.failed:
        return score.failed
    return f"{score.untimed} workloads without a {score.tier} figure, left out" if score.untimed else ""


def _shares(by_batch: dict[int, float], score: float) -> str:
    """``B=1: 4%, B=4: 9%, ...`` (each batch size's share of ``score``); '' for a 0 score."""
    return ", ".join(f"B={b}: {100 * v / score:.0f}%" for b, v in by_batch.items()) if score else ""


def _console():
    """A rich console as wide as the terminal, 160 columns when the output is not one."""
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 160)


# -------------------------------------------------------------------- the reference rule


@dataclass
class ReferenceScore:
    """The score of one solution label on one GPU under the reference rule (see module doc)."""

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


def reference_scores(runs: list[StoredRun], set_name: str, workloads: dict[str, int],
                     tier: str | None = None) -> list[ReferenceScore]:
    """Scores under the reference rule (pt-reference µs / solution µs, see module doc) of every
    solution label in ``runs`` of set ``set_name``.

    Args:
        runs: stored runs (:func:`harness.records.store.load_runs`); runs of other sets are ignored.
        set_name: the set, as ``run.json``'s ``workloads`` names it (``contest-v2``).
        workloads: the set's workloads, uuid -> batch size (all of them count in the mean).
        tier: the timing tier; None takes ``contest`` where the runs hold it, else their headline tier.

    Returns:
        One :class:`ReferenceScore` per (GPU, solution label) with at least one PASSED workload, best first per GPU.
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
    scores = [_reference_score(label, hardware, tier, traces, references, workloads)
              for (hardware, label), traces in newest.items()]
    scores = [s for s in scores if s is not None]
    return sorted(scores, key=lambda s: (s.hardware, -s.score))


def _reference_score(label: str, hardware: str, tier: str, traces: dict[str, Trace],
                     references: dict[tuple[str, str], list[float]],
                     workloads: dict[str, int]) -> ReferenceScore | None:
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
    return ReferenceScore(solution=label, hardware=hardware, tier=tier, score=mean_speedup(statistics.median),
                          passed=len(passed), workloads=len(workloads), by_batch=dict(sorted(by_batch.items())),
                          reference_runs=runs, reference_spread=statistics.median(spreads) if spreads else None,
                          score_range=(mean_speedup(min), mean_speedup(max)) if spreads else None)


def print_reference_scores(scores: list[ReferenceScore], set_name: str, console=None) -> None:
    """The reference rule's table: one row per (GPU, solution): score, passed, the batch sizes'
    shares, the reference's noise."""
    from rich.table import Table

    console = console or _console()
    tiers = sorted({s.tier for s in scores})
    table = Table(title=f"score, {set_name}, REFERENCE rule: mean of {REFERENCE_SOLUTION} µs / solution µs",
                  caption=f"the starter kit's first rule, not the final contest's (--rule final); "
                          f"{', '.join(tiers)} tier; a workload not passed counts 0")
    for col in ("GPU", "solution", "score", "passed", "share by batch size", "reference runs",
                "reference spread", "score range"):
        table.add_column(col, justify="left" if col in ("GPU", "solution", "share by batch size") else "right",
                         overflow="fold")
    for s in scores:
        table.add_row(escape(s.hardware), escape(s.solution), f"{s.score:.1f}", f"{s.passed}/{s.workloads}",
                      _shares(s.by_batch, s.score),
                      str(s.reference_runs), "" if s.reference_spread is None else f"{100 * s.reference_spread:.1f}%",
                      "" if s.score_range is None else f"{s.score_range[0]:.1f}–{s.score_range[1]:.1f}")
    console.print(table)
