"""The contest tier: the final contest's timer, called rather than re-implemented:
``flashinfer.testing.bench_gpu_time_with_cupti`` with flashinfer-bench's settings
(:data:`~harness.judge.timing.settings.CONTEST_SETTINGS`): the same inputs every call, the
*span* of each call's kernels, median per trial, mean over
:data:`~harness.judge.timing.settings.CONTEST_TRIALS` trials. Refused, with the reason, where
cupti-python cannot record (FlashInfer would fall back to CUDA events with only a warning)."""

from __future__ import annotations

import statistics
import warnings
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import gpu_state
from harness.judge.timing.settings import CONTEST_SETTINGS, CONTEST_TRIALS, TimingConfig
from harness.judge.timing.stats import TierUnavailable, TimingStats, nothing_after, summarize

#: Words of FlashInfer's warning when it times with CUDA events instead of CUPTI.
_FALLBACK_WORDS = ("falling back", "fall back", "not installed", "needs to be")


def contest_samples(calls: int) -> int:
    """Samples a ``contest`` tier reports for ``calls`` reported calls: its timer makes
    :data:`CONTEST_TRIALS` x ``repeat_iters`` calls on one input set, reported as one."""
    return calls * CONTEST_TRIALS * CONTEST_SETTINGS["repeat_iters"]


def contest_value(samples_us: list[float]) -> float:
    """The ``contest`` figure (µs): the median of each trial's spans, mean over the trials.

    How flashinfer-bench combines its trials is not asserted here: the mean of the trial
    medians is what the sync tier does with the original contest's trials, and the trace
    keeps every sample, so another combination can be computed from it.

    Raises:
        ValueError: the samples are not :data:`CONTEST_TRIALS` equal trials.
    """
    per_trial = CONTEST_SETTINGS["repeat_iters"]
    if len(samples_us) != CONTEST_TRIALS * per_trial:
        raise ValueError(f"{len(samples_us)} contest samples, expected {CONTEST_TRIALS} trials of {per_trial}")
    return statistics.mean(statistics.median(samples_us[i * per_trial:(i + 1) * per_trial])
                           for i in range(CONTEST_TRIALS))


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


def bench_contest(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
                  after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats | TierUnavailable:
    """The final contest's figure: FlashInfer's own CUPTI timer with flashinfer-bench's settings.

    ``setup(0)`` makes the one input set every call gets (the contest passes the same
    positional arguments each time); a dict is handed to FlashInfer as its values, in
    order, and the timer calls ``entry`` with them as they come (the judge's DPS entry, called
    as the contest calls it; ``fn`` is then the same call on the dict), else ``fn`` on them put
    back into a dict. Each of :data:`CONTEST_TRIALS` trials
    returns ``repeat_iters`` per-call spans (ms: first kernel's start to last kernel's
    end); ``after(0)`` runs once at the end, so the judge can read the outputs the calls
    left. ``flush`` and our clock warm-up run first only to start from a warm GPU, as
    the contest's GPU was from its preceding workloads.

    Returns:
        TimingStats in µs (``value_us``: :func:`contest_value`; ``trials``), or
        TierUnavailable when CUPTI or FlashInfer is missing or FlashInfer warned that
        it fell back to CUDA events.
    """
    timer, reason = flashinfer_timer()
    if timer is None:
        return TierUnavailable(Tier.CONTEST, reason)
    gpu_state.CLOCKS.warm(fn, setup, flush, config)
    args = setup(0)
    names = list(args) if isinstance(args, dict) else None
    values = tuple(args.values()) if names else (args,)
    call = entry or ((lambda *given: fn(dict(zip(names, given)))) if names else fn)
    samples = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(CONTEST_TRIALS):
            samples.extend(ms * 1e3 for ms in timer(call, input_args=values, **CONTEST_SETTINGS))
    fell_back = [str(w.message) for w in caught
                 if "cupti" in str(w.message).lower() and any(k in str(w.message).lower() for k in _FALLBACK_WORDS)]
    if fell_back:
        return TierUnavailable(Tier.CONTEST, f"FlashInfer did not time with CUPTI: {fell_back[0][:200]}")
    if len(samples) != contest_samples(1):
        return TierUnavailable(Tier.CONTEST, f"FlashInfer's timer returned {len(samples)} spans for "
                                          f"{CONTEST_TRIALS} trials of {CONTEST_SETTINGS['repeat_iters']} calls")
    torch.cuda.synchronize()
    gpu_state.CLOCKS.busy()
    after(0)
    return summarize(Tier.CONTEST, samples, value_us=contest_value(samples), trials=CONTEST_TRIALS)
