"""The core-layout probe (tools/core_layout_probe.py) on the CPU: its ``core`` layout allocates as
gdn_core.c does, its pooled layout packs each set apart and aligned, and every point is timed in every
round; the timing itself needs a GPU."""

import sys
import types

import torch

from harness.data.workloads import load_workloads
from harness.judge import core
from harness.paths import WORKLOADS_DIR
from tools import core_layout_probe as probe


class FakeMemory:
    """Allocations at increasing addresses, each size recorded; a tensor 'at' an address is a clone."""

    def __init__(self):
        self.sizes, self.placed, self.next = [], [], 1 << 20

    def alloc(self, nbytes):
        self.sizes.append(nbytes)
        address, self.next = self.next, self.next + max(1, nbytes)
        return address

    def tensor_at(self, address, like):
        self.placed.append((address, like.numel() * like.element_size()))
        return like.clone()


def test_the_core_order_is_the_cores_inputs_then_its_outputs(our_definition):
    definition = our_definition
    workload = load_workloads(WORKLOADS_DIR / "sweep.jsonl", definition)[0]  # its tensors are not made
    order = probe.core_order(definition, workload)
    tensors = [name for name, spec in definition.inputs.items() if spec.shape is not None]
    assert [name for name, _ in order] == tensors + list(definition.outputs)
    assert {name for name, stored in order if stored} == {"state", "A_log", "dt_bias"}  # the sweep's safetensors


def test_the_core_layout_allocates_the_flush_then_each_tensor_once_per_set_and_a_pristine_copy_of_a_stored_one():
    named = {"x": torch.zeros(4), "y": torch.zeros(2, 8), "scale": 0.5}
    memory = FakeMemory()
    sets = probe.core_sets(memory, named, [("x", True), ("y", False)], count=3, flush_bytes=1000)
    assert memory.sizes == [1000, 16, 16, 16, 16, 64, 64, 64]
    assert len(sets) == 3 and all(s["scale"] == 0.5 and s["y"].shape == (2, 8) for s in sets)


def test_the_pooled_layout_carves_each_set_from_one_allocation_aligned_and_apart():
    named = {"x": torch.zeros(3), "y": torch.zeros(200), "scale": 0.5}
    memory = FakeMemory()
    sets = probe.pooled_sets(memory, named, count=2)
    assert memory.sizes == [3 * core.POOL_ALIGN, 3 * core.POOL_ALIGN]  # 12 bytes -> 512, 800 -> 1024
    bases = [1 << 20, (1 << 20) + 3 * core.POOL_ALIGN]
    assert memory.placed == [(bases[0], 12), (bases[0] + core.POOL_ALIGN, 800),
                             (bases[1], 12), (bases[1] + core.POOL_ALIGN, 800)]
    assert len(sets) == 2 and sets[1]["scale"] == 0.5


def test_every_point_is_timed_in_every_round_with_its_window_mean(monkeypatch):
    import tools.tier_parity as tier_parity

    fi_testing = types.ModuleType("flashinfer.testing")  # FlashInfer's timer, which a CPU machine lacks
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setitem(sys.modules, "flashinfer.testing", fi_testing)

    calls = {"cuda-v4 core": (lambda: None, [()]), "torch copy_ torch": (lambda: None, [()])}
    monkeypatch.setattr(probe, "subject_calls", lambda batch, workdir, memory: calls)
    monkeypatch.setattr(probe, "DriverMemory", lambda: type("M", (), {"close": lambda self: None})())
    monkeypatch.setattr(tier_parity, "warm", lambda fn, args, seconds: None)
    fi_testing.bench_gpu_time_with_cupti = lambda fn, **kw: [0.002, 0.002, 0.004]
    times = probe.measure(1, repeats=2)
    assert set(times) == {"cuda-v4 core", "cuda-v4 core window", "torch copy_ torch", "torch copy_ torch window"}
    assert times["cuda-v4 core"] == [2.0, 2.0] and times["cuda-v4 core window"] == [2.0, 2.0]


def test_the_split_layout_puts_the_tensors_over_its_limit_in_a_second_allocation_of_each_set():
    named = {"q": torch.zeros(4), "state": torch.zeros(300), "b": torch.zeros(2), "scale": 0.5}
    memory = FakeMemory()
    sets = probe.pooled_sets(memory, named, count=2, apart_over=1000)  # state: 1,200 bytes
    assert memory.sizes == [2 * core.POOL_ALIGN, 3 * core.POOL_ALIGN] * 2  # q and b, then state, per set
    first_small, first_large = 1 << 20, (1 << 20) + 2 * core.POOL_ALIGN
    assert memory.placed[:3] == [(first_small, 16), (first_small + core.POOL_ALIGN, 8), (first_large, 1200)]
    assert all(s["state"].shape == (300,) and s["scale"] == 0.5 for s in sets)
    assert probe.pooled_sets(FakeMemory(), named, count=1, apart_over=1 << 20)[0].keys() == named.keys()
