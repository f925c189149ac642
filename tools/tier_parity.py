"""Each tier is the timer it names: the harness's tiers beside the same timers called in a plain
process, on one GPU in one session (issue #29).

    python -m tools.tier_parity --out DIR [--solutions cuda-v4,fla-recurrent] [--batches 1,8,64,512] [--repeats 3]
                                  [--harness-repeats 1] [--plain-sets N]

1. The harness: ``run_local.py --algo SOLUTIONS --workloads sweep --tiers cupti,events,sync,contest``
   in a subprocess of its own, ``--harness-repeats`` times; per (solution, B) each tier's figure,
   and for the copy the floor's torch ``copy_`` (the copy the plain process times too).
2. A plain process per (subject, B) (spawned: one CUPTI client each), the subject called through
   the positional DPS entry the judge calls (:mod:`harness.judge.dps`) on the workload's trial-0
   inputs (the cupti and events timers over ``--plain-sets`` copies of them in turn, by default
   as many as the timing core's buffer sets: :func:`plain_figures`; the contest and sync timers
   one set a trial, as the evaluators call them), timed with the timers the tiers name
   (:data:`PLAIN_TIMERS`):

   * ``cupti``: ``flashinfer.testing.bench_gpu_time_with_cupti(fn, cold_l2_cache=True)``, median;
   * ``contest``: the same timer with flashinfer-bench main's settings (:data:`CONTEST_SETTINGS`),
     3 trials, the mean of the trial medians, as its ``time_runnable`` calls it;
   * ``events``: ``flashinfer.testing.bench_gpu_time(fn, enable_cupti=False, use_cuda_graph=False,
     cold_l2_cache=True)``, median;
   * ``sync``: flashinfer-bench 0.1.2's ``bench.timing.time_runnable(fn, args, 10, 50)`` (the
     contest's original loop), the mean of 3 trials as its evaluator takes it, each trial's
     arguments its own and handed to the loop, which clones them before every call
     (:func:`mean_over_trials`).

   Each point is measured ``--repeats`` times (fresh processes, in rounds over all points) and
   the plain figure is the median: the named events and sync timers move 0.5-4.5x between two
   plain runs minutes apart (results/proof/20261126-H100-events-ab, -H200-timers).
3. ``DIR/tier_parity.json`` and ``DIR/tier_parity.md``: every figure, the harness / plain ratio,
   whether it is within its target (:data:`TARGETS`), the repeats' range and whether the harness's
   figure lies inside it widened by the target; beside them, with no target, each side's host time
   of one call as the sync tier measures it (:data:`HOST`). Needs a CUDA GPU, flashinfer-python,
   cupti-python and flashinfer-bench 0.1.2 (``pip install --no-deps flashinfer-bench==0.1.2``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from harness.facts import Tier
from harness.judge.core import placement_copies
from harness.judge.timing import CONTEST_SETTINGS, CONTEST_TRIALS, SYNC_ITERS, SYNC_TRIALS, SYNC_WARMUP, TimingConfig
from harness.judge.timing.host_speed import host_probe_s
from harness.judge.timing.sync import host_call_s
from harness.records.store import load_run
from harness.run_lock import writing_into
from tools.timing_proof import in_fresh_process, run_local

#: The largest |harness / plain - 1| each tier may show (issue #29).
TARGETS = {Tier.CUPTI: 0.02, Tier.CONTEST: 0.02, Tier.EVENTS: 0.10, Tier.SYNC: 0.15}
#: What each plain-process timer is, as the report names it.
PLAIN_TIMERS = {
    Tier.CUPTI: "flashinfer.testing.bench_gpu_time_with_cupti(fn, cold_l2_cache=True), median",
    Tier.CONTEST: f"bench_gpu_time_with_cupti(fn, **{CONTEST_SETTINGS}), {CONTEST_TRIALS} trials, each on an argument "
                  "set of its own, mean of medians",
    Tier.EVENTS: "flashinfer.testing.bench_gpu_time(fn, enable_cupti=False, use_cuda_graph=False, cold_l2_cache=True), median",
    Tier.SYNC: f"flashinfer_bench 0.1.2 bench.timing.time_runnable(fn, args, 10, 50), {SYNC_TRIALS} trials, each on an "
               "argument set of its own that the loop clones before every call, mean of the trial means",
}
#: The key of a point's host-time diagnostic beside its tiers: the host time of one call (µs), as the
#: sync tier measures it after each trial's timed loop (``harness.judge.timing.sync.bench_sync``'s
#: ``host_call_us``: the untimed call on the trial's own arguments, timed with ``time.perf_counter``,
#: the median over the trials). No target: it says whether a sync-tier gap is the host's path to the
#: launch (docs/timing.md: the sync tier leans high for Python launches).
HOST = "host"
#: The key of a point's host-speed diagnostic: the sync tier's ``host_probe_us`` (µs of a fixed
#: pure-Python stand-in beside each trial, ``harness.judge.timing.host_speed``), the same reading on
#: both sides. No target: where the two sides' readings differ, their hosts ran at different speeds,
#: and a sync gap of a Python launch follows (results/proof/20261127-H100-host-path-6470d35).
PROBE = "host_probe"
#: A repeat ran at the host's full speed when its :data:`PROBE` reading is at most this factor times the
#: fastest reading of the whole cross-check (both sides). On these machines the stand-in reads 6-7.6 µs at
#: full speed and 10-14 µs while a vCPU runs slow, with little between (results/proof/20261127-H100-host-path-6470d35,
#: whose cpu_speed.py calls a block slow above 1.3x the fastest; results/proof/20261127-H100-parity-speed-7bf32b9).
FULL_SPEED_FACTOR = 1.3
COPY = "copy"
#: The floor's copy the plain process times too (harness/judge/floor.py).
COPY_METHOD = "torch copy_"


# ------------------------------------------------------------------ the harness's figures

def harness_figures(run_dir: Path, batches: set[int]) -> dict[tuple[str, int], dict[str, float]]:
    """``{(subject, B): {tier: µs}}`` of a harness run: each solution's PASSED traces, and the
    torch ``copy_`` floor as :data:`COPY`; a solution's sync tier's ``host_call_us`` as :data:`HOST`
    and its ``host_probe_us`` as :data:`PROBE` (the copy's too)."""
    run = load_run(run_dir)
    found: dict[tuple[str, int], dict[str, float]] = {}
    for floor in run.floors:
        if floor.method == COPY_METHOD and floor.batch_size in batches:
            found[(COPY, floor.batch_size)] = {t: f.value_us for t, f in floor.tiers.items() if f.available}
            found[(COPY, floor.batch_size)].update(diagnostics(floor.tiers.get(Tier.SYNC), host=False))
    for trace in run.traces:
        performance = trace.evaluation.performance
        if performance and trace.workload.axes.get("batch_size") in batches:
            figures = {t: f.value_us for t, f in performance.tiers.items() if f.available}
            figures.update(diagnostics(performance.tiers.get(Tier.SYNC)))
            found[(trace.solution, trace.workload.axes["batch_size"])] = figures
    return found


def diagnostics(sync, host: bool = True) -> dict[str, float]:
    """A sync tier's figure's host diagnostics that were recorded, as :data:`HOST` (only with
    ``host``: the copy floor's host time is a copy's, the plain side has none to set beside it)
    and :data:`PROBE`; none of an unavailable tier or an older trace."""
    if sync is None or not sync.available:
        return {}
    found = {HOST: sync.host_call_us if host else None, PROBE: sync.host_probe_us}
    return {key: value for key, value in found.items() if value is not None}


def run_harness(solutions: list[str], scratch: Path) -> Path:
    """``run_local.py`` over the sweep set with every tier; returns its run folder."""
    tiers = ",".join(str(t) for t in TARGETS)
    return run_local(["--algo", ",".join(solutions), "--workloads", "sweep", "--tiers", tiers], scratch, quiet=False)


# ------------------------------------------------------------------ the plain process

def sweep_workload(batch: int, device: str = "cuda"):
    """``(definition, workload, inputs)``: the sweep set's workload of batch ``batch`` and its inputs
    on ``device`` (the judge's, call 0)."""
    from harness.data.dataset import open_dataset
    from harness.data.workloads import materialize_inputs

    dataset = open_dataset("sweep", show_progress=False)
    workload = next(w for w in dataset.workloads if w.batch_size == batch)
    return dataset.definition, workload, materialize_inputs(workload, dataset.definition, dataset.files, device, 0)


def solution_inputs(batch: int, state_dtype: str = "float32", device: str = "cuda"):
    """``(definition, given)``: what the judge's worker gives a solution on the sweep workload of
    batch ``batch``: its inputs (the state in ``state_dtype``, "float32" or "bfloat16") and
    NaN-filled destinations of that state dtype, by name, on ``device``."""
    from harness.data.definition import TORCH_DTYPES
    from harness.judge.worker import destinations

    definition, workload, inputs = sweep_workload(batch, device)
    inputs = {**inputs, "state": inputs["state"].to(TORCH_DTYPES[state_dtype])}
    return definition, {**inputs, **destinations(definition, workload.axes, state_dtype, device)}


def subject_call(subject: str, batch: int, workdir: Path, state_dtype: str = "float32"):
    """``(fn, args)``: the subject's positional call on the sweep workload of batch ``batch``, its
    state in ``state_dtype`` (:func:`solution_inputs`)."""
    import torch

    from harness.data.definition import TORCH_DTYPES
    from harness.judge import dps
    from harness.judge.solutions import load_meta
    from harness.paths import SOLUTIONS_DIR

    if subject == COPY:  # no destinations: the copy's buffers lie where they always have (placement_probe)
        state = sweep_workload(batch)[2]["state"].to(TORCH_DTYPES[state_dtype])
        return (lambda state, target: target.copy_(state)), (state, torch.empty_like(state))
    definition, given = solution_inputs(batch, state_dtype)
    run = dps.load_entry(load_meta(SOLUTIONS_DIR / subject), definition, workdir)
    return run, tuple(given[name] for name in dps.argument_order(definition))


def rotating(fn, arg_sets: list[tuple]):
    """A callable of no arguments whose k-th call is ``fn(*arg_sets[k % len(arg_sets)])``: the
    calls take the sets in turn, as the timing core's calls take its buffer sets (up to 8 within
    2 GiB, harness/judge/core/gdn_core.c), so a median is over as many placements."""
    turn = itertools.cycle(arg_sets)
    return lambda: fn(*next(turn))


#: The plain timers that take one argument set a trial, as flashinfer-bench's evaluators call them
#: (main's CUPTI timer, 0.1.2's loop), and as the harness's contest and sync tiers give each trial
#: a set of its own; the others take the sets in turn (:func:`rotating`).
ONE_SET_A_TRIAL = (Tier.CONTEST, Tier.SYNC)


def mean_over_trials(args: tuple, trials: int, warm_trial, measure) -> float:
    """The mean over ``trials`` trials of ``measure(trial_args)``, each trial after
    ``warm_trial(trial_args)`` (the clock warm-up) and on an argument set of its own: ``args``, then
    copies of it (:func:`harness.judge.core.placement_copies`). How flashinfer-bench's evaluators
    give each of their trials an input set: main's to FlashInfer's CUPTI timer (the contest timer),
    0.1.2's to ``time_runnable`` (the sync timer)."""
    values = []
    for trial_args in placement_copies(args, trials):
        warm_trial(trial_args)
        values.append(measure(trial_args))
    return statistics.mean(values)


def flashinfer_flush(flush_mb: int | None) -> dict:
    """Keyword arguments that set the L2 flush of FlashInfer's timers: none for their own (a
    buffer of twice the L2 zeroed, ``cold_l2_cache=True``), else its older parameters, which it
    still honours, for a buffer of ``flush_mb`` MB (256: the harness's flush on an H100 or H200,
    ``harness.judge.timing.gpu_state.L2Flusher``). A probe of the B <= 8 CUPTI gap (docs/timing.md).
    FlashInfer 0.7.2's ``bench_gpu_time`` drops the size on its way to the events timer, so
    :func:`plain_figures` then calls ``bench_gpu_time_with_cuda_event`` itself."""
    return {} if flush_mb is None else {"l2_flush": True, "l2_flush_size_mb": flush_mb}


def plain_figures(subject: str, batch: int, warm_s: float = 0.0, flush_mb: int | None = None,
                  tiers: tuple[str, ...] = tuple(TARGETS), sets: int | None = None) -> dict[str, float]:
    """The plain-process timers (:data:`PLAIN_TIMERS`) of ``tiers`` for one subject at one batch size
    (µs), each after ``warm_s`` seconds of back-to-back flush + call (:func:`warm`; 0: none);
    FlashInfer's timers flush as :func:`flashinfer_flush` says. The cupti and events timers
    call :func:`rotating` over ``sets`` argument sets of their own allocations (None: as many as the
    timing core takes, :func:`harness.judge.core.placement_copies`), as the harness's tiers take the core's buffer sets in
    turn: where buffers lie moves a B <= 8 figure by 2-8% (docs/timing.md), so both sides' medians
    are over as many placements. The contest timer gets one argument set a trial, the first the
    original and the others its copies (:func:`harness.judge.core.placement_copies`), the same arguments every call of a trial, as
    flashinfer-bench main's evaluator calls its runnable (and the harness's contest tier does).
    With the sync timer, also :data:`HOST`: the median host time of one untimed call after each of
    its trials (:func:`harness.judge.timing.sync.host_call_s`, the sync tier's own), and
    :data:`PROBE`: the median over its trials of the host's speed read just before and after each
    trial's loop (:func:`harness.judge.timing.host_speed.host_probe_s`, as the sync tier reads it)."""
    import warnings

    from flashinfer.testing import bench_gpu_time, bench_gpu_time_with_cuda_event, bench_gpu_time_with_cupti
    from flashinfer_bench.bench.timing import time_runnable

    flush = flashinfer_flush(flush_mb)
    warnings.filterwarnings("ignore", message=".*deprecated.*", category=DeprecationWarning)

    def cupti(fn, args) -> float:
        warm(fn, args, warm_s)
        return statistics.median(bench_gpu_time_with_cupti(fn, input_args=args, cold_l2_cache=True, **flush))

    def contest(fn, args) -> float:  # each trial after the clock warm-up, as the harness's contest trials
        return mean_over_trials(args, CONTEST_TRIALS, lambda trial_args: warm(fn, trial_args, warm_s),
                                lambda trial_args: statistics.median(bench_gpu_time_with_cupti(
                                    fn, input_args=trial_args, **{**CONTEST_SETTINGS, **flush})))

    def events(fn, args) -> float:
        warm(fn, args, warm_s)
        return statistics.median(
            bench_gpu_time(fn, input_args=args, enable_cupti=False, use_cuda_graph=False, cold_l2_cache=True)
            if not flush else bench_gpu_time_with_cuda_event(fn, input_args=args, **flush))

    host_s: list[float] = []  # the sync trials' untimed calls, as the harness's sync tier times them
    probe_s: list[float] = []  # the host's speed beside each sync trial, as the harness's sync tier reads it

    def sync(fn, args) -> float:
        # Each trial's arguments are handed to the loop, which clones them before every call (outside
        # its event pair), as 0.1.2's evaluator and the harness's sync tier have it do: a rotating
        # callable of no arguments would clone nothing, and the launch would run on another host path.
        def trial(trial_args) -> float:
            before = host_probe_s()
            mean_ms = time_runnable(fn, list(trial_args), SYNC_WARMUP, SYNC_ITERS, "cuda:0")
            probe_s.append(statistics.mean((before, host_probe_s())))
            host_s.append(host_call_s(fn, trial_args))
            return mean_ms
        return mean_over_trials(args, SYNC_TRIALS, lambda trial_args: warm(fn, trial_args, warm_s), trial)

    timers = {Tier.CUPTI: cupti, Tier.CONTEST: contest, Tier.EVENTS: events, Tier.SYNC: sync}
    with tempfile.TemporaryDirectory() as workdir:
        fn, args = subject_call(subject, batch, Path(workdir))
        placed = placement_copies(args, sets)  # None: as many as the core takes
        turns = (rotating(fn, placed), ()) if len(placed) > 1 else (fn, args)
        found = {tier: timers[tier](*((fn, args) if tier in ONE_SET_A_TRIAL else turns)) * 1e3 for tier in tiers}
        if host_s:
            found |= {HOST: statistics.median(host_s) * 1e6, PROBE: statistics.median(probe_s) * 1e6}
        return found


def warm(fn, args: tuple, seconds: float) -> None:
    """The harness's clock warm-up before a plain timer (``harness.judge.timing.gpu_state``'s
    flush + call back to back for ``seconds``): an idle H100 sits at 345 MHz and times µs
    kernels up to 2x slow (docs/timing.md), and every harness tier starts from a warm GPU, as the
    contest's did from its preceding workloads; a timer of 0.02 s of its own calls (FlashInfer's
    dry runs) does not bring the clock up. ``seconds`` 0: no warm-up."""
    if seconds > 0:
        from harness.judge.timing import L2Flusher
        from harness.judge.timing.gpu_state import warm_gpu_clocks

        warm_gpu_clocks(lambda given: fn(*given), lambda index: args, L2Flusher("cuda"), seconds)


# ------------------------------------------------------------------ the comparison

def compare(harness: dict, plain: dict) -> list[dict]:
    """One row per (subject, B, tier) both sides measured. Each side is ``{(subject, B): {tier: [µs per
    repeat]}}`` and its figure is the median of its repeats. Each row holds: both figures (µs), their
    ratio, whether it is within the tier's target, each side's min and max, and whether the two ranges
    meet once the plain one is widened by the target (``within_spread``). The named timers' own
    run-to-run spread exceeds some targets (results/proof/20261126-H200-timers), and so does the
    harness's sync tier's, so a ratio outside its target is read beside it."""
    rows = []
    for key in sorted(set(harness) & set(plain)):
        for tier, target in TARGETS.items():
            ours, repeats = harness[key].get(tier, []), plain[key].get(tier, [])
            if not ours or not repeats or min(repeats) <= 0:
                continue
            mine, theirs = statistics.median(ours), statistics.median(repeats)
            ratio = mine / theirs
            low, high = min(repeats), max(repeats)
            rows.append({"subject": key[0], "batch_size": key[1], "tier": str(tier), "harness_us": mine,
                         "plain_us": theirs, "ratio": ratio, "target": target, "within": abs(ratio - 1) <= target,
                         "harness_repeats": len(ours), "harness_min_us": min(ours), "harness_max_us": max(ours),
                         "plain_repeats": len(repeats), "plain_min_us": low, "plain_max_us": high,
                         "within_spread": min(ours) <= high * (1 + target) and max(ours) >= low * (1 - target)})
    return rows


def compare_host(harness: dict, plain: dict) -> list[dict]:
    """One row per (subject, B) where both sides have :data:`HOST` or :data:`PROBE`: each side's
    median host time of one call (µs) and their ratio, and each side's median host-speed reading
    (µs of the stand-in) and theirs; None where a side lacks one. A diagnostic beside the sync
    rows, with no target: where the host ratio follows the sync ratio, the sync gap is the host's
    path to the launch; where the probe ratio does too, the host ran at another speed."""
    rows = []
    for key in sorted(set(harness) & set(plain)):
        row = {"subject": key[0], "batch_size": key[1]}
        for name, field in (("host", HOST), ("probe", PROBE)):
            ours, theirs = harness[key].get(field, []), plain[key].get(field, [])
            both = bool(ours and theirs) and statistics.median(theirs) > 0
            mine, other = (statistics.median(ours), statistics.median(theirs)) if both else (None, None)
            row |= {f"harness_{name}_us": mine, f"plain_{name}_us": other,
                    f"{name}_ratio": mine / other if both else None}
        if row["host_ratio"] is not None or row["probe_ratio"] is not None:
            rows.append(row | {"harness_repeats": len(harness[key].get(HOST, [])),
                               "plain_repeats": len(plain[key].get(HOST, []))})
    return rows


def compare_at_full_speed(harness: dict, plain: dict) -> list[dict]:
    """The sync tier compared on the repeats that ran at the host's full speed: one row per (subject,
    B) both sides timed, with each side's repeats whose :data:`PROBE` reading is within
    :data:`FULL_SPEED_FACTOR` of the fastest reading of the cross-check, the median of their sync
    figures (µs; None where a side has none such), the ratio and whether it is within the sync target
    (None where it cannot be judged). Why: for a Python launch at small B the sync tier times the
    host's launch path, and a vCPU's slow episode doubles it on either side, whichever timer runs
    (results/proof/20261127-H100-parity-speed-7bf32b9: in all 10 pairs of repeats whose readings
    differed in mode, the slow one read the higher sync figure). Beside :func:`compare`'s sync rows,
    never instead of them. A side's repeats count only where each has its reading (older runs: none)."""
    readings = [value for side in (harness, plain) for figures in side.values() for value in figures.get(PROBE, [])]
    if not readings:
        return []
    limit = min(readings) * FULL_SPEED_FACTOR
    rows = []
    for key in sorted(set(harness) & set(plain)):
        mine, theirs = full_speed_sync(harness[key], limit), full_speed_sync(plain[key], limit)
        if not harness[key].get(Tier.SYNC) or not plain[key].get(Tier.SYNC):
            continue
        ours, other = (statistics.median(mine) if mine else None), (statistics.median(theirs) if theirs else None)
        ratio = ours / other if ours is not None and other else None
        rows.append({"subject": key[0], "batch_size": key[1], "limit_us": limit, "harness_us": ours, "plain_us": other,
                     "harness_repeats": len(mine), "plain_repeats": len(theirs), "ratio": ratio,
                     "within": None if ratio is None else abs(ratio - 1) <= TARGETS[Tier.SYNC]})
    return rows


def full_speed_sync(figures: dict, limit_us: float) -> list[float]:
    """The sync figures (µs) of a point's repeats whose :data:`PROBE` reading is at most ``limit_us``;
    none where the two lists do not pair up one to one."""
    sync, probe = figures.get(Tier.SYNC, []), figures.get(PROBE, [])
    if len(sync) != len(probe):
        return []
    return [value for value, reading in zip(sync, probe) if reading <= limit_us]


def harness_run(solutions: list[str], batches: set[int], scratch: Path) -> dict:
    """One more harness run (:func:`run_harness`) as ``{(subject, B): {tier: [µs]}}``, to extend
    the runs before it with (:func:`extend`)."""
    run = run_harness(solutions, scratch)
    return {key: {tier: [value] for tier, value in figures.items()}
            for key, figures in harness_figures(run, batches).items()}


def extend(found: dict, more: dict) -> dict:
    """``found`` with ``more``'s repeats appended per (subject, B) and tier."""
    for key, figures in more.items():
        for tier, values in figures.items():
            found.setdefault(key, {}).setdefault(tier, []).extend(values)
    return found


def plain_repeats(subjects: list[str], batches: list[int], repeats: int, warm_s: float,
                  flush_mb: int | None = None, sets: int | None = None, found: dict | None = None) -> dict:
    """``{(subject, B): {tier: [µs per repeat]}}``: :func:`plain_figures` ``repeats`` times for each
    subject and batch size (over ``sets`` argument sets), each in a fresh process, the repeats in
    rounds over all of them (so a drift of the machine spreads over every point rather than one).
    Each point extends ``found`` (a new dict if None) as it is measured, so a caller stopped part way
    keeps the points measured before."""
    found = {} if found is None else found
    for _ in range(repeats):
        for subject in subjects:
            for batch in batches:
                figures = in_fresh_process(plain_figures, subject, batch, warm_s, flush_mb, tuple(TARGETS), sets)
                extend(found, {(subject, batch): {tier: [value] for tier, value in figures.items()}})
    return found


def figures_by_point(found: dict) -> dict[str, dict[str, list[float]]]:
    """``{(subject, B): {tier: [µs]}}`` keyed ``"<subject> B=<B>"`` for JSON: every figure measured,
    also those of points the other side did not reach."""
    return {f"{subject} B={batch}": figures for (subject, batch), figures in sorted(found.items())}


def points_from_figures(stored: dict[str, dict[str, list[float]]]) -> dict:
    """:func:`figures_by_point` undone: ``{(subject, B): {tier: [µs]}}``."""
    found = {}
    for point, figures in stored.items():
        subject, _, batch = point.rpartition(" B=")
        found[(subject, int(batch))] = figures
    return found


def judged(report: dict, harness: dict, plain: dict) -> dict:
    """``report`` with its comparisons made from the two sides' figures: ``rows`` (:func:`compare`),
    ``host_rows`` (:func:`compare_host`) and ``full_speed_rows`` (:func:`compare_at_full_speed`)."""
    return {**report, "figures": {"harness": figures_by_point(harness), "plain": figures_by_point(plain)},
            "rows": compare(harness, plain), "host_rows": compare_host(harness, plain),
            "full_speed_rows": compare_at_full_speed(harness, plain)}


def rejudge(stored: Path, out: Path) -> dict:
    """A recorded cross-check (its ``tier_parity.json``) judged again by this version's comparisons,
    its report written into ``out`` (never over ``stored``'s folder's files unless ``out`` is it); the
    figures are the recorded ones, nothing is measured.

    Raises:
        OSError: ``stored`` cannot be read.
        ValueError: it is not JSON, or holds no ``figures`` of both sides.
    """
    try:
        report = json.loads(stored.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{stored}: not JSON ({exc})") from exc
    figures = report.get("figures") if isinstance(report, dict) else None
    figures = figures if isinstance(figures, dict) else {}
    if not isinstance(figures.get("harness"), dict) or not isinstance(figures.get("plain"), dict):
        raise ValueError(f"{stored}: no figures of both sides (field 'figures')")
    from harness.records.environment import git_commit

    report = judged({**report, "rejudged_from": str(stored), "rejudged_by_commit": git_commit(),
                     "rejudged_at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                    points_from_figures(figures["harness"]), points_from_figures(figures["plain"]))
    write_report(out, report)
    return report


def _cell(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def write_report(out: Path, report: dict) -> None:
    """``tier_parity.json`` and ``tier_parity.md``."""
    lines = [f"# Tier parity — {report['hardware']}, {report['date']}, commit {report['git_commit']}", "",
             f"Command: `{report['command']}`", ""]
    if report.get("stopped"):
        lines += [f"**Incomplete:** {report['stopped']}; the table compares the points both sides reached, and "
                  "tier_parity.json's `figures` holds every figure measured.", ""]
    lines += ["Plain-process timers:", ""]
    lines += [f"* `{tier}`: {timer}" for tier, timer in PLAIN_TIMERS.items()]
    lines += ["", f"Each plain timer (each trial) after {report.get('plain_warm_s', 0)} s of back-to-back flush + call "
                  "(the clock warm-up every harness tier gets)."]
    sets = report.get("plain_sets", 1)
    if sets != 1:
        lines += ["", f"The plain cupti and events timers took {sets} argument sets (each of its own allocations) "
                      "in turn, as the timing core takes its buffer sets (up to 8 within 2 GiB); the contest and sync "
                      "timers one a trial, as flashinfer-bench's evaluators."]
    if report.get("plain_flush_mb"):
        lines += ["", f"A probe: FlashInfer's timers in the plain process flushed {report['plain_flush_mb']} MB "
                      "(as the harness does), not their own 2 x L2."]
    lines += ["", f"Harness µs: the median of {report.get('harness_repeats', 1)} run(s); plain µs: the median of "
                  f"{report['plain_repeats']} repeat(s), each in a fresh process, in rounds with the harness's runs; "
                  "\"in plain's range\": the harness's min-max meets the plain min-max widened by the target.",
              "", "| subject | B | tier | harness µs | harness min–max | plain µs | plain min–max | harness / plain | "
                  "target | within | in plain's range |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['subject']} | {r['batch_size']} | {r['tier']} | {r['harness_us']:.3f} | "
              f"{r['harness_min_us']:.3f}–{r['harness_max_us']:.3f} | {r['plain_us']:.3f} | "
              f"{r['plain_min_us']:.3f}–{r['plain_max_us']:.3f} | "
              f"{r['ratio']:.3f} | ±{r['target']:.0%} | {'yes' if r['within'] else '**no**'} | "
              f"{'yes' if r['within_spread'] else '**no**'} |" for r in report["rows"]]
    if report.get("host_rows"):
        lines += ["", "The host beside the sync tier, both sides measured alike (µs; median over the trials, then "
                      "over the repeats). Host time of one call: the untimed call after each trial, timed with "
                      "`time.perf_counter` (the worker's `host_call_us`). Host speed: a fixed pure-Python stand-in "
                      "just before and after each trial's loop (`host_probe_us`, harness/judge/timing/host_speed.py; "
                      "larger is slower). Diagnostics, no target: where the host ratio follows the sync ratio, the "
                      "sync gap is the host's path to the launch; where the speed ratio does too, the two sides' "
                      "hosts ran at different speeds.",
                  "", "| subject | B | harness host µs | plain host µs | host ratio | harness speed µs | plain speed µs | "
                      "speed ratio | sync ratio |", "|---|---|---|---|---|---|---|---|---|"]
        sync = {(r["subject"], r["batch_size"]): r["ratio"] for r in report["rows"] if r["tier"] == Tier.SYNC}
        lines += [f"| {r['subject']} | {r['batch_size']} | {_cell(r['harness_host_us'], 1)} | "
                  f"{_cell(r['plain_host_us'], 1)} | {_cell(r['host_ratio'], 3)} | {_cell(r['harness_probe_us'], 2)} | "
                  f"{_cell(r['plain_probe_us'], 2)} | {_cell(r['probe_ratio'], 3)} | "
                  f"{_cell(sync.get((r['subject'], r['batch_size'])), 3)} |" for r in report["host_rows"]]
    if report.get("full_speed_rows"):
        rows = report["full_speed_rows"]
        lines += ["", f"The sync tier at the host's full speed: each side's repeats whose speed reading was at most "
                      f"{FULL_SPEED_FACTOR} x the cross-check's fastest ({rows[0]['limit_us']:.2f} µs), the median of "
                      "their sync figures. Beside the sync rows above, not instead of them: a host-bound figure read in "
                      "a vCPU's slow episode is the host's (docs/timing.md). \"–\": a side had no such repeat.",
                  "", "| subject | B | harness µs | repeats | plain µs | repeats | harness / plain | within ±15% |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['subject']} | {r['batch_size']} | {_cell(r['harness_us'], 3)} | {r['harness_repeats']} | "
                  f"{_cell(r['plain_us'], 3)} | {r['plain_repeats']} | {_cell(r['ratio'], 3)} | "
                  f"{'–' if r['within'] is None else ('yes' if r['within'] else '**no**')} |" for r in rows]
    with writing_into([out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tier_parity.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "tier_parity.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--solutions", default="cuda-v4,fla-recurrent")
    parser.add_argument("--batches", default="1,8,64,512")
    parser.add_argument("--warm-seconds", type=float, default=TimingConfig().warm_s,
                        help="clock warm-up before each plain timer, as the harness's tiers get (default: %(default)s; "
                             "0: none, the runs before 2026-11-26)")
    parser.add_argument("--plain-flush-mb", type=int, default=None,
                        help="a probe: FlashInfer's timers in the plain process flush this many MB (256: as the "
                             "harness does) instead of their own 2 x L2")
    parser.add_argument("--plain-sets", type=int, default=None,
                        help="argument sets the plain cupti and events timers take in turn, each of its own "
                             "allocations (default: as many as the timing core takes, up to 8 within 2 GiB; 1: the "
                             "runs before 2026-11-26; where buffers lie moves a B <= 8 figure by 2-8%%, docs/timing.md)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="plain-process repeats per point, in rounds; the plain figure is their median "
                             "(default: %(default)s; 1: the runs before 2026-11-26)")
    parser.add_argument("--harness-repeats", type=int, default=1,
                        help="harness runs, each a run_local.py of its own, one before each plain round; the "
                             "harness figure is their median (default: %(default)s)")
    parser.add_argument("--rejudge", type=Path, default=None, metavar="TIER_PARITY_JSON",
                        help="judge a recorded cross-check again with this version's comparisons, its report into "
                             "--out; nothing is measured, no GPU needed")
    args = parser.parse_args(argv)
    if args.rejudge is not None:
        try:
            report = rejudge(args.rejudge, args.out)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(summary(report))
        return 0
    import torch

    from harness.records.environment import git_commit, hardware_name

    if not torch.cuda.is_available():
        print("error: the tier parity check needs a CUDA GPU", file=sys.stderr)
        return 2
    solutions = [s for s in args.solutions.split(",") if s]
    plain_sets = None if args.plain_sets is None else max(1, args.plain_sets)  # None: the core's count per point
    batches = sorted({int(b) for b in args.batches.split(",")})
    harness, plain, stopped = {}, {}, None
    try:
        for round_ in range(max(args.harness_repeats, args.repeats, 1)):  # harness and plain in rounds: drift spreads
            if round_ < max(1, args.harness_repeats):
                with tempfile.TemporaryDirectory() as scratch:
                    extend(harness, harness_run(solutions, set(batches), Path(scratch)))
            if round_ < max(1, args.repeats):
                plain_repeats([COPY, *solutions], batches, 1, args.warm_seconds, args.plain_flush_mb, plain_sets,
                              found=plain)
    except KeyboardInterrupt:  # SIGINT, e.g. gpu_judge_check.sh's PARITY_LIMIT_S: keep what was measured
        stopped = (f"stopped by SIGINT after {len(harness)} harness points and "
                   f"{len(plain)} plain points of {len(batches) * (len(solutions) + 1)}")
    report = judged({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
                     "hardware": hardware_name("cuda"), "command": "python -m tools.tier_parity " + " ".join(argv or sys.argv[1:]),
                     "plain_timers": {str(t): v for t, v in PLAIN_TIMERS.items()}, "plain_warm_s": args.warm_seconds,
                     "plain_repeats": max(1, args.repeats), "harness_repeats": max(1, args.harness_repeats),
                     "plain_flush_mb": args.plain_flush_mb,
                     "plain_sets": "the core's" if plain_sets is None else plain_sets, "stopped": stopped},
                    harness, plain)
    write_report(args.out, report)
    print((args.out / "tier_parity.md").read_text())
    print(summary(report))
    return 130 if stopped else 0


def summary(report: dict) -> str:
    """The report's counts in one line: within target, within the widened range, and the sync tier at
    full speed (where any point could be judged so)."""
    rows, fast = report["rows"], [r for r in report.get("full_speed_rows", []) if r["within"] is not None]
    line = (f"{sum(r['within'] for r in rows)} of {len(rows)} within their targets; "
            f"{sum(r['within_spread'] for r in rows)} within the plain timer's range widened by the target")
    return line + (f"; sync at full speed: {sum(r['within'] for r in fast)} of {len(fast)} judged" if fast else "")


if __name__ == "__main__":
    sys.exit(main())
