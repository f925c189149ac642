"""What a tier returns: :class:`TimingStats` (µs) or :class:`TierUnavailable` (why not); and the
call shapes every timer shares (:func:`nothing_after`, :func:`positional_call`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class TimingStats:
    """Summary of one tier's samples, all in µs."""

    tier: str
    value_us: float  # the tier's headline figure (median; mean of trial means for sync)
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    max_us: float
    iters: int
    extra: dict[str, Any] = field(default_factory=dict)
    samples_us: list[float] = field(default_factory=list, repr=False)  # every timed call, in order


@dataclass
class TierUnavailable:
    """A tier that could not produce a number here, and why."""

    tier: str
    reason: str


def nothing_after(index: int) -> None:
    """Default ``after`` hook of every timer: nothing to do after a timed call."""


def positional_call(fn: Callable, entry: Callable | None, args: Any) -> tuple[Callable, tuple]:
    """``(call, values)`` for a library's timer that calls ``call(*values)`` itself (the contest and
    sync tiers): a setup dict is handed over as its values, in order, as flashinfer-bench passes a
    definition's arguments, and called through ``entry`` (the judge's positional DPS entry) where
    there is one, else through ``fn`` on them put back into a dict; anything else is one value."""
    if not isinstance(args, dict):
        return entry or fn, (args,)
    names = list(args)
    return entry or (lambda *given: fn(dict(zip(names, given)))), tuple(args.values())


def split_trials(samples_us: list[float], trials: int, tier: str) -> list[list[float]]:
    """``samples_us`` split into ``trials`` equal parts, in order: a sync or contest tier's trials
    follow one another in its samples.

    Raises:
        ValueError: the samples do not split into ``trials`` equal, non-empty parts (the message
            names ``tier``).
    """
    trials = max(1, trials)
    per_trial = len(samples_us) // trials
    if per_trial == 0 or per_trial * trials != len(samples_us):
        raise ValueError(f"{len(samples_us)} {tier} samples do not split into {trials} trials")
    return [samples_us[i * per_trial:(i + 1) * per_trial] for i in range(trials)]


def trial_means(samples_us: list[float], trials: int) -> list[float]:
    """Each sync trial's mean (µs), in order (flashinfer-bench 0.1.2's ``time_runnable`` returns each
    one's mean).

    Raises:
        ValueError: the samples do not split into ``trials`` equal, non-empty parts.
    """
    return [statistics.mean(part) for part in split_trials(samples_us, trials, "sync")]


def trial_medians(samples_us: list[float], trials: int) -> list[float]:
    """Each contest trial's median (µs), in order (FlashInfer's CUPTI timer returns each call's span;
    a trial's figure is their median).

    Raises:
        ValueError: the samples do not split into ``trials`` equal, non-empty parts.
    """
    return [statistics.median(part) for part in split_trials(samples_us, trials, "contest")]


#: Half-width of :func:`window_mean`'s window, a fraction of the median: ±5% holds three 32-ns CUPTI
#: steps either side of a 2 µs kernel's median (the steps of the quantized figures it must average)
#: and leaves out the slow calls of a host hiccup or a clock dip, which land far above.
WINDOW_MEAN_HALF_WIDTH = 0.05


def window_mean(samples_us: list[float], half_width: float = WINDOW_MEAN_HALF_WIDTH) -> float:
    """Mean (µs) of the samples that lie within ``half_width`` × their median of that median: an
    estimate of a µs kernel's duration below the timer's step, for comparing builds (never a tier's
    figure).

    CUPTI's timestamps step in 32 ns on the H100 (:func:`harness.judge.timing.stop_rule.timer_tick`),
    so a 2 µs kernel's median moves in 1.6% steps and two builds 10 ns apart read the same. A
    duration d read as the difference of two timestamps of a clock of step T, started at a phase
    uniform over the step, is ⌈(s + d)/T⌉T − ⌈s/T⌉T with expectation exactly d: the readings
    dither, and their mean resolves what the median cannot (thousands of calls: under a
    nanosecond of the step's own spread, T/√12 ≈ 9 ns a call). The window keeps every reading
    of the steps around the median whole (a trimmed mean would cut a step's readings part way and
    lean) and drops the slow tail.

    Raises:
        ValueError: no samples.
    """
    if not samples_us:
        raise ValueError("window_mean of no samples")
    median = statistics.median(samples_us)
    return statistics.mean(x for x in samples_us if abs(x - median) <= half_width * abs(median))


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100] of sorted values."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(tier: str, samples_us: list[float], value_us: float | None = None, **extra) -> TimingStats:
    """Median, p10, p90, min and max of ``samples_us``.

    Raises:
        ValueError: no samples.
    """
    if not samples_us:
        raise ValueError(f"tier {tier}: no samples")
    s = sorted(samples_us)
    median = statistics.median(s)
    return TimingStats(tier, median if value_us is None else value_us, median, percentile(s, 10),
                       percentile(s, 90), s[0], s[-1], len(s), extra, list(samples_us))
