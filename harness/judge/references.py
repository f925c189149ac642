"""Reference outputs, computed and kept on the judge's side only.

The judge (the parent process, which never runs solution code) reads each
workload's stored tensors once, when the run starts, and computes expected
outputs with the definition's reference on the run's device. Workers get the
stored tensors through the channel and never see an expected output; a blob
file changed on disk during the run changes nothing judged in it (the change
is reported as tampering by :mod:`harness.judge.isolation`).
"""

from __future__ import annotations

from typing import Any

import torch

from harness.data.dataset import Dataset
from harness.data.workloads import Workload, build_inputs, stored_tensors


class References:
    """Stored tensors and expected outputs per (workload, trial), in this process's memory."""

    def __init__(self, dataset: Dataset, device: str):
        self.dataset, self.device = dataset, device
        # read every stored tensor now, as a copy in memory (safetensors may map the file, and a
        # mapped page would show a later edit of the file): nothing changed on disk reaches this run
        self.stored: dict[str, dict[str, torch.Tensor]] = {
            w.uuid: {name: t.clone() for name, t in stored_tensors(w, dataset.definition, dataset.files).items()}
            for w in dataset.workloads}
        self._checked: dict[tuple[str, int], dict[str, torch.Tensor]] = {}

    def inputs(self, workload: Workload, trial: int) -> dict[str, Any]:
        """The inputs of trial ``trial`` of ``workload`` on the run's device, as a worker builds them."""
        return build_inputs(workload, self.dataset.definition, self.stored[workload.uuid], self.device, trial)

    def compute(self, workload: Workload, trial: int) -> dict[str, torch.Tensor]:
        """Expected outputs of trial ``trial`` (fp32 state math, the definition's reference), on the device."""
        with torch.no_grad():
            outputs = self.dataset.definition.run_reference(self.inputs(workload, trial))
        return {name: t.contiguous() for name, t in outputs.items()}

    def expected(self, workload: Workload, trial: int, keep: bool = True) -> dict[str, torch.Tensor]:
        """:meth:`compute`, kept on the host for the correctness trials (every variant
        is checked on the same ones); a sampled timed call's (``keep=False``) is not."""
        key = (workload.uuid, trial)
        if key in self._checked:
            return {n: t.to(self.device) for n, t in self._checked[key].items()}
        outputs = self.compute(workload, trial)
        if keep:
            self._checked[key] = {n: t.cpu() for n, t in outputs.items()}
        return outputs
