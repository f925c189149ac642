"""Each tier is the timer it names: the harness's tiers beside the same timers called in a plain
process, on one GPU in one session (issue #29).

    python -m tools.tier_parity --out DIR [--solutions cuda-v4,fla-recurrent] [--batches 1,8,64,512] [--repeats 3]
                                  [--harness-repeats 1] [--plain-sets N] [--speed-log] [--clock-log]

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
   of one call and host speed as the sync tier measures them, the sync tier compared at the
   host's full speed, how often each side's trials read the host slow, and each side against itself
   (its repeats split in halves, judged by the same targets): :mod:`tools.parity_compare`
   judges and writes the report. With ``--speed-log``, a stand-in pinned to one CPU logs the host's
   speed beside both sides (:mod:`tools.host_speed_log`), and the report says how often it read slow
   while each ran; with ``--clock-log``, nvidia-smi logs the GPU's clocks beside them
   (:mod:`tools.gpu_clock_log`), and the report gives them by phase. With more than one harness run,
   the report sets each run's figure over the plain median, in order. Needs a CUDA GPU,
   flashinfer-python, cupti-python and flashinfer-bench 0.1.2 (``pip install --no-deps
   flashinfer-bench==0.1.2``). ``--rejudge TIER_PARITY_JSON`` judges a recorded run again instead,
   measuring nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from harness.facts import Tier
from harness.judge.core import placement_copies
from harness.judge.timing import CONTEST_SETTINGS, CONTEST_TRIALS, SYNC_ITERS, SYNC_TRIALS, SYNC_WARMUP, TimingConfig
from harness.judge.timing.host_speed import speed_beside
from harness.judge.timing.sync import host_call_s
from harness.records.store import load_run
from harness.run_lock import writing_into
from tools import gpu_clock_log
from tools.host_speed_log import read_log
from tools.parity_compare import (CONTEST_TRIAL_MEDIANS, HOST, PROBE, TARGETS, TRIAL_MEANS, TRIAL_PROBES, judged,
                                  machine_speed, rejudge, summary, write_report)
from tools.timing_proof import in_fresh_process, run_local

#: What each plain-process timer is, as the report names it.
PLAIN_TIMERS = {
    Tier.CUPTI: "flashinfer.testing.bench_gpu_time_with_cupti(fn, cold_l2_cache=True), median",
    Tier.CONTEST: f"bench_gpu_time_with_cupti(fn, **{CONTEST_SETTINGS}), {CONTEST_TRIALS} trials, each on an argument "
                  "set of its own, mean of medians",
    Tier.EVENTS: "flashinfer.testing.bench_gpu_time(fn, enable_cupti=False, use_cuda_graph=False, cold_l2_cache=True), median",
    Tier.SYNC: f"flashinfer_bench 0.1.2 bench.timing.time_runnable(fn, args, 10, 50), {SYNC_TRIALS} trials, each on an "
               "argument set of its own that the loop clones before every call, mean of the trial means",
}
COPY = "copy"
#: The floor's copy the plain process times too (harness/judge/floor.py).
COPY_METHOD = "torch copy_"


# ------------------------------------------------------------------ the harness's figures

def harness_figures(run_dir: Path, batches: set[int]) -> dict[tuple[str, int], dict[str, float | list[float]]]:
    """``{(subject, B): {tier: µs}}`` of a harness run: each solution's PASSED traces, and the
    torch ``copy_`` floor as :data:`COPY`; beside them the sync tier's host diagnostics
    (:func:`diagnostics`)."""
    run = load_run(run_dir)
    found: dict[tuple[str, int], dict[str, float]] = {}
    for floor in run.floors:
        if floor.method == COPY_METHOD and floor.batch_size in batches:
            found[(COPY, floor.batch_size)] = {t: f.value_us for t, f in floor.tiers.items() if f.available}
            found[(COPY, floor.batch_size)].update(diagnostics(floor.tiers.get(Tier.SYNC), host=False))
            found[(COPY, floor.batch_size)].update(contest_trials(floor.tiers.get(Tier.CONTEST)))
    for trace in run.traces:
        performance = trace.evaluation.performance
        if performance and trace.workload.axes.get("batch_size") in batches:
            figures = {t: f.value_us for t, f in performance.tiers.items() if f.available}
            figures.update(diagnostics(performance.tiers.get(Tier.SYNC)))
            figures.update(contest_trials(performance.tiers.get(Tier.CONTEST)))
            found[(trace.solution, trace.workload.axes["batch_size"])] = figures
    return found


def diagnostics(sync, host: bool = True) -> dict[str, float | list[float]]:
    """A sync tier's figure's host diagnostics that were recorded: ``host_call_us`` as :data:`HOST`
    (only with ``host``: the copy floor's host time is a copy's, the plain side has none to set
    beside it), ``host_probe_us`` as :data:`PROBE`, and each trial's mean and speed reading as the
    lists :data:`TRIAL_MEANS` and :data:`TRIAL_PROBES` (both or neither); none of an unavailable tier
    or an older trace."""
    if sync is None or not sync.available:
        return {}
    found = {HOST: sync.host_call_us if host else None, PROBE: sync.host_probe_us}
    if sync.trial_means_us and sync.host_probe_trials_us:
        found |= {TRIAL_MEANS: list(sync.trial_means_us), TRIAL_PROBES: list(sync.host_probe_trials_us)}
    return {key: value for key, value in found.items() if value is not None}


def contest_trials(contest) -> dict[str, list[float]]:
    """A contest tier's figure's trial medians as :data:`CONTEST_TRIAL_MEDIANS`, where they were
    recorded (none of an unavailable tier or an older trace)."""
    if contest is None or not contest.available or not contest.trial_medians_us:
        return {}
    return {CONTEST_TRIAL_MEDIANS: list(contest.trial_medians_us)}


def as_repeats(figures: dict[str, float | list[float]]) -> dict[str, list[float]]:
    """One measurement's figures as one repeat each (``{tier: [µs]}``); a per-trial list is already
    its trials, and extends by them."""
    return {key: list(value) if isinstance(value, list) else [value] for key, value in figures.items()}


def run_harness(solutions: list[str], scratch: Path) -> Path:
    """``run_local.py`` over the sweep set with every tier; returns its run folder."""
    tiers = ",".join(str(t) for t in TARGETS)
    return run_local(["--algo", ",".join(solutions), "--workloads", "sweep", "--tiers", tiers], scratch, quiet=False)


# ------------------------------------------------------------------ the plain process

class NoSweepWorkload(ValueError):
    """A batch size the sweep set has no workload of."""


def sweep_workload(batch: int, device: str = "cuda"):
    """``(definition, workload, inputs)``: the sweep set's workload of batch ``batch`` and its inputs
    on ``device`` (the judge's, call 0).

    Raises:
        NoSweepWorkload: the sweep set has no workload of batch ``batch`` (the message lists those it has).
    """
    from harness.data.dataset import describe_dataset, make_tensors
    from harness.data.workloads import materialize_inputs

    dataset = describe_dataset("sweep")  # the workloads alone: a batch size it lacks is said before any tensor is made
    workload = next((w for w in dataset.workloads if w.batch_size == batch), None)
    if workload is None:
        raise NoSweepWorkload(f"batch size {batch}: the sweep set has none (it has "
                              f"{', '.join(str(w.batch_size) for w in dataset.workloads)})")
    make_tensors(dataset, show_progress=False)
    return dataset.definition, workload, materialize_inputs(workload, dataset.definition, dataset.files, device, 0)


def solution_inputs(batch: int, state_dtype: str = "float32", device: str = "cuda"):
    """``(definition, given)``: what the judge's worker gives a solution on the sweep workload of
    batch ``batch``: its inputs (the state in ``state_dtype``, "float32" or "bfloat16") and
    NaN-filled destinations of that state dtype, by name, on ``device``."""
    definition, workload, inputs = sweep_workload(batch, device)
    return definition, given_inputs(definition, workload, inputs, state_dtype, device)


def given_inputs(definition, workload, inputs: dict, state_dtype: str = "float32", device: str = "cuda") -> dict:
    """:func:`solution_inputs`'s ``given`` of a workload already loaded (:func:`sweep_workload`'s)."""
    from harness.data.definition import TORCH_DTYPES
    from harness.judge.worker import destinations

    inputs = {**inputs, "state": inputs["state"].to(TORCH_DTYPES[state_dtype])}
    return {**inputs, **destinations(definition, workload.axes, state_dtype, device)}


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
    still honours, for a buffer of ``flush_mb`` MB (256: the events and sync tiers' flush on an H100 or H200,
    and the cupti tier's before 5d4fc77; ``harness.judge.timing.gpu_state.flush_bytes_for``). A probe of the B <= 8 CUPTI gap (docs/timing.md).
    FlashInfer 0.7.2's ``bench_gpu_time`` drops the size on its way to the events timer, so
    :func:`plain_figures` then calls ``bench_gpu_time_with_cuda_event`` itself."""
    return {} if flush_mb is None else {"l2_flush": True, "l2_flush_size_mb": flush_mb}


def plain_figures(subject: str, batch: int, warm_s: float = 0.0, flush_mb: int | None = None,
                  tiers: tuple[str, ...] = tuple(TARGETS), sets: int | None = None) -> dict[str, float | list[float]]:
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
    trial's loop (:func:`harness.judge.timing.host_speed.speed_beside`, as the sync tier reads it),
    and each trial's mean and reading apart (:data:`TRIAL_MEANS`, :data:`TRIAL_PROBES`). With the contest
    timer, each trial's median (:data:`CONTEST_TRIAL_MEDIANS`)."""
    import warnings

    from flashinfer.testing import bench_gpu_time, bench_gpu_time_with_cuda_event, bench_gpu_time_with_cupti
    from flashinfer_bench.bench.timing import time_runnable

    flush = flashinfer_flush(flush_mb)
    warnings.filterwarnings("ignore", message=".*deprecated.*", category=DeprecationWarning)

    def cupti(fn, args) -> float:
        warm(fn, args, warm_s)
        return statistics.median(bench_gpu_time_with_cupti(fn, input_args=args, cold_l2_cache=True, **flush))

    contest_ms: list[float] = []  # each contest trial's median

    def contest(fn, args) -> float:  # each trial after the clock warm-up, as the harness's contest trials
        def trial(trial_args) -> float:
            contest_ms.append(statistics.median(bench_gpu_time_with_cupti(
                fn, input_args=trial_args, **{**CONTEST_SETTINGS, **flush})))
            return contest_ms[-1]
        return mean_over_trials(args, CONTEST_TRIALS, lambda trial_args: warm(fn, trial_args, warm_s), trial)

    def events(fn, args) -> float:
        warm(fn, args, warm_s)
        return statistics.median(
            bench_gpu_time(fn, input_args=args, enable_cupti=False, use_cuda_graph=False, cold_l2_cache=True)
            if not flush else bench_gpu_time_with_cuda_event(fn, input_args=args, **flush))

    host_s: list[float] = []  # the sync trials' untimed calls, as the harness's sync tier times them
    probe_s: list[float] = []  # the host's speed beside each sync trial, as the harness's sync tier reads it
    trial_ms: list[float] = []  # each sync trial's mean

    def sync(fn, args) -> float:
        # Each trial's arguments are handed to the loop, which clones them before every call (outside
        # its event pair), as 0.1.2's evaluator and the harness's sync tier have it do: a rotating
        # callable of no arguments would clone nothing, and the launch would run on another host path.
        def trial(trial_args) -> float:
            mean_ms, probe = speed_beside(
                lambda: time_runnable(fn, list(trial_args), SYNC_WARMUP, SYNC_ITERS, "cuda:0"))
            probe_s.append(probe)
            host_s.append(host_call_s(fn, trial_args))
            trial_ms.append(mean_ms)
            return mean_ms
        return mean_over_trials(args, SYNC_TRIALS, lambda trial_args: warm(fn, trial_args, warm_s), trial)

    timers = {Tier.CUPTI: cupti, Tier.CONTEST: contest, Tier.EVENTS: events, Tier.SYNC: sync}
    with tempfile.TemporaryDirectory() as workdir:
        fn, args = subject_call(subject, batch, Path(workdir))
        placed = placement_copies(args, sets)  # None: as many as the core takes
        turns = (rotating(fn, placed), ()) if len(placed) > 1 else (fn, args)
        found = {tier: timers[tier](*((fn, args) if tier in ONE_SET_A_TRIAL else turns)) * 1e3 for tier in tiers}
        if contest_ms:
            found[CONTEST_TRIAL_MEDIANS] = [ms * 1e3 for ms in contest_ms]
        if host_s:
            found |= {HOST: statistics.median(host_s) * 1e6, PROBE: statistics.median(probe_s) * 1e6,
                      TRIAL_MEANS: [ms * 1e3 for ms in trial_ms], TRIAL_PROBES: [s * 1e6 for s in probe_s]}
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


# ------------------------------------------------------------------ the rounds of both sides

def harness_run(solutions: list[str], batches: set[int], scratch: Path) -> dict:
    """One more harness run (:func:`run_harness`) as ``{(subject, B): {tier: [µs]}}``, to extend
    the runs before it with (:func:`extend`)."""
    run = run_harness(solutions, scratch)
    return {key: as_repeats(figures) for key, figures in harness_figures(run, batches).items()}


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
                extend(found, {(subject, batch): as_repeats(figures)})
    return found


# ------------------------------------------------------------------ the machine beside the run

#: The pinned stand-in's log in ``--out`` (:mod:`tools.host_speed_log`).
SPEED_LOG = "speed_log.txt"
#: The GPU's clock log in ``--out`` (:mod:`tools.gpu_clock_log`).
CLOCK_LOG = "gpu_clocks.csv"


@contextlib.contextmanager
def phase(phases: list[dict], side: str):
    """Append ``{"side", "start", "end"}`` (epoch s) for the work inside, also when it is interrupted:
    when each side ran, to read the pinned stand-in's log by (:func:`tools.parity_compare.machine_speed`)."""
    entry = {"side": side, "start": time.time(), "end": None}
    phases.append(entry)
    try:
        yield
    finally:
        entry["end"] = time.time()


def speed_log_cpu() -> int:
    """The CPU the stand-in is pinned to: the last this process may run on. The measured processes
    are not pinned; with one or two of them busy on a machine of 16 CPUs, the scheduler leaves the
    logger's CPU to it (results/proof/20261127-H100-host-speed-df1fce0, part 4)."""
    return max(os.sched_getaffinity(0))


def start_speed_log(path: Path, wait_s: float = 30.0) -> subprocess.Popen:
    """:mod:`tools.host_speed_log` into ``path``, pinned to :func:`speed_log_cpu`, until stopped;
    returns once its first block is logged (its imports take about a second; at most ``wait_s``, or
    sooner if it exits), so the first side's phase is covered from its start."""
    logger = subprocess.Popen([sys.executable, "-m", "tools.host_speed_log", "--out", str(path),
                               "--cpu", str(speed_log_cpu())], cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + wait_s
    while not (path.exists() and path.stat().st_size) and logger.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return logger


def stop_speed_log(logger: subprocess.Popen | None, path: Path | None, phases: list[dict]) -> dict:
    """Stop the logger (None: there was none) and read its log at ``path``: the report's
    ``speed_log_cpu`` and ``machine_speed`` (:func:`tools.parity_compare.machine_speed`), or nothing."""
    if logger is None or path is None:
        return {}
    gpu_clock_log.stop(logger)
    blocks = read_log(path) if path.exists() else []
    return {"speed_log_cpu": speed_log_cpu(), "machine_speed": machine_speed(blocks, phases)}


def keep_log(scratch_log: Path, out: Path) -> None:
    """Move a logger's file into ``out`` under its own name (under the checkout's lock where ``out`` lies in
    it) and remove its scratch folder."""
    if scratch_log.exists():
        with writing_into([out]):
            shutil.move(scratch_log, out / scratch_log.name)
    shutil.rmtree(scratch_log.parent, ignore_errors=True)


def parse_args(argv: list[str] | None):
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
    parser.add_argument("--speed-log", action="store_true",
                        help="beside the run, a stand-in pinned to the last CPU logs the host's speed "
                             f"(tools/host_speed_log.py; kept as --out's {SPEED_LOG}); the report says how often it "
                             "read slow while each side ran")
    parser.add_argument("--clock-log", action="store_true",
                        help="beside the run, nvidia-smi logs the GPU's clocks, temperature, power and clock-event "
                             f"reasons once a second (read, never set; tools/gpu_clock_log.py, kept as --out's "
                             f"{CLOCK_LOG}); the report gives them by phase")
    parser.add_argument("--rejudge", type=Path, default=None, metavar="TIER_PARITY_JSON",
                        help="judge a recorded cross-check (its tier_parity.json, or .json.gz) again with this "
                             "version's comparisons, its report into "
                             "--out; nothing is measured, no GPU needed")
    return parser.parse_args(argv)


def measure(args, solutions: list[str], batches: list[int], plain_sets: int | None, speed_log: Path | None,
            clock_log: Path | None = None) -> dict:
    """Both sides in rounds (a harness run, then a plain round; drift spreads over every point), and
    beside them the pinned stand-in, logging into ``speed_log``, and nvidia-smi, logging the GPU's clocks
    into ``clock_log`` (None: no such log). Returns ``harness``, ``plain`` (figures by point), ``stopped``
    (None, or what SIGINT left measured) and the report's ``phases``, :func:`stop_speed_log` fields and
    ``gpu_clocks`` (:func:`tools.gpu_clock_log.by_phase`, where a clock log was written)."""
    harness, plain, stopped, phases = {}, {}, None, []
    logger = start_speed_log(speed_log) if speed_log else None
    clocks = gpu_clock_log.start(clock_log) if clock_log else None
    try:
        for round_ in range(max(args.harness_repeats, args.repeats, 1)):
            if round_ < max(1, args.harness_repeats):
                with phase(phases, "harness"), tempfile.TemporaryDirectory() as scratch:
                    extend(harness, harness_run(solutions, set(batches), Path(scratch)))
            if round_ < max(1, args.repeats):
                with phase(phases, "plain"):
                    plain_repeats([COPY, *solutions], batches, 1, args.warm_seconds, args.plain_flush_mb, plain_sets,
                                  found=plain)
    except KeyboardInterrupt:  # SIGINT, e.g. gpu_judge_check.sh's PARITY_LIMIT_S: keep what was measured
        stopped = (f"stopped by SIGINT after {len(harness)} harness points and "
                   f"{len(plain)} plain points of {len(batches) * (len(solutions) + 1)}")
    finally:
        machine = stop_speed_log(logger, speed_log, phases)
        gpu_clock_log.stop(clocks)
    if clocks is not None:
        machine["gpu_clocks"] = gpu_clock_log.by_phase(gpu_clock_log.read(clock_log), phases)
    return {"harness": harness, "plain": plain, "stopped": stopped, "phases": phases, **machine}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
    # the log is written outside the checkout while the harness runs (its vault puts back results/), and kept after
    scratch_log = Path(tempfile.mkdtemp(prefix="gdn-speed-log-")) / SPEED_LOG if args.speed_log else None
    scratch_clocks = Path(tempfile.mkdtemp(prefix="gdn-clock-log-")) / CLOCK_LOG if args.clock_log else None
    measured = measure(args, solutions, batches, plain_sets, scratch_log, scratch_clocks)
    harness, plain = measured.pop("harness"), measured.pop("plain")
    report = judged({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
                     "hardware": hardware_name("cuda"), "command": "python -m tools.tier_parity " + " ".join(argv or sys.argv[1:]),
                     "plain_timers": {str(t): v for t, v in PLAIN_TIMERS.items()}, "plain_warm_s": args.warm_seconds,
                     "plain_repeats": max(1, args.repeats), "harness_repeats": max(1, args.harness_repeats),
                     "plain_flush_mb": args.plain_flush_mb,
                     "plain_sets": "the core's" if plain_sets is None else plain_sets, **measured},
                    harness, plain)
    write_report(args.out, report)
    for log in (scratch_log, scratch_clocks):
        if log:
            keep_log(log, args.out)
    print((args.out / "tier_parity.md").read_text())
    print(summary(report))
    return 130 if report["stopped"] else 0


if __name__ == "__main__":
    sys.exit(main())
