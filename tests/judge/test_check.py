"""The checker fails what is wrong, passes what is right, and the run goes on."""

import math

import pytest
import torch

from conftest import FIXTURE_SOLUTIONS
from harness.facts import Tolerance
from harness.judge.check import Status, check_outputs, tensor_errors
from harness.judge.run import RunConfig, run_benchmark
from harness.judge.timing import TimingConfig


def test_tolerance_rule_needs_both_bounds_exceeded():
    tol = Tolerance(1e-2, 1e-2)
    y = torch.tensor([100.0, 0.001, 1.0, 1.0])
    x = torch.tensor([100.5, 0.0105, 1.009, 1.02])  # rel ok | abs ok | both ok | both exceeded
    err = tensor_errors(x, y, tol)
    assert err.failed == 1 and err.nonfinite == 0
    assert err.max_abs == pytest.approx(0.5) and err.max_rel == pytest.approx(9.5, rel=1e-4)
    assert err.rel_l2 == pytest.approx(float(torch.linalg.vector_norm(x - y) / torch.linalg.vector_norm(y)))


def test_nan_and_inf_fail():
    y = torch.ones(4)
    for bad in (float("nan"), float("inf")):
        x = torch.ones(4)
        x[2] = bad
        err = tensor_errors(x, y, Tolerance())
        assert err.failed == 1 and err.nonfinite == 1 and math.isinf(err.max_abs)


def test_check_outputs_statuses():
    ref = {"output": torch.zeros(2, 3, dtype=torch.bfloat16), "new_state": torch.ones(2, 4)}
    dests = {k: v.clone() for k, v in ref.items()}
    assert check_outputs(dests, dests, ref, Tolerance()).status == Status.PASSED
    assert check_outputs(None, dests, ref, Tolerance()).status == Status.INCORRECT_SHAPE
    assert check_outputs({"output": dests["output"]}, dests, ref, Tolerance()).status == Status.INCORRECT_SHAPE
    wrong = dict(dests, new_state=dests["new_state"].double())
    assert check_outputs(wrong, dests, ref, Tolerance()).status == Status.INCORRECT_DTYPE
    bf16 = dict(dests, new_state=dests["new_state"].bfloat16())
    assert check_outputs(bf16, bf16, ref, Tolerance(), dtypes={"new_state": torch.bfloat16}).status == Status.PASSED



@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_expected_value_is_an_error_of_the_reference_not_a_pass(bad):
    """A poisoned stored state makes the reference NaN, and NaN compares false with everything:
    zeros, or anything, would be "within tolerance" of it."""
    ref = {"output": torch.zeros(2, 3, dtype=torch.bfloat16), "new_state": torch.ones(2, 4)}
    ref["new_state"][1, 2] = bad
    zeros = {k: torch.zeros_like(v) for k, v in ref.items()}
    result = check_outputs(zeros, zeros, ref, Tolerance())
    assert result.status == Status.RUNTIME_ERROR
    assert "reference" in result.message and "new_state: 1 non-finite" in result.message

EXPECTED = {
    "good": Status.PASSED,
    "inside-tol": Status.PASSED,
    "skips-state": Status.INCORRECT_NUMERICAL,
    "returns-new": Status.INCORRECT_NUMERICAL,  # DPS: the destinations are read, never what run returns
    "writes-nan": Status.INCORRECT_NUMERICAL,
    "outside-tol": Status.INCORRECT_NUMERICAL,
    # the judge calls the positional DPS entry and reads the destinations, as the contest does: what
    # run returns is not looked at, so a wrong return is no verdict of its own (docs/solutions.md)
    "wrong-shape": Status.PASSED,  # right destinations, a mis-shaped view returned
    "wrong-dtype": Status.INCORRECT_NUMERICAL,  # its output went only into a returned float32 tensor
    "raises": Status.RUNTIME_ERROR,
    "bad-import": Status.COMPILE_ERROR,
    "missing-package": Status.SKIPPED,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from conftest import write_small_dataset

    root = tmp_path_factory.mktemp("check")
    config = RunConfig(device="cpu", tiers=("wallclock",), trials=2,
                       timing=TimingConfig(warmup=1, iters=10, budget_s=0.3, warm_s=0.0))
    return run_benchmark(",".join(EXPECTED), str(write_small_dataset(root / "d")), config, root / "results",
                         progress=False, solutions_root=FIXTURE_SOLUTIONS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_fixture_solution_status(run, name):
    traces = [t for t in run.traces if t.solution == name]
    assert len(traces) == 2
    for trace in traces:
        assert trace.evaluation.status.value == EXPECTED[name].value, trace.evaluation.log
    if EXPECTED[name] == Status.PASSED:
        perf = traces[0].evaluation.performance
        assert perf.headline_tier == "wallclock" and perf.tiers["wallclock"].value_us > 0
        assert traces[0].evaluation.correctness.extra.trials == 2
        assert perf.tiers["wallclock"].verified_calls >= 1  # timed calls were checked too
    if name == "missing-package":
        assert "no_such_package_gdn" in traces[0].evaluation.log
    if name == "returns-new":
        assert "non-finite" in traces[0].evaluation.log  # the destinations it never wrote, still NaN
