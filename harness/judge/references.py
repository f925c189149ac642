"""Reference outputs, computed and kept on the judge's side only.

The judge (the parent process, which never runs solution code) reads each
workload's stored tensors once, when the run starts, and computes expected
outputs with the definition's reference on the run's device. Workers get the
stored tensors through the channel and never see an expected output; a blob
file changed on disk during the run changes nothing judged in it (the change
is reported as tampering by :mod:`harness.judge.isolation`).

On a GPU the reference of a workload is captured once as a CUDA graph and
replayed for every later trial: the definition's reference loops over
(batch, head) in Python, some 50 000 kernel launches at B = 512, and the judge
needs one reference per correctness trial and per sampled timed call. A replay
runs the same kernels on the same shapes as the eager call, so it is bit-
identical; each capture proves that on its first replay against the eager
outputs it was captured after, and any mismatch or capture error falls back to
the eager reference for that workload (said once in the run's notes).
"""

from __future__ import annotations

from typing import Any

import torch

from harness.data.dataset import Dataset
from harness.data.workloads import Workload, build_inputs, stored_tensors

#: captured graphs keep their inputs, outputs and temporaries on the device; beyond this many
#: bytes of graph inputs the oldest capture is released (B = 512 is about 0.3 GB of inputs)
GRAPH_CACHE_BYTES = 2 << 30


class ReferenceFailed(Exception):
    """The definition's reference raised on a workload: no solution can be judged on it (the run goes
    on with the other workloads; the message names the definition file and the workload)."""


class References:
    """Stored tensors and expected outputs per (workload, trial), in this process's memory."""

    def __init__(self, dataset: Dataset, device: str, notes: list[str] | None = None):
        """``notes`` gets a line for each workload whose reference cannot be replayed as a graph."""
        self.dataset, self.device = dataset, device
        self.notes = notes if notes is not None else []
        # read every stored tensor now, as a copy in memory (safetensors may map the file, and a
        # mapped page would show a later edit of the file): nothing changed on disk reaches this run
        self.stored: dict[str, dict[str, torch.Tensor]] = {
            w.uuid: {name: t.clone() for name, t in stored_tensors(w, dataset.definition, dataset.files).items()}
            for w in dataset.workloads}
        self._checked: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        self._graphs: dict[str, CapturedReference | None] = {}  # None: this workload runs eagerly
        self._failed: dict[str, str] = {}  # workload uuid -> why its reference could not be computed

    def inputs(self, workload: Workload, trial: int) -> dict[str, Any]:
        """The inputs of trial ``trial`` of ``workload`` on the run's device, as a worker builds them."""
        return build_inputs(workload, self.dataset.definition, self.stored[workload.uuid], self.device, trial)

    def compute(self, workload: Workload, trial: int) -> dict[str, torch.Tensor]:
        """Expected outputs of trial ``trial`` (fp32 state math, the definition's reference), on the device.

        Raises:
            ReferenceFailed: the reference raised on this workload, now or for an earlier trial or
                solution (then every solution gets the same answer; the run's notes say it once).
        """
        if workload.uuid in self._failed:
            raise ReferenceFailed(self._failed[workload.uuid])
        inputs = self.inputs(workload, trial)
        graph = self._graphs.get(workload.uuid)
        if graph is not None:
            return graph.replay(inputs)
        try:
            with torch.no_grad():
                returned = self.dataset.definition.run_reference(inputs)
                outputs = {name: t.contiguous() for name, t in returned.items()}
        except Exception as exc:  # the dataset's code, not the solution's: the workload cannot be judged
            why = (f"the reference of {self.dataset.definition.source} raised on workload "
                   f"{workload.uuid} (trial {trial}): {type(exc).__name__}: {str(exc)[:500]}")
            self._failed[workload.uuid] = why
            self.notes.append(f"{why}; no solution is judged on it")
            raise ReferenceFailed(why) from exc
        if workload.uuid not in self._graphs and str(self.device).startswith("cuda"):
            graph, why = capture(self.dataset.definition, inputs, outputs)
            if why:
                self.notes.append(f"the reference of workload {workload.uuid} runs eagerly: {why}")
            self._remember(workload.uuid, graph)
        return outputs

    def expected(self, workload: Workload, trial: int, keep: bool = True) -> dict[str, torch.Tensor]:
        """:meth:`compute`, kept on the host for the correctness trials (every variant
        is checked on the same ones); a sampled timed call's (``keep=False``) is not."""
        key = (workload.uuid, trial)
        if key in self._checked:
            return {n: t.to(self.device) for n, t in self._checked[key].items()}
        outputs = self.compute(workload, trial)
        if keep:
            self._checked[key] = {n: _host_copy(t) for n, t in outputs.items()}
        return outputs

    def _remember(self, uuid: str, graph: CapturedReference | None) -> None:
        """Keep ``uuid``'s capture; release the oldest others (recaptured if they come back) beyond
        :data:`GRAPH_CACHE_BYTES`."""
        self._graphs[uuid] = graph
        older = [u for u, g in self._graphs.items() if g is not None and u != uuid]
        while older and sum(g.nbytes for g in self._graphs.values() if g) > GRAPH_CACHE_BYTES:
            del self._graphs[older.pop(0)]


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A host copy of a device tensor, page-locked where it comes from a GPU: every variant's check
    copies it back (33 MB a trial at B = 64), which from pageable memory goes through the driver's
    staging buffers."""
    if tensor.device.type != "cuda":
        return tensor
    return torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True).copy_(tensor)


class CapturedReference:
    """The definition's reference for one workload's shapes, as a CUDA graph over static inputs."""

    def __init__(self, definition, inputs: dict[str, Any]):
        self.static = {n: t.clone() if isinstance(t, torch.Tensor) else t for n, t in inputs.items()}
        self.nbytes = sum(t.numel() * t.element_size() for t in self.static.values() if isinstance(t, torch.Tensor))
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: the judge's reader threads may touch CUDA while this thread captures
        with torch.no_grad(), torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.outputs = {n: t.contiguous() for n, t in definition.run_reference(self.static).items()}

    def replay(self, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The reference's outputs for ``inputs`` (same shapes and scalars as the captured ones)."""
        for name, tensor in inputs.items():
            if isinstance(tensor, torch.Tensor):
                self.static[name].copy_(tensor)
            elif tensor != self.static[name]:
                raise ValueError(f"input {name}: {tensor!r} differs from the captured {self.static[name]!r}")
        self.graph.replay()
        return {n: t.clone() for n, t in self.outputs.items()}


def capture(definition, inputs: dict[str, Any],
            eager: dict[str, torch.Tensor]) -> tuple[CapturedReference | None, str | None]:
    """A :class:`CapturedReference` of ``definition`` whose replay of ``inputs`` reproduces
    ``eager`` (the eager outputs of the same inputs) bit for bit, or (None, why not): then the
    caller keeps running the reference eagerly."""
    try:
        graph = CapturedReference(definition, inputs)
        replayed = graph.replay(inputs)
    except Exception as exc:  # a reference that syncs with the host, or uses an op graphs cannot hold
        return None, f"capturing it as a CUDA graph failed ({type(exc).__name__}: {exc})"
    if replayed.keys() != eager.keys() or not all(same_bits(replayed[n], eager[n]) for n in eager):
        return None, "its CUDA graph replay differs from the eager call"
    return graph, None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (NaN payloads included) in the same shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
