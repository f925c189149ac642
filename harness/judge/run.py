"""Check and time solutions on workloads; one flashinfer-bench trace per pair.

The unit of work is :func:`evaluate_solution`: one solution variant (a
solution in one state dtype) over every workload of a dataset. It never raises
for a solution's fault: load failures, exceptions and wrong results become
statuses in the traces it yields. :mod:`harness.judge.isolation` runs it in a
separate process per solution.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from harness.judge.check import CheckResult, Status, check_outputs
from harness.data.dataset import Dataset
from harness.errors import SolutionUnsupported
from harness.records.environment import environment
from harness.data.reference_cache import ReferenceCache
from harness.judge.solutions import SolutionMeta, Tolerance, load_module
from harness.judge.timing import TierUnavailable, TimingConfig, TimingStats, measure
from harness.data.workloads import Workload, materialize_inputs

STATE_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: Preference order for the headline latency of a trace.
HEADLINE_TIERS = ("cupti", "events", "wallclock", "sync")


@dataclass(frozen=True)
class Variant:
    """A solution run with one state dtype; non-fp32 variants are their own rows."""

    meta: SolutionMeta
    state_dtype: str = "float32"

    @property
    def label(self) -> str:
        return self.meta.name if self.state_dtype == "float32" else f"{self.meta.name}[{self.state_dtype}-state]"

    @property
    def tolerance_override(self) -> Tolerance | None:
        return self.meta.tolerances.get(self.state_dtype)


def variants_of(meta: SolutionMeta) -> list[Variant]:
    """One variant per declared state dtype, fp32 first."""
    return [Variant(meta, d) for d in sorted(meta.state_dtypes, key=lambda d: d != "float32")]


@dataclass
class RunConfig:
    """What a run does: device, tiers, correctness trials and tolerances."""

    device: str = "cpu"
    tiers: tuple[str, ...] = ("wallclock",)
    trials: int = 3
    tolerance: Tolerance = field(default_factory=Tolerance)
    timing: TimingConfig = field(default_factory=TimingConfig)


def skip_reason(variant: Variant, dataset: Dataset, config: RunConfig) -> str | None:
    """Why a variant cannot run here, or None."""
    meta = variant.meta
    if meta.definition != dataset.definition.name:
        return f"solution is for definition {meta.definition}, dataset is {dataset.definition.name}"
    if meta.gpu_only and not config.device.startswith("cuda"):
        return "GPU-only solution and the run is on the CPU"
    missing = meta.missing_packages()
    if missing:
        return f"missing packages: {', '.join(missing)}"
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        return "--device cuda but no CUDA device is visible"
    return None


def destinations(dataset: Dataset, workload: Workload, state_dtype: torch.dtype, device) -> dict[str, torch.Tensor]:
    """NaN-filled output buffers, so any element a solution leaves unwritten fails."""
    dests = {}
    for name, spec in dataset.definition.outputs.items():
        dtype = state_dtype if name == "new_state" else spec.torch_dtype
        dests[name] = torch.full(dataset.definition.shape_of(spec, workload.axes), float("nan"),
                                 dtype=dtype, device=device)
    return dests


def prepare_inputs(inputs: dict[str, Any], variant: Variant) -> dict[str, Any]:
    """Convert the state to the variant's dtype (outside any timed region)."""
    if variant.state_dtype == "float32" or inputs.get("state") is None:
        return inputs
    return dict(inputs, state=inputs["state"].to(STATE_TORCH_DTYPES[variant.state_dtype]))


def call_args(inputs: dict[str, Any], dests: dict[str, torch.Tensor], inplace: bool) -> dict[str, Any]:
    """The dict handed to ``run``: inputs plus destinations. For an in-place
    solution the state is copied into ``new_state``, which is passed as both."""
    args = dict(inputs, **dests)
    if inplace:
        dests["new_state"].copy_(inputs["state"])
        args["state"] = dests["new_state"]
    return args


def make_setup(inputs: dict[str, Any], dests: dict[str, torch.Tensor], inplace: bool) -> Callable[[], dict]:
    """Per-iteration setup for timing: fresh clones of every input tensor (so a
    solution that overwrites its inputs cannot profit) and the destinations."""
    def setup() -> dict[str, Any]:
        fresh = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        return call_args(fresh, dests, inplace)
    return setup


def check_workload(run_fn, variant: Variant, dataset: Dataset, workload: Workload, config: RunConfig,
                   references: ReferenceCache) -> tuple[CheckResult, dict[str, Any]]:
    """Check ``run_fn`` on ``config.trials`` trials of fresh random inputs.

    Returns the worst trial's result (first failure, else the pass with the
    largest errors merged) and the last trial's inputs for timing.
    """
    tolerance = variant.tolerance_override or config.tolerance
    state_dtype = STATE_TORCH_DTYPES[variant.state_dtype]
    merged: CheckResult | None = None
    inputs = {}
    for trial in range(config.trials):
        raw = materialize_inputs(workload, dataset.definition, dataset.files, config.device, trial)
        expected = references.get(dataset, workload, trial, raw)
        inputs = prepare_inputs(raw, variant)
        dests = destinations(dataset, workload, state_dtype, config.device)
        returned = run_fn(call_args(inputs, dests, variant.meta.inplace_state))
        if config.device.startswith("cuda"):
            torch.cuda.synchronize()
        result = check_outputs(returned, dests, expected, tolerance, dtypes={"new_state": state_dtype})
        if result.status != Status.PASSED:
            result.message = f"trial {trial}: {result.message}"
            return result, inputs
        merged = result if merged is None else CheckResult(
            Status.PASSED, {n: e.worst(merged.errors.get(n)) for n, e in result.errors.items()})
    return merged, inputs


def time_workload(run_fn, variant: Variant, dataset: Dataset, workload: Workload, inputs: dict[str, Any],
                  config: RunConfig, flush) -> dict[str, TimingStats | TierUnavailable]:
    """Every requested tier for one (solution, workload)."""
    dests = destinations(dataset, workload, STATE_TORCH_DTYPES[variant.state_dtype], config.device)
    setup = make_setup(inputs, dests, variant.meta.inplace_state)
    return {tier: measure(tier, run_fn, setup, flush, config.device, config.timing) for tier in config.tiers}


COPY_FLOOR = "copy-floor"


def copy_floor_trace(dataset: Dataset, workload: Workload, config: RunConfig, flush) -> dict[str, Any]:
    """The physical limit as a trace of its own (solution ``copy-floor``): a
    device copy of the workload's fp32 state bytes (``dst.copy_(state)``: one
    read and one write of the state), timed by the same tiers. Not a solution:
    its status is PASSED only in the sense that it ran; nothing is checked."""
    inputs = materialize_inputs(workload, dataset.definition, dataset.files, config.device, 0)
    state = inputs["state"]
    target = torch.empty_like(state)
    timings = {tier: measure(tier, lambda s: target.copy_(s), lambda: state, flush, config.device, config.timing)
               for tier in config.tiers}
    nbytes = 2 * state.numel() * state.element_size()
    meta = SolutionMeta(COPY_FLOOR, Path("."), dataset.definition.name, "python", "gdn-decode-bench",
                        "device copy of the state bytes", "", (), False, False, ("float32",))
    return make_trace(dataset, workload, Variant(meta), Status.PASSED, "physical limit, not checked", config,
                      timings=timings, nbytes=nbytes)


def bytes_moved(inputs: dict[str, Any], state_dtype: torch.dtype) -> int:
    """Bytes a kernel must move at least: the state read and written, q/k/v/a/b
    read and the bf16 output written (the output has v's size)."""
    state = inputs["state"]
    state_bytes = state.numel() * torch.tensor([], dtype=state_dtype).element_size()
    small = sum(t.numel() * t.element_size() for k, t in inputs.items()
                if isinstance(t, torch.Tensor) and k != "state")
    return 2 * state_bytes + small + inputs["v"].numel() * inputs["v"].element_size()


def tier_json(result: TimingStats | TierUnavailable, nbytes: int) -> dict[str, Any]:
    """A tier's entry in ``performance.tiers`` of a trace (GB/s = bytes moved / time)."""
    if isinstance(result, TierUnavailable):
        return {"available": False, "reason": result.reason}
    return {"available": True, "value_us": result.value_us, "median_us": result.median_us,
            "p10_us": result.p10_us, "p90_us": result.p90_us, "min_us": result.min_us,
            "max_us": result.max_us, "iters": result.iters, **result.extra,
            "achieved_gb_per_s": nbytes / (result.value_us * 1e-6) / 1e9 if result.value_us > 0 else None}


def make_trace(dataset: Dataset, workload: Workload, variant: Variant, status: Status, log: str, config: RunConfig,
               check: CheckResult | None = None, timings: dict | None = None,
               nbytes: int = 0, tolerance: Tolerance | None = None) -> dict[str, Any]:
    """A trace in flashinfer-bench's Trace JSON schema, with our extras in
    ``correctness.extra`` and ``performance.tiers``."""
    evaluation: dict[str, Any] = {
        "status": status.value, "log": log, "environment": environment(config.device),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if check is not None and check.errors:
        tol = tolerance or config.tolerance
        evaluation["correctness"] = {
            "max_relative_error": max(e.max_rel for e in check.errors.values()),
            "max_absolute_error": max(e.max_abs for e in check.errors.values()),
            "extra": {"per_output": check.as_dict(), "trials": config.trials, "atol": tol.atol, "rtol": tol.rtol,
                      "state_dtype": variant.state_dtype},
        }
    if timings:
        tiers = {t: tier_json(r, nbytes) for t, r in timings.items()}
        headline = next((tiers[t] for t in HEADLINE_TIERS if tiers.get(t, {}).get("available")), None)
        evaluation["performance"] = {
            "latency_ms": headline["value_us"] / 1e3 if headline else 0.0,
            "headline_tier": next((t for t in HEADLINE_TIERS if tiers.get(t, {}).get("available")), None),
            "reference_latency_ms": 0.0, "speedup_factor": 0.0,
            "bytes_moved": nbytes, "tiers": tiers,
        }
    return {"definition": dataset.definition.name, "workload": workload.as_json(),
            "solution": variant.label, "evaluation": evaluation}


def _failure_log(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]


def evaluate_solution(variant: Variant, dataset: Dataset, config: RunConfig, references: ReferenceCache,
                      flush=None, on_start: Callable[[Workload], None] | None = None) -> Iterator[dict[str, Any]]:
    """Yield one trace per workload for ``variant``; never raises for the
    solution's fault (see module doc)."""
    reason = skip_reason(variant, dataset, config)
    if reason is None:
        try:
            module = load_module(variant.meta)
        except SolutionUnsupported as exc:
            reason = f"unsupported here: {exc}"
        except Exception as exc:  # import or build failure of the solution
            for workload in dataset.workloads:
                yield make_trace(dataset, workload, variant, Status.COMPILE_ERROR, _failure_log(exc), config)
            return
    for workload in dataset.workloads:
        if reason is not None:
            yield make_trace(dataset, workload, variant, Status.SKIPPED, reason, config)
            continue
        if on_start is not None:
            on_start(workload)
        yield evaluate_workload(module.run, variant, dataset, workload, config, references, flush)


def evaluate_workload(run_fn, variant: Variant, dataset: Dataset, workload: Workload, config: RunConfig,
                      references: ReferenceCache, flush) -> dict[str, Any]:
    """Check, then (if it passed) time, one solution on one workload."""
    tolerance = variant.tolerance_override or config.tolerance
    try:
        check, inputs = check_workload(run_fn, variant, dataset, workload, config, references)
    except Exception as exc:
        return make_trace(dataset, workload, variant, Status.RUNTIME_ERROR, _failure_log(exc), config)
    if check.status != Status.PASSED:
        return make_trace(dataset, workload, variant, check.status, check.message, config, check,
                          tolerance=tolerance)
    try:
        timings = time_workload(run_fn, variant, dataset, workload, inputs, config, flush)
    except Exception as exc:
        return make_trace(dataset, workload, variant, Status.RUNTIME_ERROR, "while timing:\n" + _failure_log(exc),
                          config, check, tolerance=tolerance)
    nbytes = bytes_moved(inputs, STATE_TORCH_DTYPES[variant.state_dtype])
    return make_trace(dataset, workload, variant, Status.PASSED, "", config, check, timings, nbytes,
                      tolerance=tolerance)
