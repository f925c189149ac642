"""The flashinfer-bench Definition schema: loading, validation and the reference.

A definition is a JSON file with ``name``, ``op_type``, ``axes`` (each ``const``
with an integer ``value`` or ``var``), ``inputs``/``outputs`` (shape = list of
axis names, or null for a scalar; ``dtype``) and ``reference``: Python source
with a top-level ``run`` taking the inputs in order and returning the outputs.
Field names follow flashinfer-bench's ``flashinfer_bench.data.Definition``.
"""

from __future__ import annotations

import ast
import json
import types
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from harness.errors import HarnessInputError

#: Definition dtype names (flashinfer-bench ``DType``) mapped to torch dtypes.
TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: ``shape`` is a tuple of axis names (None for a scalar)."""

    name: str
    shape: tuple[str, ...] | None
    dtype: str
    optional: bool = False

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]


@dataclass(frozen=True)
class Definition:
    """A parsed definition; build one with :func:`load_definition`."""

    name: str
    op_type: str
    axes: dict[str, int | None]  # const axes map to their value, var axes to None
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    source: str
    description: str = ""
    tags: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def var_axes(self) -> list[str]:
        return [n for n, v in self.axes.items() if v is None]

    def resolve_axes(self, workload_axes: dict[str, int], where: str = "workload") -> dict[str, int]:
        """Combine const axes with a workload's values for the var axes.

        Raises:
            HarnessInputError: a var axis is missing, or a value is not a
                non-negative integer, or names an axis the definition lacks.
        """
        resolved = {}
        for name, const in self.axes.items():
            if const is not None:
                resolved[name] = const
                continue
            if name not in workload_axes:
                raise HarnessInputError(where, f"axes.{name}", f"missing value for var axis '{name}'")
            value = workload_axes[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise HarnessInputError(where, f"axes.{name}", f"must be a non-negative integer, got {value!r}")
            resolved[name] = value
        unknown = set(workload_axes) - set(self.axes)
        if unknown:
            raise HarnessInputError(where, "axes", f"unknown axes {sorted(unknown)} for definition {self.name}")
        return resolved

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...]:
        """Concrete shape of ``spec`` under resolved ``axes`` (empty for a scalar)."""
        return tuple(axes[a] for a in spec.shape) if spec.shape is not None else ()

    @cached_property
    def reference_run(self):
        """The reference's ``run`` callable, from executing its source once."""
        module = types.ModuleType(f"reference_{self.name}")
        module.__file__ = f"<reference of {self.source}>"
        exec(compile(self.reference, module.__file__, "exec"), module.__dict__)
        return module.run

    def run_reference(self, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Call the reference with the definition's inputs, in order.

        Returns:
            The outputs as a dict keyed by output name (the reference may
            return a tensor, a tuple in output order, or a dict).
        """
        result = self.reference_run(*[inputs.get(name) for name in self.inputs])
        return outputs_as_dict(self, result)


def outputs_as_dict(definition: Definition, result) -> dict[str, Any]:
    """Normalize what a ``run`` returned to ``{output name: tensor}``.

    Raises:
        TypeError: ``result`` is not a tensor, tuple/list or dict of the
            definition's outputs.
    """
    names = list(definition.outputs)
    if isinstance(result, dict):
        return result
    if isinstance(result, torch.Tensor):
        result = (result,)
    if isinstance(result, (tuple, list)) and len(result) == len(names):
        return dict(zip(names, result))
    raise TypeError(f"run returned {type(result).__name__}; expected a dict or tuple of {names}")


def _require(data: dict, key: str, kind, path, prefix: str = ""):
    if key not in data:
        raise HarnessInputError(path, prefix + key, "is required")
    value = data[key]
    if not isinstance(value, kind):
        raise HarnessInputError(path, prefix + key, f"must be {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def _parse_axes(data: dict, path) -> dict[str, int | None]:
    axes = {}
    for name, spec in _require(data, "axes", dict, path).items():
        where = f"axes.{name}"
        if not isinstance(spec, dict):
            raise HarnessInputError(path, where, "must be an object with 'type'")
        kind = spec.get("type")
        if kind == "const":
            value = spec.get("value")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise HarnessInputError(path, where + ".value", f"const axis needs a non-negative integer, got {value!r}")
            axes[name] = value
        elif kind == "var":
            axes[name] = None
        else:
            raise HarnessInputError(path, where + ".type", f"must be 'const' or 'var', got {kind!r}")
    return axes


def _parse_tensors(data: dict, key: str, axes: dict, path) -> dict[str, TensorSpec]:
    specs = {}
    for name, spec in _require(data, key, dict, path).items():
        where = f"{key}.{name}"
        if not isinstance(spec, dict):
            raise HarnessInputError(path, where, "must be an object with 'shape' and 'dtype'")
        if "shape" not in spec:
            raise HarnessInputError(path, where + ".shape", "is required (a list of axis names, or null for a scalar)")
        shape = spec["shape"]
        if shape is not None:
            if not isinstance(shape, list) or not all(isinstance(a, str) for a in shape):
                raise HarnessInputError(path, where + ".shape", f"must be a list of axis names or null, got {shape!r}")
            missing = [a for a in shape if a not in axes]
            if missing:
                raise HarnessInputError(path, where + ".shape", f"names undefined axes {missing}")
            shape = tuple(shape)
        dtype = spec.get("dtype")
        if dtype not in TORCH_DTYPES:
            raise HarnessInputError(path, where + ".dtype", f"unknown dtype {dtype!r}; expected one of {sorted(TORCH_DTYPES)}")
        optional = spec.get("optional", False)
        if not isinstance(optional, bool):  # "no" would read as true
            raise HarnessInputError(path, where + ".optional", f"must be true or false, got {optional!r}")
        specs[name] = TensorSpec(name, shape, dtype, optional)
    return specs


def _check_reference(source: str, path) -> None:
    try:
        tree = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        raise HarnessInputError(path, "reference", f"is not valid Python: {exc}") from exc
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
        raise HarnessInputError(path, "reference", "must define a top-level function 'run'")


def parse_definition(data: Any, path) -> Definition:
    """Validate a decoded definition JSON object; see :func:`load_definition`."""
    if not isinstance(data, dict):
        raise HarnessInputError(path, None, "a definition must be a JSON object")
    name = _require(data, "name", str, path)
    op_type = _require(data, "op_type", str, path)
    axes = _parse_axes(data, path)
    inputs = _parse_tensors(data, "inputs", axes, path)
    outputs = _parse_tensors(data, "outputs", axes, path)
    overlap = set(inputs) & set(outputs)
    if overlap:
        raise HarnessInputError(path, "outputs", f"names {sorted(overlap)} are also inputs")
    reference = _require(data, "reference", str, path)
    _check_reference(reference, path)
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise HarnessInputError(path, "tags", f"must be a list of strings, got {tags!r}")
    return Definition(
        name=name, op_type=op_type, axes=axes, inputs=inputs, outputs=outputs,
        reference=reference, source=str(path), description=data.get("description", ""),
        tags=tuple(tags), raw=data,
    )


def load_definition(path: str | Path) -> Definition:
    """Load and validate a definition file in flashinfer-bench's schema.

    Raises:
        HarnessInputError: the file is missing, is not JSON, or a field is
            missing or malformed (the message names the file and field).
    """
    path = Path(path)
    try:
        data = json.loads(read_input_text(path))
    except json.JSONDecodeError as exc:
        raise HarnessInputError(path, None, f"not valid JSON: {exc}") from exc
    return parse_definition(data, path)


def read_input_text(path: Path) -> str:
    """The text of an input file (a definition, a workload file).

    Raises:
        HarnessInputError: naming ``path``: missing, a folder, unreadable, or not UTF-8 text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise HarnessInputError(path, None, "file not found") from exc
    except IsADirectoryError as exc:
        raise HarnessInputError(path, None, "is a folder, not a file") from exc
    except UnicodeDecodeError as exc:
        raise HarnessInputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot be read ({exc.strerror or exc})") from exc
