"""CPU tests of the FlashInfer solutions (fi-baseline, fi-bf16state).

FlashInfer itself needs a GPU, so a fake ``flashinfer`` package is injected
into ``sys.modules``: it records how the solutions call
``gated_delta_rule_decode_pretranspose`` (the in-place state buffer, the
output destination, no copies of any input, ``use_qk_l2norm=False``, the
resolved scale, the generic backend) and mimics the in-place update.
"""

from __future__ import annotations

import inspect
import math
import sys
import types

import pytest
import torch

from harness.paths import SOLUTIONS_DIR
from harness.judge.solutions import load_meta
from support.solution_copies import forget

B, H, HV, K, V = 2, 4, 8, 128, 128


def fake_api(calls: list, with_backend: bool = True):
    """A stand-in for the real function with its 0.7.2 signature (optionally
    without ``backend``, as older releases); records each call's arguments."""

    def gated_delta_rule_decode_pretranspose(q, k, v, state, A_log, a, dt_bias, b, scale=None, output=None,
                                             use_qk_l2norm=True, initial_state=None, initial_state_indices=None,
                                             output_state_indices=None, intermediate_states_buffer=None,
                                             disable_state_update=False, backend="auto"):
        calls.append(dict(q=q, k=k, v=v, state=state, A_log=A_log, a=a, dt_bias=dt_bias, b=b, scale=scale,
                          output=output, use_qk_l2norm=use_qk_l2norm, initial_state=initial_state,
                          initial_state_indices=initial_state_indices, backend=backend))
        target = state if state is not None else initial_state
        target.mul_(0.5)  # "update" in place
        output.fill_(1.0)
        return output, target

    if not with_backend:
        original = gated_delta_rule_decode_pretranspose

        def gated_delta_rule_decode_pretranspose(q, k, v, state, A_log, a, dt_bias, b, scale=None, output=None,
                                                 use_qk_l2norm=True, initial_state=None,
                                                 initial_state_indices=None):
            return original(q, k, v, state, A_log, a, dt_bias, b, scale, output, use_qk_l2norm, initial_state,
                            initial_state_indices)
    return gated_delta_rule_decode_pretranspose


@pytest.fixture
def load_solution(monkeypatch, tmp_path):
    """Load a solution module with the harness's loader (a copy of its folder,
    imported as a package) against the fake flashinfer; returns (module, calls)."""
    from harness.judge.solutions import load_solution as harness_load

    def load(name: str, with_backend: bool = True):
        calls: list = []
        package = types.ModuleType("flashinfer")
        submodule = types.ModuleType("flashinfer.gdn_decode")
        submodule.gated_delta_rule_decode_pretranspose = fake_api(calls, with_backend)
        package.gdn_decode = submodule
        monkeypatch.setitem(sys.modules, "flashinfer", package)
        monkeypatch.setitem(sys.modules, "flashinfer.gdn_decode", submodule)
        module = harness_load(load_meta(SOLUTIONS_DIR / name), workdir=tmp_path)
        forget(module)  # the next load imports afresh, against its own fake
        return module, calls

    return load


def inplace_inputs(state_dtype=torch.float32, scale=0.0) -> dict:
    """Inputs as the harness builds them for ``inplace_state = true``."""
    gen = torch.Generator().manual_seed(0)
    state = torch.randn(B, HV, V, K, generator=gen).to(state_dtype)
    return {
        "q": torch.randn(B, 1, H, K, generator=gen).bfloat16(), "k": torch.randn(B, 1, H, K, generator=gen).bfloat16(),
        "v": torch.randn(B, 1, HV, V, generator=gen).bfloat16(), "state": state,
        "A_log": torch.zeros(HV), "a": torch.zeros(B, 1, HV, dtype=torch.bfloat16), "dt_bias": torch.zeros(HV),
        "b": torch.zeros(B, 1, HV, dtype=torch.bfloat16), "scale": scale,
        "output": torch.full((B, 1, HV, V), float("nan"), dtype=torch.bfloat16), "new_state": state,
    }


@pytest.mark.parametrize("name, dtypes", [("fi-baseline", ("float32",)), ("fi-bf16state", ("bfloat16",))])
def test_metadata(name, dtypes):
    meta = load_meta(SOLUTIONS_DIR / name)
    assert meta.inplace_state and meta.gpu_only
    assert meta.state_dtypes == dtypes
    assert set(meta.packages) == {"torch", "flashinfer"}


def _assert_passed_through(call: dict, inputs: dict) -> None:
    """Every input reached FlashInfer as the very same tensor object (no copy, no cast)."""
    for key in ("q", "k", "v", "A_log", "a", "dt_bias", "b", "output"):
        assert call[key] is inputs[key], key
    assert call["use_qk_l2norm"] is False


def test_fi_baseline_calls_kernel_in_place(load_solution):
    module, calls = load_solution("fi-baseline")
    inputs = inplace_inputs()
    before = inputs["new_state"].clone()
    result = module.run(inputs)
    (call,) = calls
    _assert_passed_through(call, inputs)
    assert call["state"] is inputs["new_state"] and call["initial_state"] is None
    assert call["scale"] == pytest.approx(1 / math.sqrt(K))  # 0 means the default
    assert call["backend"] == "flashinfer"
    assert result["output"] is inputs["output"] and result["new_state"] is inputs["new_state"]
    assert torch.equal(inputs["new_state"], before * 0.5)  # updated in the harness's buffer


def test_fi_baseline_passes_explicit_scale(load_solution):
    module, calls = load_solution("fi-baseline")
    module.run(inplace_inputs(scale=0.25))
    assert calls[0]["scale"] == 0.25


def test_fi_baseline_without_backend_parameter(load_solution):
    """Older FlashInfer without ``backend``: the solution must not pass it."""
    module, calls = load_solution("fi-baseline", with_backend=False)
    module.run(inplace_inputs())
    assert calls[0]["backend"] == "auto"


def test_fi_baseline_rejects_out_of_place(load_solution):
    module, _ = load_solution("fi-baseline")
    inputs = inplace_inputs()
    inputs["new_state"] = torch.empty_like(inputs["state"])
    with pytest.raises(ValueError, match="in place"):
        module.run(inputs)


def test_fi_bf16state_uses_pool_with_cached_indices(load_solution):
    module, calls = load_solution("fi-bf16state")
    inputs = inplace_inputs(torch.bfloat16)
    module.run(inputs)
    module.run(inputs)
    first, second = calls
    _assert_passed_through(first, inputs)
    assert first["state"] is None and first["initial_state"] is inputs["new_state"]
    indices = first["initial_state_indices"]
    assert indices.dtype == torch.int32 and indices.tolist() == list(range(B))
    assert second["initial_state_indices"] is indices  # made once, not per call
    assert first["backend"] == "flashinfer"


def test_fi_bf16state_rejects_fp32_state(load_solution):
    module, _ = load_solution("fi-bf16state")
    with pytest.raises(ValueError, match="bf16"):
        module.run(inplace_inputs(torch.float32))


def test_fake_matches_real_signature_names():
    """The fake's parameters are the real API's (FlashInfer 0.7.2.post1) used here."""
    params = inspect.signature(fake_api([])).parameters
    for name in ("scale", "output", "use_qk_l2norm", "initial_state", "initial_state_indices", "backend"):
        assert name in params
