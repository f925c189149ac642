"""Tests of the fla-recurrent Triton kernel and of fla-upstream's manifest.

Without a GPU the kernel runs under the Triton interpreter (slow: a B=1 call
with BV=8 takes about a second), hence the small batch sizes.

NOTE for the lead: the TRITON_INTERPRET default below belongs in
tests/conftest.py (it must be set before any module imports triton, and
Triton reads it when a kernel is decorated, i.e. when kernel.py is loaded).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import tomllib
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton", reason="triton is not installed")

REPO = Path(__file__).resolve().parents[1]
SOLUTION_DIR = REPO / "solutions" / "fla-recurrent"
UPSTREAM_TOML = REPO / "solutions" / "fla-upstream" / "solution.toml"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load(name: str, path: Path):
    """Import a file by path (solution folders have hyphens, are no packages)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def solution():
    """solutions/fla-recurrent/main.py (loads kernel.py and configs.py)."""
    return _load("fla_recurrent_main", SOLUTION_DIR / "main.py")


@pytest.fixture(scope="module")
def tune():
    """tune.py, for its input generator, reference wrapper and checker."""
    return _load("fla_recurrent_tune", SOLUTION_DIR / "tune.py")


def _assert_matches_reference(tune, inputs: dict, result: dict) -> None:
    """Both destinations within atol=rtol=1e-2 of harness.reference.gdn_decode."""
    expected_out, expected_state = tune.reference(inputs)
    assert result["output"] is inputs["output"]
    assert result["new_state"] is inputs["new_state"]
    assert tune.count_mismatches(inputs["output"], expected_out) == 0
    assert tune.count_mismatches(inputs["new_state"], expected_state) == 0


@pytest.mark.parametrize("normalize_qk", [True, False], ids=["l2norm-qk", "raw-qk"])
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_matches_reference(solution, tune, batch, normalize_qk):
    inputs = tune.make_inputs(batch, DEVICE, seed=10 + batch, normalize_qk=normalize_qk, scale=0.3)
    _assert_matches_reference(tune, inputs, solution.run(inputs))


@pytest.mark.parametrize("scale", [0.0, None])
def test_zero_or_none_scale_means_default(solution, tune, scale):
    inputs = tune.make_inputs(1, DEVICE, seed=5, scale=scale)
    solution.run(inputs)
    explicit = tune.make_inputs(1, DEVICE, seed=5, scale=1.0 / math.sqrt(128))
    solution.run(explicit)
    assert torch.equal(inputs["output"], explicit["output"])
    _assert_matches_reference(tune, inputs, {"output": inputs["output"], "new_state": inputs["new_state"]})


def test_extreme_gate_inputs(solution, tune):
    """Both branches of softplus (|x| > 20) and sigmoid saturation."""
    inputs = tune.make_inputs(1, DEVICE, seed=9)
    extremes = torch.tensor([-40.0, -21.0, -5.0, 0.0, 5.0, 21.0, 40.0, 80.0], device=DEVICE)
    inputs["a"] = extremes.view(1, 1, 8).bfloat16()
    inputs["b"] = extremes.flip(0).view(1, 1, 8).bfloat16()
    _assert_matches_reference(tune, inputs, solution.run(inputs))


def test_every_table_config_is_correct(solution, tune):
    """Each distinct config of configs.TABLE, forced at B=1."""
    inputs = tune.make_inputs(1, DEVICE, seed=7)
    expected_out, expected_state = tune.reference(inputs)
    for cfg in sorted(set(solution.configs.TABLE.values())):
        inputs["output"].fill_(float("nan"))
        inputs["new_state"].fill_(float("nan"))
        tune._launch(solution.kernel, inputs, cfg)
        assert tune.count_mismatches(inputs["output"], expected_out) == 0, cfg
        assert tune.count_mismatches(inputs["new_state"], expected_state) == 0, cfg


def test_state_may_alias_new_state(solution, tune):
    """Programs own disjoint tiles, so an in-place update is also correct."""
    inputs = tune.make_inputs(1, DEVICE, seed=3)
    expected_out, expected_state = tune.reference(inputs)
    inputs["new_state"] = inputs["state"]
    solution.run(inputs)
    assert tune.count_mismatches(inputs["output"], expected_out) == 0
    assert tune.count_mismatches(inputs["state"], expected_state) == 0


def test_pick_covers_every_batch(solution):
    configs = solution.configs
    keys = sorted(configs.TABLE)
    assert configs.pick(1) == configs.TABLE[keys[0]]
    assert configs.pick(3) == configs.TABLE[min(k for k in keys if k >= 3)]
    assert configs.pick(10 * keys[-1]) == configs.TABLE[keys[-1]]
    assert all(configs.is_valid(cfg) for cfg in configs.TABLE.values())
    assert not configs.is_valid(configs.LaunchConfig(bv=24, num_warps=1, num_stages=1))


def test_checker_counts_nan_as_mismatch(tune):
    expected = torch.zeros(4)
    actual = torch.tensor([0.0, float("nan"), 0.005, 1.0])
    assert tune.count_mismatches(actual, expected) == 2


def test_tune_smoke(tune, tmp_path):
    """tune.py --smoke end to end: B=1, two configs, 2 iterations."""
    report = tune.main(["--smoke", "--out", str(tmp_path)])
    assert (tmp_path / "fla_recurrent_tune.json").is_file()
    rows = report["results"][0]["configs"]
    assert len(rows) == 2 and all(row["ok"] for row in rows)


def test_fla_upstream_manifest():
    manifest = tomllib.loads(UPSTREAM_TOML.read_text())["solution"]
    assert manifest["name"] == "fla-upstream"
    assert "fla" in manifest["packages"]
    assert manifest["gpu_only"] is True
    assert (UPSTREAM_TOML.parent / manifest["entry"]).is_file()
