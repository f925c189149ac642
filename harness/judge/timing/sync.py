"""The sync tier: the contest's original timer, called rather than re-implemented:
flashinfer-bench 0.1.2's ``bench.timing.time_runnable`` loop (``do_bench``: zero a 256 MB buffer,
clone every argument, ``torch.cuda.synchronize()``, a CUDA event pair around the call), one input
set per trial as its evaluator's ``eval_performance`` gives each of its ``num_trials`` (3), 10
warm-up and 50 timed calls a trial, the mean of each trial's calls, the mean over the trials
(flashinfer-bench issue #195: µs kernels read ~13x slower than CUPTI's device time).

It runs where the contest tier does, in the solution's process (the judge's worker), so the
judge believes its figure only within the core's CUPTI figure and the copy floor
(docs/judging.md). Its fixed counts are the contest's, not the stop rule's; a slow solution's
trials are cut to the budget (:func:`sync_plan`).
"""

from __future__ import annotations

import importlib
import math
import statistics
import time
from typing import Callable

import torch

from harness.facts import Tier
from harness.judge.timing import gpu_state, stop_rule
from harness.judge.timing.host_speed import speed_beside
from harness.judge.timing.settings import SYNC_ITERS, SYNC_WARMUP, TimingConfig
from harness.judge.timing.stats import TierUnavailable, TimingStats, nothing_after, positional_call, summarize

#: The module of flashinfer-bench that holds the contest's original loop.
FIB_TIMING = "flashinfer_bench.bench.timing"


def sync_plan(estimate_s: float, config: TimingConfig) -> tuple[int, int]:
    """``(timed calls, warm-up calls)`` of each of the sync tier's trials: the contest's
    SYNC_ITERS and SYNC_WARMUP, or for a solution too slow for ``budget_s`` fewer timed calls
    (``min_iters`` of them over all trials, at least) and no warm-up of its own (it ran just
    before, in the estimate of ``estimate_s`` seconds a call)."""
    trials = max(config.trials, 1)
    per_trial = TimingConfig(iters=SYNC_ITERS, budget_s=config.budget_s / trials,
                             min_iters=math.ceil(config.min_iters / trials))
    iters = stop_rule.plan_iterations(estimate_s, per_trial)
    return iters, SYNC_WARMUP if iters == SYNC_ITERS else 0


def fib_timing():
    """flashinfer-bench's ``bench.timing`` module, or the reason it cannot be imported here."""
    try:
        return importlib.import_module(FIB_TIMING), None
    except Exception as exc:  # an ImportError, or a broken install failing inside its own imports
        return None, (f"{FIB_TIMING} cannot be imported ({type(exc).__name__}: {exc}); the sync tier is "
                      "flashinfer-bench 0.1.2's own loop: pip install -e '.[interop]'")


def device_name() -> str:
    """The device string flashinfer-bench's evaluator hands ``time_runnable``: ``cuda:<index>`` of
    the current device (the worker made the judged device current before the solution loaded)."""
    return f"cuda:{torch.cuda.current_device()}"


def time_runnable_samples(fib, call: Callable, values: list, warmup: int, iters: int, device: str) -> list[float]:
    """What ``fib.time_runnable(call, values, warmup, iters, device)`` does, every call's sample
    returned instead of their mean: its ``do_bench`` with its arguments (the call on a fresh
    ``_clone_args`` of ``values`` each time, the clone outside the event pair), under its device
    lock, ``return_mode="all"``. Looked up on ``fib`` at each call, so the loop is the installed
    flashinfer-bench's (tests/judge/test_sync_tier.py checks the arguments against its time_runnable).

    Returns:
        The per-call times in ms, in call order (``do_bench``'s unit).
    """
    with fib._device_lock(device):
        return fib.do_bench(fn=lambda cloned_args: call(*cloned_args), warmup=warmup, rep=iters,
                            setup=lambda: fib._clone_args(values), device=device, return_mode="all")


def host_call_s(call: Callable, values) -> float:
    """Seconds of host time of one untimed call ``call(*values)`` (``time.perf_counter`` around it),
    then a synchronize: the sync tier's ``host_call_us`` diagnostic, one trial's worth
    (tools/tier_parity.py measures the plain process with it too)."""
    began = time.perf_counter()
    call(*values)
    host = time.perf_counter() - began
    torch.cuda.synchronize()
    return host


def bench_sync(fn: Callable, setup: Callable, flush: Callable, config: TimingConfig,
               after: Callable = nothing_after, entry: Callable | None = None) -> TimingStats | TierUnavailable:
    """The contest's original figure: flashinfer-bench 0.1.2's ``time_runnable`` loop, per trial.

    Each of ``config.trials`` trials gets one input set, ``setup(trial)`` (a dict is handed over as
    its values, in order, as flashinfer-bench passes a definition's arguments); the loop calls
    ``entry`` on clones of them (the judge's DPS entry, called as flashinfer-bench calls it; ``fn``
    is then the same call on the dict), else ``fn`` on them put back into a dict. The timed calls
    write into clones, so one untimed call on the trial's own arguments follows, then
    ``after(trial)``: the judge verifies what that call left. ``flush`` and our clock warm-up run
    first only to start from a warm GPU; the warm-up also times one call, which decides the counts
    (:func:`sync_plan`: the contest's 10 + 50, or fewer timed calls for a slow solution).

    Returns:
        TimingStats in µs (``value_us``: the mean of the trial means; ``trials``; ``host_call_us``:
        the median host time of the untimed calls, the timed ones being flashinfer-bench's own;
        ``host_probe_us``: the host's speed beside the trials, the median over them of a
        :func:`~harness.judge.timing.host_speed.host_probe_s` reading just before and one just
        after each trial's loop (:func:`~harness.judge.timing.host_speed.speed_beside`);
        ``host_probe_trials_us`` each trial's reading and ``trial_means_us`` each trial's mean, in
        order), or TierUnavailable when flashinfer-bench cannot be imported.
    """
    fib, reason = fib_timing()
    if fib is None:
        return TierUnavailable(Tier.SYNC, reason)
    iters, warmup = sync_plan(gpu_state.warm_then_estimate(fn, setup, flush, config, 0), config)
    device, trial_means, samples, host, probes = device_name(), [], [], [], []
    for trial in range(config.trials):
        call, values = positional_call(fn, entry, setup(trial))
        # the host's speed as the loop starts and as it ends (host_speed.py: why)
        times_ms, probe = speed_beside(lambda: time_runnable_samples(fib, call, list(values), warmup, iters, device))
        times = [ms * 1e3 for ms in times_ms]
        probes.append(probe)
        if len(times) != iters:  # not the loop flashinfer-bench 0.1.2 ships: no figure of it
            raise RuntimeError(f"flashinfer-bench's do_bench returned {len(times)} times for {iters} calls")
        host.append(host_call_s(call, values))  # untimed, on the trial's own arguments: what the judge verifies
        after(trial)
        trial_means.append(statistics.mean(times))
        samples.extend(times)
    gpu_state.CLOCKS.busy()
    return summarize(Tier.SYNC, samples, value_us=statistics.mean(trial_means), trials=config.trials,
                     host_call_us=statistics.median(host) * 1e6, host_probe_us=statistics.median(probes) * 1e6,
                     host_probe_trials_us=[probe * 1e6 for probe in probes], trial_means_us=trial_means)
