"""The judge's references: a CUDA graph replay of the definition's reference is
bit-identical to the eager call, and a reference that cannot be captured runs
eagerly with a note (harness/judge/references.py)."""

from __future__ import annotations

import pytest
import torch

from harness.data.dataset import open_dataset
from harness.judge.references import References, same_bits
from conftest import write_small_dataset

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def test_same_bits_compares_bytes_not_values():
    nan = torch.tensor([float("nan"), 1.0])
    assert same_bits(nan, nan.clone())  # NaN == NaN by bytes, unlike torch.equal
    assert not same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))  # equal values, different bits
    assert not same_bits(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    assert not same_bits(torch.zeros(2), torch.zeros(1, 2))


def test_on_the_cpu_the_reference_runs_eagerly(tmp_path):
    dataset = open_dataset(str(write_small_dataset(tmp_path / "d")), show_progress=False)
    references = References(dataset, "cpu")
    references.compute(dataset.workloads[0], 0)
    assert references._graphs == {} and references.notes == []


def eager(references: References, workload, trial: int) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return references.dataset.definition.run_reference(references.inputs(workload, trial))


@needs_gpu
def test_a_graph_replay_is_bit_identical_to_the_eager_reference(tmp_path):
    dataset = open_dataset(str(write_small_dataset(tmp_path / "d", batch_sizes=(3, 2))), show_progress=False)
    references = References(dataset, "cuda")
    for workload in dataset.workloads:
        for trial in (0, 1, 1005):  # the first call captures; the others replay
            got = references.compute(workload, trial)
            want = eager(references, workload, trial)
            assert all(same_bits(got[n], want[n].contiguous()) for n in want), (workload.uuid, trial)
        assert references._graphs[workload.uuid] is not None
    assert references.notes == []


@needs_gpu
def test_a_reference_that_syncs_with_the_host_runs_eagerly_with_a_note(tmp_path):
    dataset = open_dataset(str(write_small_dataset(tmp_path / "d")), show_progress=False)
    original = dataset.definition.reference_run

    def syncing(*args):
        float(args[0].sum())  # a host sync: not allowed while a CUDA graph captures
        return original(*args)

    dataset.definition.__dict__["reference_run"] = syncing
    references = References(dataset, "cuda")
    workload = dataset.workloads[0]
    first, second = references.compute(workload, 1), references.compute(workload, 1)
    assert references._graphs[workload.uuid] is None
    assert len(references.notes) == 1 and "runs eagerly" in references.notes[0]
    assert all(same_bits(first[n], second[n]) for n in first)
