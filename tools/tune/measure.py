"""The measuring pieces of the launch-table tuner (``python -m tools.tune``).

The tuner checks every launch configuration of a kernel against the
reference and times it per batch size, then writes the GPU's table file into
the solution. The timing is the harness's own CUPTI tier (pure kernel time, cold
L2) where cupti-python is installed, else its CUDA-events tier; the tier used
is recorded next to every number, so a tuning file never passes events
figures off as CUPTI ones. The choice of one config per batch size
(:func:`steady_choice`) and the table's compressed form (:func:`compress_table`;
:func:`lookup_launch_config` reads one, for :mod:`tools.tune.model_check`) live here too.
"""

from __future__ import annotations

import math
import traceback
from typing import Callable, Sequence

import torch

from harness.facts import DEFAULT_TOLERANCE, STATE_DTYPE_TOLERANCES, Tier, Tolerance
from harness.judge.check import tensor_errors
from harness.judge.solutions import load_meta, load_solution
from harness.judge.timing import L2Flusher, TierUnavailable, TimingConfig, TimingStats, bench_cupti, bench_events
from tools.vectorized import reference_outputs  # noqa: F401  (re-exported: the tuners' reference)
HQ, HV, HEAD_K, HEAD_V = 4, 8, 128, 128


def random_inputs(batch: int, device, seed: int = 0, state_dtype: torch.dtype = torch.float32) -> dict:
    """Random inputs of the contract's shapes plus empty destinations (for the
    probes in ``scripts/``; the tuner takes the workload generator's inputs,
    :mod:`tools.tune.inputs`).

    q, k ``[B,1,4,128]`` bf16 (k scaled to unit norm on average, like the
    L2-normalized keys the state was built with), v ``[B,1,8,128]`` bf16,
    state ``[B,8,128,128]`` in ``state_dtype``, A_log = log U[1, 16] and
    dt_bias ``[8]`` f32, a, b ``[B,1,8]`` bf16, scale None (= 1/sqrt(128));
    output ``[B,1,8,128]`` bf16 and new_state like state, both uninitialized.
    """
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, std=1.0, dtype=torch.float32):
        return (std * torch.randn(*shape, generator=gen, device=device)).to(dtype)

    bf16 = torch.bfloat16
    return {
        "q": randn(batch, 1, HQ, HEAD_K, dtype=bf16),
        "k": randn(batch, 1, HQ, HEAD_K, std=HEAD_K ** -0.5, dtype=bf16),
        "v": randn(batch, 1, HV, HEAD_V, dtype=bf16),
        "state": randn(batch, HV, HEAD_V, HEAD_K, dtype=state_dtype),
        "A_log": torch.log(torch.rand(HV, generator=gen, device=device) * 15 + 1),
        "a": randn(batch, 1, HV, dtype=bf16),
        "dt_bias": randn(HV, std=0.5),
        "b": randn(batch, 1, HV, dtype=bf16),
        "scale": None,
        "output": torch.empty(batch, 1, HV, HEAD_V, dtype=bf16, device=device),
        "new_state": torch.empty(batch, HV, HEAD_V, HEAD_K, dtype=state_dtype, device=device),
    }


def state_tolerance(dtype_name: str) -> Tolerance:
    """The harness's tolerance for a state stored in ``dtype_name``: the
    definition's 1e-2 for float32, the derived one (harness.facts) otherwise."""
    return STATE_DTYPE_TOLERANCES.get(dtype_name, DEFAULT_TOLERANCE)


def check_call(call: Callable[[], object], inputs: dict, expected: tuple,
               tolerance: Tolerance = DEFAULT_TOLERANCE) -> dict:
    """Run ``call`` once on NaN-filled destinations; compare with ``expected``.

    Returns ``{"correct", "mismatches", "max_abs_err_output", "max_abs_err_state"}``
    (NaN or unwritten elements count as mismatches).

    Raises:
        Exception: whatever ``call`` raises.
    """
    inputs["output"].fill_(float("nan"))
    inputs["new_state"].fill_(float("nan"))
    call()
    if inputs["output"].is_cuda:  # kernels run asynchronously: wait before reading their bytes
        torch.cuda.synchronize()
    out = tensor_errors(inputs["output"], expected[0], tolerance)
    state = tensor_errors(inputs["new_state"], expected[1], tolerance)
    return {"correct": out.failed + state.failed == 0, "mismatches": out.failed + state.failed,
            "max_abs_err_output": out.max_abs, "max_abs_err_state": state.max_abs}


def tuner_timing(iters: int = 100, warmup: int = 5) -> TimingConfig:
    """The timing settings of the tuners: a tune times configs back to back,
    so the GPU stays at its working clock and a short ramp per config
    (0.05 s) is enough."""
    return TimingConfig(warmup=warmup, iters=iters, budget_s=5.0, warm_s=0.05)


class KernelTimer:
    """Median µs of zero-argument calls taken in turn (one per :func:`harness.judge.core.placement_copies` set) under a
    cold L2, CUPTI tier if possible.

    ``tier`` says which tier produced the numbers ("cupti" or "events");
    ``why_not_cupti`` holds the reason when CUPTI was unavailable, and
    ``cupti_calls`` how many calls CUPTI timed before that (0 unless CUPTI
    failed part way: then the earlier figures are CUPTI's, the later ones events').
    """

    def __init__(self, device, iters: int = 100, warmup: int = 5):
        self.flush = L2Flusher(device)
        self.config = tuner_timing(iters, warmup)
        self.tier = "cupti"
        self.why_not_cupti: str | None = None
        self.cupti_calls = 0

    def __call__(self, calls: Sequence[Callable[[], object]]) -> float:
        """Median µs of ``calls`` taken in turn, the k-th timed call ``calls[k % len(calls)]``, warm-up
        calls the first (their kernels' time on the CUPTI tier, the events' span otherwise)."""
        fn, setup = (lambda k: calls[k]()), (lambda index=None: 0 if index is None else index % len(calls))
        if self.tier == "cupti":
            stats = bench_cupti(fn, setup, self.flush.for_tier(Tier.CUPTI), self.config)  # as the judge's cupti tier
            if isinstance(stats, TierUnavailable):
                self.tier, self.why_not_cupti = "events", stats.reason
            else:
                self.cupti_calls += 1
                return stats.median_us
        stats: TimingStats = bench_events(fn, setup, self.flush.for_tier(Tier.EVENTS), self.config)
        return stats.median_us


def check_and_time(calls: Sequence[Callable[[], object]], inputs: dict, expected: tuple, timer: "KernelTimer",
                   tolerance: Tolerance = DEFAULT_TOLERANCE) -> dict:
    """:func:`check_call` of ``calls[0]`` (the call on ``inputs``), then ``"us"`` from ``timer`` over
    all of them (one per placement set) when it ran. A config that fails to compile or launch is
    recorded as ``{"correct": False, "error": ...}`` (traceback printed) so one bad variant never
    ends a tune."""
    try:
        result = check_call(calls[0], inputs, expected, tolerance)
        result["us"] = timer(calls)
    except Exception as exc:
        result = failure_row(exc)
    return result


def failure_row(exc: Exception) -> dict:
    """A tuner's row for a variant that raised (traceback printed)."""
    traceback.print_exception(exc)
    return {"correct": False, "error": f"{type(exc).__name__}: {exc}"[:300]}


def load_baseline(solution_dir, state_dtype: str = "float32") -> tuple[Callable[[dict], Callable[[], object]] | None,
                                                                    str | None]:
    """Load another solution once, as a baseline column of a tune.

    Returns:
        ``(make_call, None)``, where ``make_call(inputs)`` is a zero-argument
        call running that solution's ``run`` on ``inputs``, or ``(None,
        reason)`` when it cannot run here (it declares no ``state_dtype``
        state, its packages are missing, it fails to load). A solution that
        declares ``inplace_state`` gets a copy of the state as both ``state``
        and ``new_state``, as the harness hands it over.
    """
    try:
        meta = load_meta(solution_dir)
        if state_dtype not in meta.state_dtypes:
            return None, f"declares no {state_dtype} state"
        missing = meta.missing_packages()
        if missing:
            return None, f"missing packages: {', '.join(missing)}"
        module = load_solution(meta)
    except Exception as exc:  # a missing baseline column, not a failed tune
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"

    def make_call(inputs: dict) -> Callable[[], object]:
        args = inputs
        if meta.inplace_state:
            state = inputs["state"].clone()
            args = dict(inputs, state=state, new_state=state)
        return lambda: module.run(args)

    return make_call, None


def fastest_correct(results: dict[str, dict]) -> str | None:
    """Name of the fastest entry of ``{name: {"correct": bool, "us": float}}``
    among the correct ones (None when none is correct)."""
    good = {name: r for name, r in results.items() if r.get("correct")}
    return min(good, key=lambda name: good[name]["us"]) if good else None


#: Timer resolution below which two timings count as equal in :func:`steady_choice`:
#: CUPTI's kernel timestamps on an H100 come in steps of 32 ns (the tuning
#: files' small-batch times are multiples of it), so a config one step slower
#: than another is not measurably slower.
TIMER_STEP_US = 0.032


def steady_choice(times_by_batch: list[tuple[int, dict[str, float]]], rel_tol: float = 0.005,
                  abs_tol_us: float = TIMER_STEP_US) -> list[tuple[int, str]]:
    """Pick one config per batch size without chasing timing noise.

    Args:
        times_by_batch: ``[(batch, {config name: median µs})]`` in ascending
            batch order, correct configs only.
        rel_tol, abs_tol_us: a config counts as fastest at a batch size when
            it is within ``max(rel_tol * best, abs_tol_us)`` µs of the best.

    Returns:
        ``[(batch, config name)]``: among the configs that count as fastest at
        that batch size, the one with the smallest geometric-mean slowdown
        (time / best time) over that batch size and its neighbours in the
        list (a config missing at a neighbour counts as 2x slower there).
        The plain argmin flips between configs that differ by one timer step
        from one batch size to the next; this keeps the table's entries few
        and each one fast at its neighbours too.

    Raises:
        ValueError: a batch size without any timing.
    """
    bests, slowdowns = [], []
    for batch, times in times_by_batch:
        if not times:
            raise ValueError(f"no correct config timed at B={batch}")
        bests.append(min(times.values()))
        slowdowns.append({name: us / bests[-1] for name, us in times.items()})
    chosen = []
    for i, ((batch, times), best) in enumerate(zip(times_by_batch, bests)):
        margin = max(rel_tol * best, abs_tol_us) + 1e-9  # 1e-9: 2.400 - 2.368 is 0.032000000000000028
        tied = [name for name, us in times.items() if us - best <= margin]
        around = slowdowns[max(i - 1, 0):i + 2]
        chosen.append((batch, min(tied, key=lambda name: sum(math.log(s.get(name, 2.0)) for s in around))))
    return chosen


def lookup_launch_config(table, batch: int):
    """The config of the first ``(largest batch | None, config)`` entry of
    ``table`` that covers ``batch`` (None covers every batch); the last
    entry's config when none does.

    Raises:
        ValueError: an empty table.
    """
    if not table:
        raise ValueError("empty launch table")
    for largest, config in table:
        if largest is None or batch <= largest:
            return config
    return table[-1][1]


def compress_table(best_by_batch: list[tuple[int, object]]) -> list[list]:
    """``[(batch, best config)]`` (ascending batch) -> ``[[largest batch | None, config]]``.

    Neighbouring batch sizes with the same best config share one entry; the
    last entry's limit is None (it serves every larger batch).
    """
    table: list[list] = []
    for batch, config in best_by_batch:
        if table and table[-1][1] == config:
            table[-1][0] = batch
        else:
            table.append([batch, config])
    if table:
        table[-1][0] = None
    return table

