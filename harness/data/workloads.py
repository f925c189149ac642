"""Workloads in flashinfer-bench's JSONL format, and turning them into tensors.

Each line is a workload object ``{"uuid", "axes", "inputs"}`` (or a
flashinfer-bench workload trace ``{"definition", "workload": {...}}``, as the
official dataset stores them). Inputs are ``{"type": "random"}``,
``{"type": "scalar", "value": x}`` or ``{"type": "safetensors", "path": p,
"tensor_key": k}`` with ``p`` relative to the dataset root.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.data.definition import Definition, read_input_text
from harness.errors import HarnessInputError

INPUT_TYPES = ("random", "scalar", "safetensors")


@dataclass(frozen=True)
class InputSpec:
    """How one input of a workload is obtained."""

    kind: str  # one of INPUT_TYPES
    value: Any = None  # scalar inputs
    path: str | None = None  # safetensors inputs, relative to the dataset root
    tensor_key: str | None = None


@dataclass(frozen=True)
class Workload:
    """One workload: concrete axes and how to get every input."""

    uuid: str
    axes: dict[str, int]  # resolved: const and var axes
    inputs: dict[str, InputSpec]
    where: str  # "file:line", for error messages

    @property
    def batch_size(self) -> int:
        return self.axes.get("batch_size", 0)

    def as_json(self) -> dict:
        """The workload object as flashinfer-bench writes it (var axes only)."""
        inputs = {}
        for name, spec in self.inputs.items():
            obj = {"type": spec.kind}
            if spec.kind == "scalar":
                obj["value"] = spec.value
            elif spec.kind == "safetensors":
                obj.update(path=spec.path, tensor_key=spec.tensor_key)
            inputs[name] = obj
        return {"uuid": self.uuid, "axes": {"batch_size": self.batch_size}, "inputs": inputs}


def _parse_input(name: str, obj: Any, where: str) -> InputSpec:
    field = f"inputs.{name}"
    if not isinstance(obj, dict) or obj.get("type") not in INPUT_TYPES:
        raise HarnessInputError(where, field + ".type", f"must be one of {INPUT_TYPES}, got {obj!r}")
    kind = obj["type"]
    if kind == "scalar":
        if "value" not in obj or not isinstance(obj["value"], (int, float, bool)):
            raise HarnessInputError(where, field + ".value", "a scalar input needs a numeric 'value'")
        return InputSpec(kind, value=obj["value"])
    if kind == "safetensors":
        for key in ("path", "tensor_key"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise HarnessInputError(where, f"{field}.{key}", "a safetensors input needs a non-empty string")
        return InputSpec(kind, path=obj["path"], tensor_key=obj["tensor_key"])
    return InputSpec(kind)


def parse_workload(obj: Any, definition: Definition, where: str) -> Workload:
    """Validate one workload object against ``definition``.

    Raises:
        HarnessInputError: naming ``where`` (file:line) and the field at fault.
    """
    if isinstance(obj, dict) and "workload" in obj:  # a flashinfer-bench workload trace
        if obj.get("definition") not in (None, definition.name):
            raise HarnessInputError(where, "definition", f"is {obj.get('definition')!r}, expected {definition.name!r}")
        obj = obj["workload"]
    if not isinstance(obj, dict):
        raise HarnessInputError(where, None, "a workload must be a JSON object")
    uuid = obj.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        raise HarnessInputError(where, "uuid", "must be a non-empty string")
    axes_obj = obj.get("axes")
    if not isinstance(axes_obj, dict):
        raise HarnessInputError(where, "axes", "must be an object mapping var axes to integers")
    axes = definition.resolve_axes(axes_obj, where)
    inputs_obj = obj.get("inputs")
    if not isinstance(inputs_obj, dict):
        raise HarnessInputError(where, "inputs", "must be an object")
    inputs = {}
    for name, spec in definition.inputs.items():
        if name not in inputs_obj:
            if spec.optional:
                continue
            raise HarnessInputError(where, f"inputs.{name}", "is required by the definition")
        inputs[name] = _parse_input(name, inputs_obj[name], where)
        if inputs[name].kind == "scalar" and spec.shape is not None:  # flashinfer-bench would hand the number on
            raise HarnessInputError(where, f"inputs.{name}", f"is a tensor of axes {list(spec.shape)}: "
                                    "a 'scalar' input is only for a scalar (shape null); use 'random' or 'safetensors'")
    unknown = set(inputs_obj) - set(definition.inputs)
    if unknown:
        raise HarnessInputError(where, "inputs", f"unknown inputs {sorted(unknown)}")
    return Workload(uuid, axes, inputs, where)


def load_workloads(path: str | Path, definition: Definition) -> list[Workload]:
    """Read a workload JSONL file (blank lines allowed).

    Raises:
        HarnessInputError: missing file, a file without workloads, a line that is
            not JSON, a malformed workload or a duplicated uuid (message names ``file:line``).
    """
    path = Path(path)
    if not path.exists():
        raise HarnessInputError(path, None, "workload file not found")
    workloads, seen = [], set()
    for lineno, line in enumerate(read_input_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessInputError(where, None, f"not valid JSON: {exc}") from exc
        workload = parse_workload(obj, definition, where)
        if workload.uuid in seen:
            raise HarnessInputError(where, "uuid", f"duplicate uuid {workload.uuid}")
        seen.add(workload.uuid)
        workloads.append(workload)
    if not workloads:
        raise HarnessInputError(path, None, "no workloads: the file is empty or blank (one JSON workload per line)")
    return workloads


def trial_seed(uuid: str, trial: int) -> int:
    """Seed for the ``random`` inputs of one trial: stable across machines."""
    return int.from_bytes(hashlib.sha256(f"{uuid}:{trial}".encode()).digest()[:7], "little")


def random_tensor(shape, dtype: torch.dtype, generator: torch.Generator, device) -> torch.Tensor:
    """Standard-normal tensor in ``dtype`` (flashinfer-bench's ``random`` input)."""
    return torch.randn(shape, dtype=torch.float32, generator=generator, device=device).to(dtype)


class TensorFiles:
    """Opens safetensors files under a dataset root once and checks what they hold."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._open: dict[str, dict[str, torch.Tensor]] = {}

    def get(self, spec: InputSpec, where: str) -> torch.Tensor:
        """The tensor ``spec.tensor_key`` of file ``spec.path``.

        Raises:
            HarnessInputError: the file is missing or unreadable, or lacks the key.
        """
        from safetensors.torch import load_file

        if spec.path not in self._open:
            path = self.root / spec.path
            if not path.exists():
                raise HarnessInputError(path, None, f"tensor file not found (referenced by {where})")
            try:
                self._open[spec.path] = load_file(path)
            except Exception as exc:  # safetensors raises its own error types
                raise HarnessInputError(path, None, f"not a readable safetensors file: {exc}") from exc
        tensors = self._open[spec.path]
        if spec.tensor_key not in tensors:
            raise HarnessInputError(self.root / spec.path, spec.tensor_key,
                                    f"no such tensor (has {sorted(tensors)}; referenced by {where})")
        return tensors[spec.tensor_key]


def stored_tensors(workload: Workload, definition: Definition, files: TensorFiles) -> dict[str, torch.Tensor]:
    """The workload's ``safetensors`` inputs (CPU tensors), checked against the
    definition's shape and dtype.

    Raises:
        HarnessInputError: a stored tensor is missing or has the wrong shape or dtype.
    """
    stored = {}
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name)
        if source is not None and source.kind == "safetensors":
            tensor = files.get(source, workload.where)
            _check_stored(tensor, definition.shape_of(spec, workload.axes), spec, files.root / source.path,
                          source.tensor_key)
            stored[name] = tensor
    return stored


def build_inputs(workload: Workload, definition: Definition, stored: dict[str, torch.Tensor],
                 device: str | torch.device, trial: int = 0) -> dict[str, Any]:
    """The definition's inputs for one draw of ``workload``: ``random`` inputs
    drawn afresh (standard normal, seeded by uuid and ``trial``, so the parent
    and a worker on the same device draw the same bits), stored tensors from
    ``stored`` (see :func:`stored_tensors`) moved to ``device``, scalars as
    Python numbers, an optional input left out as None."""
    generator = torch.Generator(device=device).manual_seed(trial_seed(workload.uuid, trial))
    inputs: dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name)
        if source is None:
            inputs[name] = None
        elif source.kind == "scalar":
            inputs[name] = source.value
        elif source.kind == "random":
            inputs[name] = random_tensor(definition.shape_of(spec, workload.axes), spec.torch_dtype, generator, device)
        else:
            inputs[name] = stored[name].to(device)
    return inputs


def materialize_inputs(workload: Workload, definition: Definition, files: TensorFiles,
                       device: str | torch.device, trial: int = 0) -> dict[str, Any]:
    """Build the definition's inputs for one trial of ``workload`` (see :func:`build_inputs`).

    Raises:
        HarnessInputError: a stored tensor has the wrong shape or dtype.
    """
    return build_inputs(workload, definition, stored_tensors(workload, definition, files), device, trial)


def _check_stored(tensor: torch.Tensor, shape, spec, path, key: str) -> None:
    if tuple(tensor.shape) != tuple(shape):
        raise HarnessInputError(path, key, f"shape {tuple(tensor.shape)} does not match definition input "
                                           f"'{spec.name}' {tuple(shape)}")
    if tensor.dtype != spec.torch_dtype:
        raise HarnessInputError(path, key, f"dtype {tensor.dtype} does not match definition input "
                                           f"'{spec.name}' {spec.dtype}")
