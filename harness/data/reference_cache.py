"""Reference outputs, computed once per (workload, trial) and shared.

The parent process computes them before any solution runs and stores them as
safetensors files in the run's scratch folder; each isolated solution process
loads them from there instead of recomputing (the definition's reference is a
per-head Python loop: seconds at large batch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from harness.data.dataset import Dataset
from harness.data.workloads import Workload


class ReferenceCache:
    """Expected outputs keyed by (workload uuid, trial), in memory and on disk."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else None
        self._memory: dict[tuple[str, int], dict[str, torch.Tensor]] = {}

    def _path(self, uuid: str, trial: int) -> Path | None:
        return self.folder / f"{uuid}-{trial}.safetensors" if self.folder else None

    def get(self, dataset: Dataset, workload: Workload, trial: int, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Reference outputs for ``inputs`` (trial ``trial`` of ``workload``),
        on the inputs' device, computed with the dataset's definition if absent."""
        key = (workload.uuid, trial)
        if key in self._memory:
            return self._memory[key]
        device = next(v.device for v in inputs.values() if isinstance(v, torch.Tensor))
        path = self._path(*key)
        if path is not None and path.exists():
            from safetensors.torch import load_file

            outputs = load_file(path, device=str(device))
        else:
            with torch.no_grad():
                outputs = dataset.definition.run_reference(inputs)
            outputs = {k: v.contiguous() for k, v in outputs.items()}
            if path is not None:
                from safetensors.torch import save_file

                path.parent.mkdir(parents=True, exist_ok=True)
                save_file({k: v.cpu() for k, v in outputs.items()}, path)
        if len(self._memory) >= 8:  # keep the latest few; older ones are reloaded from disk
            self._memory.pop(next(iter(self._memory)))
        self._memory[key] = outputs
        return outputs
