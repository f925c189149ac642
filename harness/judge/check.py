"""Correctness as flashinfer-bench judges it.

An element fails when ``|x - y| > atol`` **and** ``|x - y| / (|y| + 1e-8) > rtol``
(flashinfer-bench's default evaluator; atol = rtol = 1e-2 by default). Any NaN
or inf in a solution's output is a failure; a NaN or inf in the *expected*
output is an error of the reference, never a pass. ``Status`` is the trace's
:class:`~harness.records.trace.EvaluationStatus` (flashinfer-bench's values
plus SKIPPED): a verdict and the trace that records it share one enum.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from harness.facts import Tolerance
from harness.records.trace import EvaluationStatus as Status

REL_EPS = 1e-8


@dataclass
class TensorErrors:
    """Error statistics of one output tensor against the reference."""

    max_abs: float
    max_rel: float
    rel_l2: float  # ||x - y||_2 / ||y||_2
    failed: int  # elements outside tolerance (non-finite ones included)
    nonfinite: int
    numel: int

    def worst(self, other: "TensorErrors | None") -> "TensorErrors":
        """Element-wise worst of two trials' statistics."""
        if other is None:
            return self
        return TensorErrors(max(self.max_abs, other.max_abs), max(self.max_rel, other.max_rel),
                            max(self.rel_l2, other.rel_l2), max(self.failed, other.failed),
                            max(self.nonfinite, other.nonfinite), self.numel)


@dataclass
class CheckResult:
    """Status of one checked call, with per-output errors and a message."""

    status: Status
    errors: dict[str, TensorErrors]
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {name: asdict(e) for name, e in self.errors.items()}


def out_of_tolerance(x: torch.Tensor, y: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Where ``x`` (float64, actual) fails against ``y`` (float64, expected): non-finite, or
    ``|x - y| > atol`` and ``|x - y| / (|y| + 1e-8) > rtol`` (the module doc's rule); a bool tensor."""
    diff = (x - y).abs()
    return ~torch.isfinite(x) | ((diff > tol.atol) & (diff / (y.abs() + REL_EPS) > tol.rtol))


def tensor_errors(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> TensorErrors:
    """Compare two same-shape tensors in float64.

    Returns max absolute error, max relative error ``|x-y|/(|y|+1e-8)``,
    relative L2 error and the count of elements failing the tolerance rule.
    Non-finite elements of ``actual`` count as failures and make the maxima inf.
    """
    x, y = actual.detach().double(), expected.detach().double()
    diff = (x - y).abs()
    rel = diff / (y.abs() + REL_EPS)
    finite = torch.isfinite(x)
    fails = out_of_tolerance(x, y, tol)
    nonfinite = int((~finite).sum())
    failed = int(fails.sum())
    if nonfinite:
        return TensorErrors(math.inf, math.inf, math.inf, failed, nonfinite, x.numel())
    if x.numel() == 0:
        return TensorErrors(0.0, 0.0, 0.0, 0, 0, 0)
    rel_l2 = float(torch.linalg.vector_norm(x - y)) / max(float(torch.linalg.vector_norm(y)), REL_EPS)
    return TensorErrors(float(diff.max()), float(rel.max()), rel_l2, failed, 0, x.numel())


def check_outputs(returned: Any, destinations: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                  tol: Tolerance, dtypes: dict[str, torch.dtype] | None = None) -> CheckResult:
    """Judge one DPS call.

    Args:
        returned: what ``run`` returned; must be a dict holding every output.
        destinations: the buffers handed to ``run`` (poisoned with NaN before
            the call), which ``run`` must have written.
        expected: reference outputs; their shapes and dtypes are the contract.
        tol: tolerance for the numerical comparison.
        dtypes: dtype each output must have where it differs from the
            reference's (a solution run with a bf16 state returns a bf16
            ``new_state``, still compared with the fp32 reference values).

    Returns:
        The first failing status in the order shape, dtype, numerical, else PASSED;
        RUNTIME_ERROR naming the reference when an expected value is not finite (a NaN
        expected value would otherwise let every output pass).
    """
    if not isinstance(returned, dict) or set(expected) - set(returned):
        got = sorted(returned) if isinstance(returned, dict) else type(returned).__name__
        return CheckResult(Status.INCORRECT_SHAPE, {}, f"run must return a dict with {sorted(expected)}, got {got}")
    for name, ref in expected.items():
        out = returned[name]
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(ref.shape):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            return CheckResult(Status.INCORRECT_SHAPE, {}, f"{name}: shape {shape}, expected {tuple(ref.shape)}")
        want = (dtypes or {}).get(name, ref.dtype)
        if out.dtype != want:
            return CheckResult(Status.INCORRECT_DTYPE, {}, f"{name}: dtype {out.dtype}, expected {want}")
    broken = {name: int((~torch.isfinite(ref)).sum()) for name, ref in expected.items()}
    broken = {name: count for name, count in broken.items() if count}
    if broken:  # NaN compares false with everything: without this, any output would be "within tolerance"
        return CheckResult(Status.RUNTIME_ERROR, {}, "the reference is not finite ("
                           + ", ".join(f"{n}: {c} non-finite values" for n, c in broken.items())
                           + "): this workload's inputs cannot be judged (an error of the reference or of its "
                             "inputs, not of the solution)")
    errors, failures = {}, []
    for name, ref in expected.items():
        candidates = [destinations[name]]
        if returned[name] is not destinations[name]:
            candidates.append(returned[name])  # both must be right: the buffer and what was returned
        stats = None
        for tensor in candidates:
            stats = tensor_errors(tensor, ref.to(tensor.device), tol).worst(stats)
        errors[name] = stats
        if stats.failed:
            failures.append(f"{name}: {stats.failed}/{stats.numel} elements out of tolerance "
                            f"({stats.nonfinite} non-finite), max abs {stats.max_abs:.3g}, max rel {stats.max_rel:.3g}")
    if failures:
        return CheckResult(Status.INCORRECT_NUMERICAL, errors, "; ".join(failures))
    return CheckResult(Status.PASSED, errors)
