"""The measuring pieces of the tuner (tools/tune/measure.py; the driver is tests/tools/test_tune_driver.py's)."""

import pytest

from tools.tune.measure import compress_table, fastest_correct, lookup_launch_config, steady_choice


def test_fastest_correct_ignores_wrong_configs():
    results = {"a": {"correct": True, "us": 3.0}, "b": {"correct": False, "us": 1.0},
               "c": {"correct": True, "us": 2.0}, "d": {"correct": False, "error": "no compile"}}
    assert fastest_correct(results) == "c"
    assert fastest_correct({"b": results["b"]}) is None


def test_compress_table_and_lookup_round_trip():
    best = [(1, "x"), (2, "x"), (4, "y"), (8, "y"), (16, "z")]
    table = compress_table(best)
    assert table == [[2, "x"], [8, "y"], [None, "z"]]
    assert [lookup_launch_config(table, b) for b in (1, 2, 3, 8, 9, 10**6)] == ["x", "x", "y", "y", "z", "z"]
    assert lookup_launch_config(((4, "small"),), 100) == "small"  # past the last limit: the last entry
    with pytest.raises(ValueError):
        lookup_launch_config((), 1)


def test_steady_choice_prefers_the_config_that_is_also_fast_at_the_neighbours():
    times = [
        (1, {"a": 2.08, "b": 2.112}),
        (2, {"a": 2.40, "b": 2.368}),   # b is one 32-ns timer step faster: a tie
        (4, {"a": 3.168, "b": 3.30}),
        (8, {"a": 10.0, "b": 9.0}),     # b is 10% faster: a real difference
    ]
    assert steady_choice(times) == [(1, "a"), (2, "a"), (4, "a"), (8, "b")]
    # The plain argmin flips at B = 2:
    assert [min(t, key=t.get) for _, t in times] == ["a", "b", "a", "b"]
    # Without the timer-step tolerance, B = 2 goes to b.
    assert steady_choice(times, abs_tol_us=0.0)[1] == (2, "b")
    with pytest.raises(ValueError, match="B=16"):
        steady_choice([(16, {})])


def test_check_and_time_records_a_failing_variant():
    from tools.tune.measure import check_and_time, random_inputs

    def broken():
        raise RuntimeError("no such kernel")

    row = check_and_time([broken], random_inputs(1, "cpu"), (None, None), timer=lambda calls: 1.0)
    assert row["correct"] is False and "RuntimeError: no such kernel" in row["error"] and "us" not in row


def test_check_call_fails_a_wrong_or_unwritten_output():
    import torch

    from tools.tune.measure import check_call, random_inputs
    from tools.vectorized import reference_outputs

    inputs = random_inputs(1, "cpu")
    expected = reference_outputs(inputs)

    def write(output):
        inputs["output"].copy_(output)
        inputs["new_state"].copy_(expected[1])

    assert check_call(lambda: write(expected[0]), inputs, expected)["correct"]
    wrong = check_call(lambda: write(expected[0] + 1), inputs, expected)
    assert not wrong["correct"] and wrong["mismatches"] == expected[0].numel()
    assert not check_call(lambda: None, inputs, expected)["correct"]  # NaN-poisoned destinations left unwritten
    assert torch.isnan(inputs["output"].float()).all()


def test_load_baseline_hands_an_inplace_solution_a_copy_of_the_state(tmp_path):
    import shutil

    import torch

    from conftest import FIXTURE_SOLUTIONS
    from tools.tune.measure import load_baseline, random_inputs

    folder = tmp_path / "good"
    shutil.copytree(FIXTURE_SOLUTIONS / "good", folder)
    (folder / "solution.toml").write_text((folder / "solution.toml").read_text() + "inplace_state = true\n")
    inputs = random_inputs(1, "cpu")
    original = inputs["state"].clone()
    make_call, reason = load_baseline(folder)
    assert reason is None
    result = make_call(inputs)()
    assert torch.equal(inputs["state"], original)  # the caller's state is untouched
    assert not torch.equal(result["new_state"], original)  # the copy was updated


def test_load_baseline_reports_why_it_cannot_run():
    from conftest import FIXTURE_SOLUTIONS
    from tools.tune.measure import load_baseline

    make_call, reason = load_baseline(FIXTURE_SOLUTIONS / "missing-package")
    assert make_call is None and "no_such_package_gdn" in reason
    make_call, reason = load_baseline(FIXTURE_SOLUTIONS / "good", "bfloat16")
    assert make_call is None and reason == "declares no bfloat16 state"


def test_state_tolerance_is_the_harness_s():
    from harness.facts import DEFAULT_TOLERANCE, STATE_DTYPE_TOLERANCES
    from tools.tune.measure import state_tolerance

    assert state_tolerance("float32") == DEFAULT_TOLERANCE
    assert state_tolerance("bfloat16") == STATE_DTYPE_TOLERANCES["bfloat16"]


def test_reference_outputs_widen_a_bf16_state():
    """The tuners check a bf16-state kernel against the fp32 math on the same (widened) state."""
    import torch

    from tools.tune.measure import random_inputs
    from tools.vectorized import reference_outputs

    inputs = random_inputs(2, "cpu", state_dtype=torch.bfloat16)
    out, state = reference_outputs(inputs)
    widened = reference_outputs(dict(inputs, state=inputs["state"].float()))
    assert state.dtype == torch.float32 and out.dtype == torch.bfloat16
    assert torch.equal(state, widened[1]) and torch.equal(out, widened[0])
