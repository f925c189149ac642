"""A deterministic fake timer and fla-recurrent's adapter on a tiny search space, for the tuner's
tests and run_modal's (tests/test_tune_driver.py, tests/test_run_modal.py)."""

from __future__ import annotations

import pytest

from harness.paths import SOLUTIONS_DIR
from tools.tune.fla_recurrent import FlaRecurrent, config_name

#: (batch, config) -> fake µs. At B = 2 bv32/w1 is one 32-ns timer step faster than
#: bv16/w1 (a tie for steady_choice, which keeps bv16/w1 at both sizes; the plain argmin flips).
FAKE_US = {(1, "bv16/w1"): 2.08, (1, "bv32/w1"): 2.112, (2, "bv16/w1"): 2.40, (2, "bv32/w1"): 2.368}
OTHER_US = 2.0  # the copy floor and the baselines


class FakeTimer:
    """Deterministic µs by the config a call runs (tagged by :class:`Tagged`); runs nothing."""

    tier = "fake"

    def __call__(self, calls) -> float:
        """By the first call's tag: every call of a config's placement sets carries the same one."""
        return FAKE_US.get(getattr(calls[0], "tag", None), OTHER_US)


class Tagged:
    """A config's call, tagged with (batch, config name) for :class:`FakeTimer`."""

    def __init__(self, tag, call):
        self.tag, self.call = tag, call

    def __call__(self):
        return self.call()


@pytest.fixture
def tiny_fla(monkeypatch, tmp_path):
    """fla-recurrent's adapter with a tiny search space (bv16/w1, bv32/w1 and bv0/w1,
    which raises in the launch) whose calls carry a tag, tables chosen over B = 1 alone, and bv16/w1 in use (the CPU
    has no table: the default model, here of one rung): the interpreter runs a kernel's
    programs one by one, and bv16 has a quarter of the shipped bv4's (this test took 16 s
    with it). Table files go to a copy of the solution folder, returned."""
    pytest.importorskip("triton", reason="triton is not installed")
    from conftest import TRITON_INTERPRETED

    if not TRITON_INTERPRETED:  # the tiny tune checks fla-recurrent's kernel on CPU tensors
        pytest.skip("runs fla-recurrent's kernel on the CPU, under TRITON_INTERPRET=1 (set where no GPU is "
                    "visible; set it to run this on a GPU machine)")
    import shutil

    from tools.tune import protocol, table_files

    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS_DIR / "fla-recurrent", solutions / "fla-recurrent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(protocol, "SOLUTIONS_DIR", solutions)
    full, call, load = FlaRecurrent.configs, FlaRecurrent.call, FlaRecurrent.load

    def configs(self, state_dtype):
        space = full(self, state_dtype)
        return {"bv16/w1": space["bv16/w1"], "bv32/w1": space["bv32/w1"],
                "bv0/w1": self.solution.configs.LaunchConfig(0, 1)}

    def loaded_with_a_small_model(self):
        load(self)
        monkeypatch.setattr(self.solution.configs, "DEFAULT_LADDER", ((0.0, self.solution.configs.LaunchConfig(16, 1)),))

    def tagged(self, config, inputs):
        return Tagged((inputs["q"].shape[0], config_name(config)), call(self, config, inputs))

    # a table is chosen over B = 1 alone here (the real TABLE_BATCHES go up to 512: too big for the interpreter)
    monkeypatch.setattr(table_files, "TABLE_BATCHES", (1,))
    monkeypatch.setattr(FlaRecurrent, "configs", configs)
    monkeypatch.setattr(FlaRecurrent, "call", tagged)
    monkeypatch.setattr(FlaRecurrent, "load", loaded_with_a_small_model)
    return solutions / "fla-recurrent"
