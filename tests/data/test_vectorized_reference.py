"""The vectorized reference (pt-compiled's, through tools.vectorized), our definition's loop reference and
the contest's official one agree."""

import math

import pytest
import torch

from conftest import OFFICIAL_DEFINITION, SHARED_OFFICIAL_DEFINITION
from tools import vectorized as reference
from harness.data.definition import load_definition


def random_inputs(batch, seed=0, scale=None):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)
    return {
        "q": r(batch, 1, 4, 128).bfloat16(), "k": r(batch, 1, 4, 128).bfloat16(),
        "v": r(batch, 1, 8, 128).bfloat16(), "state": r(batch, 8, 128, 128) * 0.3,
        "A_log": torch.log(1 + 15 * torch.rand(8, generator=g)), "a": r(batch, 1, 8).bfloat16(),
        "dt_bias": r(8) * 0.5 - 3.0, "b": r(batch, 1, 8).bfloat16(),
        "scale": 1 / math.sqrt(128) if scale is None else scale,
    }


def test_vectorized_equals_loop_reference(our_definition):
    inputs = random_inputs(3)
    loop = our_definition.run_reference(inputs)
    out, state = reference.gdn_decode(**inputs)
    torch.testing.assert_close(state, loop["new_state"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.float(), loop["output"].float(), rtol=1e-2, atol=1e-2)
    assert out.dtype == torch.bfloat16 and state.dtype == torch.float32


def test_matches_the_math_by_hand():
    """One head computed from the formulas in README.md "The math", element by element."""
    inputs = random_inputs(1, seed=3)
    out, state = reference.gdn_decode(**inputs)
    h = 5
    x = inputs["a"][0, 0, h].float() + inputs["dt_bias"][h]
    g = math.exp(-math.exp(inputs["A_log"][h]) * math.log1p(math.exp(x)))
    beta = 1 / (1 + math.exp(-inputs["b"][0, 0, h].float()))
    k, q, v = (inputs[n][0, 0, h // 2 if n != "v" else h].double() for n in ("k", "q", "v"))
    S = g * inputs["state"][0, h].double()
    S = S + torch.outer(beta * (v - S @ k), k)
    torch.testing.assert_close(state[0, h].double(), S, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[0, 0, h].double(), (inputs["scale"] * S @ q).bfloat16().double())


def test_scale_zero_or_none_means_default(our_definition):
    default = random_inputs(2, seed=1)
    expected = our_definition.run_reference(default)["output"]
    for scale in (0.0, None):
        got = our_definition.run_reference(dict(default, scale=scale))["output"]
        assert torch.equal(got, expected)
        assert torch.equal(reference.gdn_decode(**dict(default, scale=scale))[0], expected)


@pytest.mark.skipif(not SHARED_OFFICIAL_DEFINITION.exists(), reason=f"no original at {SHARED_OFFICIAL_DEFINITION}")
def test_official_definition_copy_is_the_original():
    assert OFFICIAL_DEFINITION.read_bytes() == SHARED_OFFICIAL_DEFINITION.read_bytes()


@pytest.mark.parametrize("seed,scale", [(0, None), (1, 0.0), (2, 0.05)])
def test_our_reference_equals_official(our_definition, seed, scale):
    official = load_definition(OFFICIAL_DEFINITION)
    assert official.inputs.keys() == our_definition.inputs.keys()
    assert official.outputs.keys() == our_definition.outputs.keys()
    inputs = random_inputs(2, seed=seed, scale=scale)
    ours, theirs = our_definition.run_reference(inputs), official.run_reference(inputs)
    torch.testing.assert_close(ours["new_state"], theirs["new_state"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours["output"].float(), theirs["output"].float(), rtol=1e-2, atol=1e-2)
