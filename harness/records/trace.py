"""The typed record of a run: one :class:`Trace` per (solution, workload) and
one :class:`FloorMeasurement` per copy measured for a workload's copy floor.

:class:`Trace` and the models under it mirror flashinfer-bench's
``flashinfer_bench/data/trace.py`` field for field (``Trace``, ``Evaluation``,
``EvaluationStatus``, ``Environment``, ``Correctness``, ``Performance``,
``KernelProfile``), so that a ``traces.jsonl`` written here is read by
flashinfer-bench's loader. What this benchmark adds lives in fields that
flashinfer-bench leaves open or does not have, each marked *ours* below:

* ``EvaluationStatus.SKIPPED``: the solution could not run here;
* ``Correctness.extra`` (free-form in flashinfer-bench): :class:`CorrectnessExtra`;
* ``Performance.headline_tier``, ``bytes_moved`` and ``tiers``: one
  :class:`TierFigure` per timing tier (cupti, events, sync, wallclock).

The copy floor (the fastest of several device copies of the state bytes, the
physical limit) is not a solution and not a trace: each copy is a
:class:`FloorMeasurement`, stored in ``floors.jsonl`` next to ``traces.jsonl``
(see :mod:`harness.records.store`; the best of them: :mod:`harness.records.best_floor`).

All latencies named ``*_us`` are in microseconds, ``*_ms`` in milliseconds.
Non-finite floats (an inf error, a NaN) are written to JSON as the strings
``"Infinity"``, ``"-Infinity"`` and ``"NaN"`` (flashinfer-bench's
``ser_json_inf_nan="strings"``) and read back as floats.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from harness.facts import COPY_FLOOR, HEADLINE_TIERS

NonEmptyString = Annotated[str, StringConstraints(min_length=1)]

_STATE_LABEL = re.compile(r"\[(?P<dtype>[A-Za-z0-9_]+)-state\]$")


def label_state_dtype(label: str) -> str:
    """State dtype of a solution label: ``cutedsl-bf16[bfloat16-state]`` ->
    ``bfloat16``; a plain label (the definition's fp32 state) -> ``float32``."""
    match = _STATE_LABEL.search(label)
    return match.group("dtype") if match else "float32"


def label_solution(label: str) -> str:
    """Solution name of a label: ``cutedsl-bf16[bfloat16-state]`` -> ``cutedsl-bf16``."""
    return _STATE_LABEL.sub("", label)


def variant_label(name: str, state_dtype: str) -> str:
    """The label of ``name`` run with ``state_dtype``: the name itself for
    float32, else ``name[<dtype>-state]``."""
    return name if state_dtype == "float32" else f"{name}[{state_dtype}-state]"


def floor_label(state_dtype: str = "float32") -> str:
    """Label of a copy floor in tables and CSV files: ``copy-floor`` for the
    definition's fp32 state, ``copy-floor[<dtype>-state]`` otherwise."""
    return variant_label(COPY_FLOOR, state_dtype)


def is_floor_label(label: str) -> bool:
    """True for ``copy-floor`` and its state-dtype forms."""
    return _STATE_LABEL.sub("", label) == COPY_FLOOR


class Record(BaseModel):
    """Base of every record model: field docstrings become field descriptions,
    unknown keys are rejected, inf/nan go to JSON as strings."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", ser_json_inf_nan="strings")


# ---------------------------------------------------------------- environment


class Environment(Record):
    """Hardware and software the evaluation ran on (flashinfer-bench's ``Environment``)."""

    hardware: NonEmptyString
    """Hardware name, e.g. ``NVIDIA H100 80GB HBM3`` or ``CPU x86_64``."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Library name -> version (torch, triton, cuda, driver, ...)."""
    device: str | None = None
    """*Ours*: the device of the run (``cuda:1``, ``cpu``): with ``run_local.py --gpus``,
    which GPU of the host measured the row (flashinfer-bench ignores the field)."""


class EvaluationStatus(str, Enum):
    """Outcome of evaluating one solution on one workload (flashinfer-bench's
    statuses, plus SKIPPED)."""

    PASSED = "PASSED"
    """Ran, every output within tolerance on every trial, and timed."""
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    """An output had the wrong shape."""
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    """An output was outside tolerance (or non-finite); not timed."""
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    """An output had the wrong dtype."""
    RUNTIME_ERROR = "RUNTIME_ERROR"
    """The solution raised (or its process died) while running or being timed."""
    COMPILE_ERROR = "COMPILE_ERROR"
    """The solution failed to import, build or compile."""
    TIMEOUT = "TIMEOUT"
    """The evaluation did not finish within its time limit."""
    SKIPPED = "SKIPPED"
    """*Ours*: the solution could not run here (e.g. GPU-only on a CPU run, or
    a package it needs is missing), or the workload could not be judged (the
    dataset's reference raised on it); the log says why. Not a failure."""


# ---------------------------------------------------------------- correctness


class TensorErrors(Record):
    """Error statistics of one output tensor against the reference, worst over
    the correctness trials."""

    max_abs: float
    """Largest ``|x - ref|`` over the elements (inf if any element is non-finite)."""
    max_rel: float
    """Largest ``|x - ref| / |ref|`` over the elements (may be inf)."""
    rel_l2: float
    """``||x - ref||_2 / ||ref||_2`` (may be inf)."""
    failed: int
    """Elements outside ``atol + rtol * |ref|``, non-finite ones included."""
    nonfinite: int
    """Elements that are NaN or inf."""
    numel: int
    """Elements in the tensor."""


class CorrectnessExtra(Record):
    """*Ours*: the details behind ``Correctness``'s two maxima."""

    per_output: dict[str, TensorErrors]
    """Output name (``output``, ``new_state``) -> its errors."""
    trials: int
    """Correctness trials run (fresh random inputs each)."""
    atol: float
    """Absolute tolerance applied."""
    rtol: float
    """Relative tolerance applied."""
    state_dtype: str = "float32"
    """Dtype of the recurrent state the solution was run with."""
    timed_calls_verified: int = 0
    """How many of the timed calls' outputs the judge checked against the
    reference (0: only the correctness trials were checked)."""
    rules: str = "strict"
    """The rules a call that changed its inputs was judged by (``contest`` or ``strict``,
    ``harness.facts.Rules``; runs before the option were strict)."""
    inputs_modified: list[str] = Field(default_factory=list)
    """Inputs the solution's calls changed in the correctness trials, accepted under the
    contest's rules (under strict rules such a call is RUNTIME_ERROR)."""


class Correctness(Record):
    """Numerical accuracy against the reference (flashinfer-bench's ``Correctness``)."""

    max_relative_error: float = 0.0
    """Largest relative error over every output element (non-negative, inf or NaN)."""
    max_absolute_error: float = 0.0
    """Largest absolute error over every output element (non-negative, inf or NaN)."""
    extra: CorrectnessExtra | None = None
    """*Ours* (free-form in flashinfer-bench): per-output errors, trials, tolerances."""

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative_or_nan(cls, value: float) -> float:
        if not math.isnan(value) and value < 0:
            raise ValueError("must be non-negative or NaN")
        return value


# ---------------------------------------------------------------- performance


class KernelProfile(Record):
    """CUPTI activity record of one kernel launch (flashinfer-bench's
    ``KernelProfile``; this harness does not fill it)."""

    name: str
    """Kernel function name."""
    duration_ns: int
    """Kernel duration, ns (end - start)."""
    grid: list[int]
    """Grid dimensions [x, y, z]."""
    block: list[int]
    """Block dimensions [x, y, z]."""
    registers_per_thread: int
    """Registers per thread."""
    static_shared_memory: int
    """Static shared memory, bytes."""
    dynamic_shared_memory: int
    """Dynamic shared memory, bytes."""
    shared_memory_executed: int
    """Shared memory executed, bytes."""
    local_memory_per_thread: int
    """Local memory per thread, bytes."""
    local_memory_total: int
    """Total local memory, bytes."""


class TierFigure(Record):
    """*Ours*: what one timing tier measured for one (solution or floor,
    workload). All times in µs, per call.

    The tiers (docs/timing.md): ``cupti`` (kernel time from CUPTI activity
    records), ``events`` (CUDA events around each call), ``sync`` (the
    contest's synchronize-in-loop timer), ``wallclock`` (host timer; the CPU's
    only tier)."""

    tier: str
    """Tier name; equals its key in ``Performance.tiers`` (filled from the key
    when an older file lacks it)."""
    available: bool
    """Whether the tier produced a number here; if not, ``reason`` says why."""
    reason: str | None = None
    """Why the tier is unavailable (None when available)."""
    value_us: float | None = None
    """The tier's headline figure, µs: the median, or for ``sync`` the mean of the trials' means."""
    median_us: float | None = None
    """Median per-call time, µs."""
    p10_us: float | None = None
    """10th percentile per-call time, µs."""
    p90_us: float | None = None
    """90th percentile per-call time, µs."""
    min_us: float | None = None
    """Fastest call, µs."""
    max_us: float | None = None
    """Slowest call, µs."""
    iters: int | None = None
    """Timed calls the figures are over."""
    stop: str | None = None
    """``cupti``/``events``/``wallclock``: why the tier made ``iters`` calls: ``iters`` (all it
    was asked), ``stable`` (fewer: the median met the stop rule), ``budget`` (fewer: a slow
    solution's calls cut by the time budget); see docs/timing.md "When a tier stops"."""
    noise: float | None = None
    """``cupti``/``events``/``wallclock``: half-width of the median's 95% confidence interval
    over the median (a fraction; ``harness.judge.timing.median_noise``)."""
    span_median_us: float | None = None
    """``cupti``: median µs from the first kernel's start to the last kernel's end of a call."""
    kernels_per_call: float | None = None
    """``cupti``: mean number of kernels (and memcpys) per call."""
    kernel_names: list[str] = Field(default_factory=list)
    """``cupti``: names of the kernels seen."""
    trials: int | None = None
    """``sync``/``cupti``: timing trials the figures are over."""
    achieved_gb_per_s: float | None = None
    """``Performance.bytes_moved`` (or the floor's ``nbytes``) / ``value_us``, in GB/s (1e9 bytes)."""
    wall_s: float | None = None
    """Wall-clock seconds of this tier's timed phase, measured by the judge
    outside the solution's process."""
    verified_calls: int = 0
    """Timed calls whose outputs the judge checked against the reference."""
    after_return_us: float | None = None
    """``cupti``: median µs the GPU went on after ``run`` returned (the timing core's CUDA events
    around the call, less its host time). CUPTI must have recorded at least that much work: the
    judge rejects the figure otherwise (docs/judging.md, "The timed call")."""
    retimed_calls: int = 0
    """``cupti``: timed calls whose chunk CUPTI could not time (a record without timestamps), so
    the judge timed the chunk again on fresh calls; none of their samples is in the figure
    (``harness.judge.core_tier.CUPTI_RETIMES``). ``contest``, ``sync``: the calls the judge saw (one a
    trial) of an order of the tier given up because it came back cut yet fast, so the judge ordered it
    again on fresh inputs (``harness.judge.session.CUT_RETIMES``)."""
    timer: str | None = None
    """Which timer made the figure and with what settings, in words: the timing core's loop or an
    in-process timer's, FlashInfer's for ``contest``; the flush, the counts, the statistic
    (``harness.judge.timing.settings.describe_timer``)."""
    host_call_us: float | None = None
    """``events``/``sync``: median host time of one ``run`` call, µs, as the solution's process
    reported it (a diagnostic, never a figure: where it nears the L2 flush's time, the events
    figure holds the host's launch; results/judge-check/20261123-H100-session3)."""
    host_probe_us: float | None = None
    """``sync``: the host CPU's speed beside the tier, µs of a fixed pure-Python stand-in (median
    over the trials of a reading before and after each; ``harness.judge.timing.host_speed``), as
    the solution's process reported it (a diagnostic, never a figure). About 6.5 µs on the GPU
    machines here at full speed, twice that while a vCPU runs slow; a Python launch's sync figure
    moves with it (results/proof/20261127-H100-host-path-6470d35)."""
    trial_means_us: list[float] | None = None
    """``sync``: each trial's mean (µs), in order: the judge's split of the tier's samples
    (``value_us`` is their mean)."""
    trial_medians_us: list[float] | None = None
    """``contest``: each trial's median (µs), in order: the judge's split of the tier's samples
    (``value_us`` is their mean). Each trial times one argument set, as flashinfer-bench main's
    evaluator does, so the trials' spread is how far one placement of the buffers moves the figure
    (docs/timing.md)."""
    host_probe_trials_us: list[float] | None = None
    """``sync``: ``host_probe_us``'s reading of each trial, in order, as the solution's process
    reported it (a diagnostic): beside ``trial_means_us``, it tells which trials ran while the
    host was slow (tools/parity_compare.py compares the sync tier on the others)."""
    copy_floor_us: float | None = None
    """``value_us`` of the copy floor of the same workload, state dtype and
    tier (filled by :func:`harness.records.annotate.annotate` only)."""
    x_copy_floor: float | None = None
    """``value_us / copy_floor_us``: 1.0 is the physical limit (annotation only)."""
    speedup_vs_reference: float | None = None
    """pt-reference's ``value_us`` on the same workload and tier / this
    ``value_us`` (annotation only)."""

    @property
    def timed(self) -> bool:
        """True when the tier produced a positive figure (what a ratio may divide by)."""
        return self.available and self.value_us is not None and self.value_us > 0


class _TierTable(Record):
    """Validation shared by the records that hold a ``tiers`` table (the subclass declares the field)."""

    @model_validator(mode="before")
    @classmethod
    def _fill_tier_names(cls, data: Any) -> Any:
        """Give each tier entry without a ``tier`` field its key (older files lack it)."""
        if isinstance(data, dict) and isinstance(data.get("tiers"), dict):
            tiers = {name: {**entry, "tier": name} if isinstance(entry, dict) and "tier" not in entry else entry
                     for name, entry in data["tiers"].items()}
            data = {**data, "tiers": tiers}
        return data

    @model_validator(mode="after")
    def _tier_keys(self):
        for name, figure in self.tiers.items():
            if figure.tier != name:
                raise ValueError(f"tiers[{name!r}] has tier {figure.tier!r}")
        return self


class Performance(_TierTable):
    """Timing of a PASSED evaluation (flashinfer-bench's ``Performance``)."""

    latency_ms: float = Field(default=0.0, ge=0.0)
    """Latency of the solution, ms: the headline tier's ``value_us`` / 1000."""
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    """pt-reference's latency on the same workload and headline tier, ms (0
    until annotated, or when the run has no reference)."""
    speedup_factor: float = Field(default=0.0, ge=0.0)
    """``reference_latency_ms / latency_ms`` (0 when unknown)."""
    profile: list[KernelProfile] | None = None
    """flashinfer-bench's per-kernel CUPTI profile; not filled here."""
    headline_tier: str | None = None
    """*Ours*: the tier ``latency_ms`` comes from, the first available of
    cupti, events, wallclock, sync."""
    bytes_moved: int = 0
    """*Ours*: the least bytes the kernel must read and write (state read and
    written, inputs read, output written)."""
    tiers: dict[str, TierFigure] = Field(default_factory=dict)
    """*Ours*: tier name -> what it measured."""

    def headline(self) -> TierFigure | None:
        """The headline tier's figure, or None."""
        return self.tiers.get(self.headline_tier) if self.headline_tier else None


# ---------------------------------------------------------------- evaluation


class Evaluation(Record):
    """Outcome of one solution on one workload (flashinfer-bench's ``Evaluation``)."""

    status: EvaluationStatus
    """The outcome."""
    environment: Environment
    """Where it ran."""
    timestamp: NonEmptyString
    """When it was evaluated, ISO 8601 (UTC)."""
    log: str = ""
    """Captured output or failure traceback (tail)."""
    correctness: Correctness | None = None
    """Present for PASSED and INCORRECT_NUMERICAL, absent otherwise."""
    performance: Performance | None = None
    """Present for PASSED only."""

    @model_validator(mode="after")
    def _status_matches_fields(self) -> "Evaluation":
        status = self.status
        if status == EvaluationStatus.PASSED:
            needs_correctness, needs_performance = True, True
        elif status == EvaluationStatus.INCORRECT_NUMERICAL:
            needs_correctness, needs_performance = True, False
        else:
            needs_correctness, needs_performance = False, False
        for name, needed in (("correctness", needs_correctness), ("performance", needs_performance)):
            present = getattr(self, name) is not None
            if needed and not present:
                raise ValueError(f"evaluation must include {name} when status is {status.value}")
            if present and not needed:
                raise ValueError(f"evaluation must not include {name} when status is {status.value}")
        return self


class WorkloadRecord(Record):
    """The workload a trace is about, as flashinfer-bench writes it."""

    uuid: NonEmptyString
    """The workload's id."""
    axes: dict[str, Annotated[int, Field(ge=0)]]
    """Values of the definition's variable axes, e.g. ``{"batch_size": 1}`` (non-negative)."""
    inputs: dict[str, dict[str, Any]]
    """Input name -> how to make it: ``{"type": "random"}``,
    ``{"type": "scalar", "value": ...}`` or ``{"type": "safetensors", "path": ..., "tensor_key": ...}``."""

    @property
    def batch_size(self) -> int | None:
        return self.axes.get("batch_size")


class Trace(Record):
    """One solution on one workload: the workload and the evaluation
    (flashinfer-bench's ``Trace``; here always with a solution and an evaluation)."""

    definition: NonEmptyString
    """Name of the definition, ``gdn_decode_qk4_v8_d128_k_last``."""
    workload: WorkloadRecord
    """The workload evaluated."""
    solution: NonEmptyString
    """Solution label: its name, with ``[<dtype>-state]`` appended for a
    state-dtype variant (e.g. ``cutedsl-bf16[bfloat16-state]``)."""
    evaluation: Evaluation
    """The outcome."""

    def is_successful(self) -> bool:
        """True when the evaluation PASSED."""
        return self.evaluation.status == EvaluationStatus.PASSED

    @property
    def state_dtype(self) -> str:
        """State dtype the solution ran with (from its label)."""
        return label_state_dtype(self.solution)


# ---------------------------------------------------------------- copy floor


class FloorMeasurement(_TierTable):
    """One copy measured for the copy floor of one workload: a device copy of the
    state bytes (one read and one write) by one ``method``, timed by the same tiers
    as the solutions. The floor, the physical limit a decode step cannot beat, is
    the best of the copies that share ``best_of``; not a solution, nothing checked."""

    workload: NonEmptyString
    """uuid of the workload this floor is for."""
    batch_size: int
    """The workload's batch size."""
    measured_on: str | None = None
    """uuid of the workload whose state was copied, when another's: the copies are timed once
    per state shape and dtype and serve every workload of that shape (a copy's time depends
    on the bytes, not their values). None: this workload's own state was copied."""
    state_dtype: str = "float32"
    """Dtype of the state copied."""
    nbytes: int
    """Bytes read plus bytes written by the copy."""
    method: str = "torch copy_"
    """How the copy was made, e.g. ``torch copy_`` or ``triton streaming copy BLOCK=4096 w4``."""
    best_of: str | None = None
    """Id shared by the copies the judge measured together for this workload and state dtype
    (one judge, one device): the floor is the best of them (:mod:`harness.records.best_floor`).
    None in runs stored before the floor was a best-of, whose floors each stand alone."""
    tiers: dict[str, TierFigure] = Field(default_factory=dict)
    """Tier name -> what it measured."""
    environment: Environment
    """Where it ran."""
    timestamp: NonEmptyString
    """When it was measured, ISO 8601 (UTC)."""

    @property
    def label(self) -> str:
        """How the floor is named in tables: ``copy-floor`` (fp32 state) or ``copy-floor[<dtype>-state]``."""
        return floor_label(self.state_dtype)

    def headline_tier(self) -> str | None:
        """The first available tier in ``HEADLINE_TIERS`` order."""
        return next((t for t in HEADLINE_TIERS if t in self.tiers and self.tiers[t].available), None)
