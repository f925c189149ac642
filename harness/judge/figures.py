"""The judge's checks of a tier's figure: pure functions of what the judge saw.

A figure is believed only where it could be true: as many samples as the timed calls the judge
counted, finite and positive, adding up to no more than the judge's own wall clock for the tier,
not below the physical limit (the copy floor, :mod:`harness.judge.floor`), and, for the timers
that bracket a call, not shorter than CUPTI's device time of the same calls. Anything else is
:class:`Rejected` with the reason (docs/judging.md, promise 4). Nothing here talks to a worker;
:class:`harness.judge.session.VariantJudge` calls these once a tier has ended.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping

import torch

from harness.data.definition import TORCH_DTYPES
from harness.data.workloads import Workload
from harness.facts import CONTEST_TIER, LIBRARY_TIERS, Tier
from harness.judge.check import CheckResult, Status
from harness.judge.floor import floor_margin, physical_limit_us
from harness.judge.timing import (CONTEST_SETTINGS, CONTEST_TRIALS, SYNC_ITERS, TimingConfig, contest_samples,
                                  contest_value)
from harness.judge.timing.stats import trial_means
from harness.records.trace import FloorMeasurement, TierFigure

#: An event pair brackets the kernels of a call, so the events and sync figures cannot be shorter
#: than CUPTI's kernel time of the same call; this much below is noise (docs/judging.md).
BRACKET_SLACK = 0.10


class Rejected(Exception):
    """A verdict reached while the worker is still talking: the workload's trace, once it is done."""

    def __init__(self, status: Status, log: str, check: CheckResult | None = None):
        super().__init__(log)
        self.status, self.log, self.check = status, log, check


class CutTooFast(Rejected):
    """A contest or sync tier cut as a slow solution's, yet faster than half its budget by the judge's clock
    (:func:`check_cut`): a solution claiming to be slow, or an honest one whose estimate calls met a hiccup.
    The judge times such a tier once more on fresh inputs before this is the verdict
    (``harness.judge.session.CUT_RETIMES``); ``calls`` is set to the calls the judge saw of the order given up
    (one a trial)."""

    calls = 0


def _reject(log: str, kind: type[Rejected] = Rejected) -> Rejected:
    return kind(Status.RUNTIME_ERROR, "timing rejected: " + log)


def expected_samples(tier: str, calls: int) -> int:
    """Samples a tier must report for the ``calls`` timed calls the judge saw: one each; for the
    contest tier its timer's ``repeat_iters`` calls a trial at the contest's settings, each of its
    :data:`CONTEST_TRIALS` trials reported as one call; for the sync tier :data:`SYNC_ITERS` per
    trial, each trial reported as one call
    (-1: no count is right; a slow solution's contest or sync tier may report fewer,
    :func:`check_cut`)."""
    if tier == Tier.SYNC:
        return calls * SYNC_ITERS
    if tier != CONTEST_TIER:
        return calls
    return contest_samples(calls) if calls == CONTEST_TRIALS else -1


def check_samples(tier: str, samples: list[float], calls: int, wall_s: float, config: TimingConfig) -> None:
    """The raw samples (µs) of a tier against what the judge saw.

    Raises:
        Rejected: fewer calls than ``config.min_iters`` (any tier but the library tiers, which
            report one a trial: the contest's :data:`CONTEST_TRIALS`, the sync tier's ``config.trials``),
            a sample count other than :func:`expected_samples` (or a contest or sync tier's cut that
            :func:`check_cut` refuses), a non-finite or
            non-positive sample, or samples that add up to more than ``wall_s`` (s), the judge's
            own clock for the whole tier.
    """
    check_calls(tier, calls, config)
    may_be_cut = tier in (Tier.SYNC, CONTEST_TIER)  # their calls were counted by check_calls
    if may_be_cut and samples and len(samples) != expected_samples(tier, calls):
        check_cut(tier, len(samples), wall_s, config)
    elif len(samples) != expected_samples(tier, calls) or not samples:
        raise _reject(f"{tier} tier reported {len(samples)} samples for the {calls} timed calls the judge saw")
    if not all(math.isfinite(s) and s > 0 for s in samples):
        raise _reject(f"{tier} tier has non-positive or non-finite samples")
    if sum(samples) * 1e-6 > wall_s:
        raise _reject(f"{tier} tier's {calls} calls add up to {sum(samples):.1f} µs, more than the "
                      f"{wall_s * 1e6:.1f} µs the judge's wall clock saw for the whole tier")


def check_calls(tier: str, calls: int, config: TimingConfig) -> None:
    """The timed calls the judge saw a tier report: the library tiers one per trial (each trial's
    last outputs are verified), exactly ``config.trials`` for the sync tier and
    :data:`CONTEST_TRIALS` for the contest tier; every other at least ``config.min_iters``.

    Raises:
        Rejected: another count.
    """
    trials = {Tier.SYNC: config.trials, CONTEST_TIER: CONTEST_TRIALS}.get(tier)
    if trials is not None:
        if calls != trials:
            raise _reject(f"{tier} tier reported {calls} trials, the judge asked for {trials}")
        return
    least_calls = max(1, config.min_iters)
    if calls < least_calls:
        raise _reject(f"{tier} tier made {calls} timed calls, fewer than the {least_calls} every tier makes")


def cut_rule(tier: str, config: TimingConfig) -> tuple[int, int, int]:
    """``(trials, least, full)`` calls of a library tier's slow-solution rule: the contest tier's
    (:func:`~harness.judge.timing.contest.contest_settings`: :data:`CONTEST_TRIALS` trials of at
    least ``config.min_iters`` calls, of the contest's ``repeat_iters`` in full) or the sync tier's
    (:func:`~harness.judge.timing.sync.sync_plan`: ``config.trials`` trials of at least
    ``ceil(config.min_iters / config.trials)``, of :data:`SYNC_ITERS` in full)."""
    if tier == CONTEST_TIER:
        return CONTEST_TRIALS, config.min_iters, CONTEST_SETTINGS["repeat_iters"]
    trials = max(config.trials, 1)
    return trials, math.ceil(config.min_iters / trials), SYNC_ITERS


def check_cut(tier: str, count: int, wall_s: float, config: TimingConfig) -> None:
    """A contest or sync tier that reported ``count`` samples, fewer than its settings make in full:
    allowed only as the slow-solution rule makes it (:func:`cut_rule`): equal trials of ``least`` to
    ``full - 1`` calls, from a tier that took at least half its budget by the judge's own clock
    (``wall_s``; an honest cut tier takes more than the budget, the contest tier's FlashInfer
    estimate calls included).

    Raises:
        Rejected: any other count.
        CutTooFast: a cut tier faster than that.
    """
    trials, least, full = cut_rule(tier, config)
    per_trial, rest = divmod(count, trials)
    if rest or not least <= per_trial < full:
        raise _reject(f"{tier} tier reported {count} samples: {trials} trials of {full} calls, or of "
                      f"{least} to {full - 1} for a slow solution, expected")
    if wall_s < 0.5 * config.budget_s:
        raise _reject(f"{tier} tier cut to {per_trial} calls a trial in {wall_s:.3f} s: only a tier slower than "
                      f"its {config.budget_s} s budget is cut", CutTooFast)


def tier_value(tier: str, samples: list[float], trials: int) -> float | None:
    """The tier's figure (µs) from its raw samples where it is not their median: the sync tier's
    mean of trial means (flashinfer-bench 0.1.2's time_runnable per trial, averaged as its
    evaluator averages its trials), the contest tier's
    :func:`~harness.judge.timing.contest_value`; None for the others.

    Raises:
        Rejected: sync samples that do not split into ``trials`` equal trials.
    """
    if tier == Tier.SYNC:
        try:
            return statistics.mean(trial_means(samples, trials))
        except ValueError as exc:
            raise _reject(str(exc)) from exc
    if tier == CONTEST_TIER:
        return contest_value(samples)  # the sample count was checked against contest_samples
    return None


def host_diagnostic(value_us: float | None) -> float | None:
    """A diagnostic the worker reported beside a figure (``host_call_us``, ``host_probe_us``: µs
    of the solution's own process, never a figure), kept only where it could be true: finite and
    not negative; else None."""
    return value_us if value_us is not None and math.isfinite(value_us) and value_us >= 0 else None


def host_diagnostics(values_us: list[float], count: int) -> list[float] | None:
    """A list of diagnostics the worker reported, one per trial (``host_probe_trials_us``), kept only
    where it could be true: ``count`` of them, each as :func:`host_diagnostic` keeps it; else None."""
    kept = [host_diagnostic(value) for value in values_us]
    return kept if len(kept) == count and None not in kept else None


def check_floor(tier: str, value_us: float, floors: list[FloorMeasurement]) -> None:
    """A figure (µs) against the physical limit of its workload: the margin × the fastest copy of
    the state bytes the judge measured (:func:`~harness.judge.floor.physical_limit_us`,
    :func:`~harness.judge.floor.floor_margin`); no floor measured, no check.

    Raises:
        Rejected: the figure is below the limit.
    """
    limit, margin = physical_limit_us(floors), floor_margin(floors)
    if limit is not None and value_us < margin * limit:
        raise _reject(f"{tier} figure {value_us:.3f} µs is below the physical limit of this workload: {margin} x "
                      f"the copy floor {limit:.3f} µs (the fastest device copy of the state bytes measured; "
                      "docs/judging.md)")


def check_brackets(figures: Mapping[str, TierFigure]) -> None:
    """Events and sync figures bracket the call's kernels, and the contest's span covers them: none
    is shorter than CUPTI's kernel time. The contest and sync figures come from the contest
    libraries' timers running in the solution's process (FlashInfer's; flashinfer-bench's loop),
    which it can patch, so this bound by the timing core's CUPTI figure (and the copy floor) is
    what makes them checked figures rather than the solution's own claims.

    Raises:
        Rejected: such a figure more than :data:`BRACKET_SLACK` below CUPTI's.
    """
    cupti = figures.get(Tier.CUPTI)
    if not cupti or not cupti.available:
        return
    for tier in (CONTEST_TIER, Tier.EVENTS, Tier.SYNC):
        figure = figures.get(tier)
        if figure and figure.available and figure.value_us < (1 - BRACKET_SLACK) * cupti.value_us:
            raise _reject(f"the {tier} figure {figure.value_us:.3f} µs is shorter than the {cupti.value_us:.3f} µs "
                          "CUPTI recorded for the kernels of the same calls: the timed interval did not contain "
                          "the work (launched on another stream?)")


def bounded_claims(figures: Mapping[str, TierFigure]) -> dict[str, TierFigure]:
    """``figures`` with each available figure of a library tier (``contest``, ``sync``: timed in the
    solution's process, :data:`~harness.facts.LIBRARY_TIERS`) made unavailable where no CUPTI figure
    of the timing core bounds it from below (:func:`check_brackets`): such a figure would be the
    solution's word, bounded by the copy floor alone."""
    cupti = figures.get(Tier.CUPTI)
    if cupti is not None and cupti.available:
        return dict(figures)
    why = ("timed in the solution's process, and no CUPTI figure of the timing core bounds it from below "
           f"({cupti.reason if cupti is not None else 'cupti tier not run'})")
    return {tier: TierFigure(tier=tier, available=False, reason=why)
            if tier in LIBRARY_TIERS and figure.available else figure for tier, figure in figures.items()}


def bytes_moved(definition, workload: Workload, state_dtype: str) -> int:
    """Least bytes a kernel moves: the state read and written (in ``state_dtype``), the other
    inputs read, the output written; the numerator of a figure's GB/s."""
    state_bytes = torch.empty((), dtype=TORCH_DTYPES[state_dtype]).element_size()
    total = 0
    for name, spec in definition.inputs.items():
        if spec.shape is None or name not in workload.inputs:
            continue
        numel = math.prod(definition.shape_of(spec, workload.axes))
        size = state_bytes if name == "state" else torch.empty((), dtype=spec.torch_dtype).element_size()
        total += numel * size * (2 if name == "state" else 1)
    for spec in definition.outputs.values():
        if spec.name != "new_state":  # the state's write is counted above
            total += math.prod(definition.shape_of(spec, workload.axes)) * torch.empty(
                (), dtype=spec.torch_dtype).element_size()
    return total
