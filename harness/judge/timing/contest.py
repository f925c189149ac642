"""The contest tier: the final contest's timer, called rather than re-implemented:
``flashinfer.testing.bench_gpu_time_with_cupti`` with flashinfer-bench's settings
(:data:`~harness.judge.timing.settings.CONTEST_SETTINGS`): the *span* of each call's kernels,
median per trial, mean over :data:`~harness.judge.timing.settings.CONTEST_TRIALS` trials, each
trial on an input set of its own and the same inputs every call of a trial. That is how
flashinfer-bench main's evaluator calls it (``DefaultEvaluator``: ``gen_inputs`` once per trial in
``build_baseline``, the outputs allocated per trial in ``eval_performance``, one ``time_runnable``
a trial, the mean of their medians), so a figure is a mean over three placements of the buffers,
as the contest's was. Refused, with the reason, where
cupti-python cannot record (FlashInfer would fall back to CUDA events with only a warning).

A slow solution gets fewer calls, by the rule every tier follows (docs/timing.md, "Slow
solutions"): where the contest's settings would take more than the tier's budget at the measured
time of one call, each trial makes one dry run and as many timed calls as the budget holds, never
fewer than ``min_iters`` (:func:`contest_settings`). Only the per-head reference loop is that slow
(1.3 ms to 0.12 s a call): at the contest's settings its tier would take about 330 s of contest-v2
on an H200 (its CUPTI spans in results/judge-check/20261126-H200x2-one-vs-two x 198 calls a
workload), about 65 s by the rule.
"""

from __future__ import annotations

import statistics
import warnings
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import gpu_state
from harness.judge.timing.settings import CONTEST_SETTINGS, CONTEST_TRIALS, TimingConfig
from harness.judge.timing.stats import (TierUnavailable, TimingStats, nothing_after, positional_call, summarize,
                                        trial_medians)

#: Words of FlashInfer's warning when it times with CUDA events instead of CUPTI.
_FALLBACK_WORDS = ("falling back", "fall back", "not installed", "needs to be")


#: Calls FlashInfer's timer makes in every trial before its dry runs: one, then five it times to
#: estimate a call (``bench_gpu_time_with_cupti``'s ``measurement_iters``, flashinfer 0.7.2).
FLASHINFER_ESTIMATE_CALLS = 6


def contest_samples(calls: int) -> int:
    """Samples a ``contest`` tier reports for ``calls`` reported calls at the contest's settings: one
    reported call a trial, for the ``repeat_iters`` calls its timer makes on the trial's input set
    (a slow solution's tier reports fewer: :func:`contest_settings`)."""
    return calls * CONTEST_SETTINGS["repeat_iters"]


def contest_settings(call_s: float, config: TimingConfig) -> dict:
    """FlashInfer's settings for a solution whose call takes ``call_s`` seconds: the contest's
    (:data:`CONTEST_SETTINGS`) where its :data:`CONTEST_TRIALS` trials fit ``config.budget_s``, else
    one dry run and as many timed calls a trial as the budget holds, at least ``config.min_iters``,
    at most the contest's (each trial's :data:`FLASHINFER_ESTIMATE_CALLS` counted)."""
    full = CONTEST_SETTINGS["dry_run_iters"] + CONTEST_SETTINGS["repeat_iters"]
    if call_s * CONTEST_TRIALS * (FLASHINFER_ESTIMATE_CALLS + full) <= config.budget_s:
        return dict(CONTEST_SETTINGS)
    fits = int(config.budget_s / (CONTEST_TRIALS * call_s)) - FLASHINFER_ESTIMATE_CALLS - 1
    repeat = max(config.min_iters, min(CONTEST_SETTINGS["repeat_iters"], fits))
    return {**CONTEST_SETTINGS, "dry_run_iters": 1, "repeat_iters": repeat}


def contest_value(samples_us: list[float]) -> float:
    """The ``contest`` figure (µs): the median of each trial's spans, mean over the
    :data:`CONTEST_TRIALS` trials (equal parts of the samples, in order).

    How flashinfer-bench combines its trials is not asserted here: the mean of the trial
    medians is what the sync tier does with the original contest's trials. The trace keeps each
    trial's median (``trial_medians_us``) and the samples' median, p10, p90, min and max, not every
    sample, so a combination other than of the trial medians needs the run again.

    Raises:
        ValueError: the samples do not split into :data:`CONTEST_TRIALS` equal, non-empty trials.
    """
    return statistics.mean(trial_medians(samples_us, CONTEST_TRIALS))


def flashinfer_timer():
    """FlashInfer's CUPTI timer, or the reason it cannot be the contest's timer here."""
    from harness.judge import cupti_recorder as cupti  # noqa: PLC0415  (imports without cupti-python; says why in the status)
    ok, reason = cupti.cupti_status()
    if not ok:  # flashinfer would time with CUDA events and only warn: never a contest figure
        return None, f"CUPTI cannot record here ({reason}); FlashInfer's timer would fall back to CUDA events"
    try:
        from flashinfer.testing import bench_gpu_time_with_cupti  # noqa: PLC0415
    except Exception as exc:
        return None, f"flashinfer.testing cannot be imported ({type(exc).__name__}: {exc}); install the gpu extra"
    return bench_gpu_time_with_cupti, None


def _refusal(warned: list[str], spans: int, repeat_iters: int) -> str | None:
    """Why a trial of FlashInfer's timer gives no contest figure, or None: it warned that it fell
    back to CUDA events, or returned another count of spans than ``repeat_iters``."""
    fell_back = [w for w in warned if "cupti" in w.lower() and any(k in w.lower() for k in _FALLBACK_WORDS)]
    if fell_back:
        return f"FlashInfer did not time with CUPTI: {fell_back[0][:200]}"
    if spans != repeat_iters:
        return f"FlashInfer's timer returned {spans} spans for a trial of {repeat_iters} calls"
    return None


def bench_contest(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                  after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats | TierUnavailable:
    """The final contest's figure: FlashInfer's own CUPTI timer with flashinfer-bench's settings.

    Trial ``t`` of :data:`CONTEST_TRIALS` gets the input set ``setup(t)``, every call of the trial
    the same one (flashinfer-bench main passes each trial's positional arguments to every call);
    a dict is handed to FlashInfer as its values, in order, and the timer calls ``entry`` with
    them as they come (the judge's DPS entry, called as the contest calls it; ``fn`` is then the
    same call on the dict), else ``fn`` on them put back into a dict. Each trial returns
    ``repeat_iters`` per-call spans (ms: first kernel's start to last kernel's end), then
    ``after(t)`` runs, so the judge can read the outputs the trial's calls left. ``flush`` and our
    clock warm-up run first only to start from a warm GPU, as the contest's GPU was from its
    preceding workloads; the warm-up also times one call,
    which decides the settings (:func:`contest_settings`: the contest's, or fewer calls for a
    slow solution, then ``stop`` is ``budget``).

    Returns:
        TimingStats in µs (``value_us``: :func:`contest_value`; ``trials``; ``trial_medians_us``), or
        TierUnavailable when CUPTI or FlashInfer is missing, or the first trial fell back to CUDA
        events or came back short (:func:`_refusal`).

    Raises:
        RuntimeError: a later trial did, after the judge was told of the earlier ones.
    """
    timer, reason = flashinfer_timer()
    if timer is None:
        return TierUnavailable(Tier.CONTEST, reason)
    settings = contest_settings(gpu_state.warm_then_estimate(fn, setup, flush, config, warmup=0), config)
    samples = []
    for trial in range(CONTEST_TRIALS):
        call, values = positional_call(fn, entry, setup(trial))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            spans = timer(call, input_args=values, **settings)
        refused = _refusal([str(w.message) for w in caught], len(spans), settings["repeat_iters"])
        if refused and trial == 0:  # nothing reported yet: a tier that cannot run here
            return TierUnavailable(Tier.CONTEST, refused)
        if refused:  # the judge was told of earlier trials: a failure, not an unavailable tier
            raise RuntimeError(f"after {trial} contest trials, {refused}")
        samples.extend(ms * 1e3 for ms in spans)
        torch.cuda.synchronize()
        after(trial)  # the judge reads this trial's outputs before a later trial's set may reuse them
    gpu_state.CLOCKS.busy()
    cut = settings["repeat_iters"] < CONTEST_SETTINGS["repeat_iters"]
    return summarize(Tier.CONTEST, samples, value_us=contest_value(samples), trials=CONTEST_TRIALS,
                     stop="budget" if cut else "iters", trial_medians_us=trial_medians(samples, CONTEST_TRIALS))
