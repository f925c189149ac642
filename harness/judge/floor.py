"""The copy floor: the physical limit of one workload on this device.

A correct kernel must read the state once and write it once, so no kernel
can be faster than a device copy of the state's bytes (in the variant's state
dtype). The floor is the fastest of several such copies measured in the same
run: torch's ``dst.copy_(state)`` with every tier and, on a CUDA device, the
Triton streaming copies of :mod:`harness.judge.stream_copy` with the headline
tier (:func:`candidate_tiers` says why only that one), since torch's copy is
not the fastest copy at every batch size (issue #19). Each copy is recorded
as a :class:`FloorMeasurement` naming its method; :mod:`harness.records.best_floor`
takes the best per (workload, state dtype, tier). On a CPU run torch's copy is
the only one: under Triton's interpreter a kernel is a Python loop, no copy.

The judge measures the copies in its own process, before any worker starts,
over as many buffer sets in turn as the timing core gives a solution's calls of
the same bytes (:func:`floor_buffer_sets`), so the floor and the kernels it
divides are medians over as many placements. It uses them twice: as the denominator of ``× copy floor``, and as the limit
below which a figure is rejected (:data:`FLOOR_MARGINS`, :func:`physical_limit_us`,
docs/judging.md).

A workload without a state (the optional input left out: the state starts at
zero) reads none, so its kernel only writes ``new_state``: its floor is a
device fill of those bytes (``dst.zero_()`` and the streaming fills), not a copy.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

import torch

from harness.data.definition import TORCH_DTYPES
from harness.data.workloads import Workload, build_inputs
from harness.facts import HEADLINE_TIERS, Tier
from harness.judge.core import placement_copies
from harness.judge.timing import TierUnavailable, TimingConfig, measure
from harness.judge.timing.tiers import describe_timer
from harness.records.trace import Environment, FloorMeasurement, TierFigure

#: A figure below the margin × the fastest copy measured (:func:`physical_limit_us`) is rejected
#: as faster than physics; the margin is that of the copy's tier (:func:`floor_margin`).
#: CUPTI (a GPU): the device time of the best of torch's and the Triton streaming copies, which a
#: kernel that reads and writes the same state bytes can beat only by noise. The fastest honest
#: CUPTI figure over the median copy floor in the H100 sweeps of 2026-11-25 was 0.962 (cuda-v4,
#: B = 16, results/judge-check/20261125-H100-core), 0.984-0.995 in the three of
#: results/judge-check/20261125-H100-cupti-core; one set of buffers can read up to 8 % apart from another
#: for the same loop (buffer placement, the probe in that folder). 0.90 of the fastest
#: *call* of any copy leaves both. Not yet checked on an H200 (none was lent for it).
#: Other tiers (a CPU's wall clock, whose copy runs on one thread and which multi-threaded code
#: can beat; a GPU without CUPTI, whose events floor includes a launch): the old 0.75.
FLOOR_MARGINS = {Tier.CUPTI: 0.90}
DEFAULT_FLOOR_MARGIN = 0.75


def tier_figure(tier: str, result, nbytes: int, **extra) -> TierFigure:
    """A tier's result as a :class:`TierFigure` (GB/s = ``nbytes`` over the figure)."""
    if isinstance(result, TierUnavailable):
        return TierFigure(tier=tier, available=False, reason=result.reason)
    gbps = nbytes / (result.value_us * 1e-6) / 1e9 if result.value_us > 0 else None
    fields = {key: result.extra.get(key) for key in ("trials", "host_call_us", "host_probe_us", "host_probe_trials_us",
                                                   "trial_means_us", "trial_medians_us", "stop", "noise")} | extra
    return TierFigure(tier=tier, available=True, value_us=result.value_us, median_us=result.median_us,
                      p10_us=result.p10_us, p90_us=result.p90_us, min_us=result.min_us, max_us=result.max_us,
                      iters=result.iters, achieved_gb_per_s=gbps, **fields)


@contextlib.contextmanager
def one_thread_on_the_cpu(device: str):
    """On a CPU run, time the copy on one thread. torch's multi-threaded copy waits for all its
    threads, so on a busy machine every call waits for a descheduled one (a 512 KB copy read
    7.9 ms on a loaded two-core machine, and an honest solution fell "below the physical
    limit"); one thread's fastest copy is what one core does, however busy the other is."""
    if not str(device).startswith("cpu"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


#: method -> why its first call raised, for the rest of this process: a candidate that does not
#: compile here fails alike for every workload, and each failed Triton compile costs a second or
#: two and pages of ptxas output (80 of them in the first H100 run of the Triton candidates).
_RAISED: dict[str, str] = {}


#: One buffer set of the floor, in a copy's argument order: ``state`` the source (None for a
#: fill), ``new_state`` the destination. A dict, so the sync tier clones both as flashinfer-bench
#: clones a definition's arguments (:func:`harness.judge.timing.measure`, ``positional``).
BufferSet = dict[str, torch.Tensor | None]


@dataclass
class Copy:
    """One way of moving the floor's bytes: its ``method`` name, the call timed (it takes one
    :data:`BufferSet`'s source and destination), the tiers it is timed with, and for a candidate of ours a first call that
    says what it got wrong (None: the bytes are right)."""

    method: str
    call: Callable[[torch.Tensor | None, torch.Tensor], object]
    tiers: tuple[str, ...]
    first_call: Callable[[], str | None] | None = None


def candidate_tiers(tiers, measured: dict[str, TierFigure]) -> tuple[str, ...]:
    """The tier the Triton candidates are timed with: the first of ``tiers`` in headline order
    that torch's copy measured (CUPTI where it records). Only that one, to keep the floor's
    time small: it is the tier of the headline figures, of the summary, leaderboard and
    targets, and of the rejection limit, while a floor's events and sync figures hold the
    launch (5-50 µs at B = 1, docs/timing.md), where a Python-launched kernel gains nothing
    on torch's. Per tier the floor is the best of what was measured in that tier, so the
    other tiers keep torch's copy and ``× copy floor`` still divides like by like."""
    timed = [t for t in HEADLINE_TIERS if t in tiers and measured.get(t) and measured[t].available]
    return tuple(timed[:1])


def triton_copies(source: torch.Tensor | None, target: torch.Tensor, tiers: tuple[str, ...]) -> list[Copy]:
    """The Triton streaming copies (fills, without a source) of ``target``'s bytes
    (:func:`harness.judge.stream_copy.candidate_configs`); none where Triton is not installed.
    Each copy's first call checks it on ``source`` and ``target``; its timed calls take the
    buffer set they are handed."""
    try:
        from harness.judge import stream_copy
    except ImportError:  # an optional extra: the floor is then torch's copy alone, as its methods say
        return []
    configs = stream_copy.candidate_configs(target.numel() * target.element_size())
    if source is None:
        return [Copy(f"{c.method('fill')} (no state input)", lambda s, t, c=c: stream_copy.stream_fill_zero(t, c),
                     tiers, lambda c=c: _first_call(lambda: stream_copy.stream_fill_zero(target, c),
                                                    target, torch.zeros_like(target))) for c in configs]
    return [Copy(c.method(), lambda s, t, c=c: stream_copy.stream_copy(s, t, c), tiers,
                 lambda c=c: _first_call(lambda: stream_copy.stream_copy(source, target, c), target, source))
            for c in configs]


def _first_call(call: Callable[[], object], target: torch.Tensor, expected: torch.Tensor) -> str | None:
    """Run ``call`` once into a NaN-filled ``target`` (torch's copy already wrote the right bytes
    there) and compare: None when ``target`` equals ``expected`` exactly, else what went wrong.
    The first call of a Triton kernel compiles it, which would otherwise eat the clock warm-up."""
    target.fill_(float("nan"))
    call()
    if target.is_cuda:
        torch.cuda.synchronize(target.device)
    return None if torch.equal(target, expected) else "the copy's first call did not reproduce the bytes exactly"


def measure_floor(definition, workload: Workload, stored: dict, state_dtype: str, device: str, tiers,
                  timing: TimingConfig, flush, environment: Environment) -> list[FloorMeasurement]:
    """Every copy the floor of ``workload``'s state in ``state_dtype`` is the best of, timed:
    first ``dst.copy_(state)`` with every tier, then on a CUDA device the Triton streaming
    copies with the tier of :func:`candidate_tiers` (``dst.zero_()`` and streaming fills when
    the workload has no state; module doc). One :class:`FloorMeasurement` per copy, ``method``
    naming it, all sharing one new ``best_of`` id; :mod:`harness.records.best_floor` picks the
    best. A candidate whose first call raises or does not move the bytes exactly is recorded
    with its tier unavailable and the reason, never timed."""
    state = build_inputs(workload, definition, stored, device, 0)["state"]
    if state is None:
        shape = definition.shape_of(definition.outputs["new_state"], workload.axes)
        target = torch.empty(shape, dtype=TORCH_DTYPES[state_dtype], device=device)
        nbytes = target.numel() * target.element_size()
        first = Copy("torch zero_ (no state input)", lambda s, t: t.zero_(), tuple(tiers))
    else:
        state = state.to(TORCH_DTYPES[state_dtype])
        target = torch.empty_like(state)
        nbytes = 2 * state.numel() * state.element_size()
        first = Copy("torch copy_", lambda s, t: t.copy_(s), tuple(tiers))
    sets = floor_buffer_sets(state, target)
    floors = [_time_copy(first, sets, nbytes, device, timing, flush)]
    others = candidate_tiers(tiers, floors[0][1])
    if str(device).startswith("cuda") and others:  # on a CPU, Triton's interpreter is no copy
        floors += [_time_copy(c, sets, nbytes, device, timing, flush) for c in triton_copies(state, target, others)]
    stamp, group = datetime.now(timezone.utc).isoformat(timespec="seconds"), uuid.uuid4().hex[:16]
    return [FloorMeasurement(workload=workload.uuid, batch_size=workload.batch_size, state_dtype=state_dtype,
                             nbytes=nbytes, method=method, best_of=group, tiers=figures, environment=environment,
                             timestamp=stamp) for method, figures in floors]


def floor_buffer_sets(state: torch.Tensor | None, target: torch.Tensor) -> list[BufferSet]:
    """The buffer sets the floor's calls take in turn: ``{"state": state, "new_state": target}``,
    then copies, each tensor an allocation of its own, as many as the timing core gives calls that
    move the same bytes (:func:`harness.judge.core.placement_copies`), so that the floor is a
    median over as many placements as the kernels it divides."""
    return placement_copies({"state": state, "new_state": target})


def _time_copy(copy: Copy, sets: list[BufferSet], nbytes: int, device: str, timing: TimingConfig,
               flush) -> tuple[str, dict[str, TierFigure]]:
    """``copy``'s figures in its tiers (:func:`measure`) over ``sets`` in turn (warm-up calls on
    the first), after its checked first call where it has one."""
    wrong = _RAISED.get(copy.method)
    try:
        wrong = wrong or (copy.first_call() if copy.first_call else None)
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot run here is recorded, not fatal
        wrong = _RAISED[copy.method] = f"the copy's first call raised {type(exc).__name__}: {str(exc)[:300]}"
    if wrong:
        return copy.method, {t: TierFigure(tier=t, available=False, reason=wrong) for t in copy.tiers}
    with one_thread_on_the_cpu(device):
        def setup(index=None) -> BufferSet:
            return sets[0 if index is None else index % len(sets)]

        return copy.method, {tier: tier_figure(tier, measure(tier, copy.call, setup, flush, device, timing,
                                                             positional=True), nbytes,
                                               timer=describe_timer(tier, timing, False, sets=len(sets)))
                             for tier in copy.tiers}


def physical_limit_us(floors: Iterable[FloorMeasurement]) -> float | None:
    """The fastest copy measured for one workload and state dtype, over every method, tier and
    call (µs): the device time of the fastest copy (CUPTI) where CUPTI recorded, since the
    events and sync figures add launch overhead to it; the wall clock on a CPU run. The
    minimum, not the median: a busy machine only ever makes a copy slower, and the limit must
    not rise with it. None when nothing was measured."""
    fastest = _fastest_copy(floors)
    return fastest[0] if fastest else None


def floor_margin(floors: Iterable[FloorMeasurement]) -> float:
    """The margin of the tier whose copy :func:`physical_limit_us` is (:data:`FLOOR_MARGINS`)."""
    fastest = _fastest_copy(floors)
    return FLOOR_MARGINS.get(fastest[1], DEFAULT_FLOOR_MARGIN) if fastest else DEFAULT_FLOOR_MARGIN


def _fastest_copy(floors: Iterable[FloorMeasurement]) -> tuple[float, str] | None:
    values = [(f.min_us, tier) for floor in floors for tier, f in floor.tiers.items() if f.available and f.min_us]
    return min(values) if values else None
