"""Solutions: discovery under ``solutions/``, metadata and loading by path.

The contract is in docs/solutions.md. A solution folder holds
``solution.toml`` and an entry module defining ``run(inputs)``; folder names
may contain hyphens, so modules are loaded from their file path.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from harness.errors import HarnessInputError
from harness.paths import SOLUTIONS_DIR

LANGUAGES = ("python", "triton", "cuda", "cutedsl")
STATE_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class Tolerance:
    """flashinfer-bench's rule: an element fails if both errors exceed their bound."""

    atol: float = 1e-2
    rtol: float = 1e-2


@dataclass(frozen=True)
class SolutionMeta:
    """What ``solution.toml`` says about a solution."""

    name: str
    directory: Path
    definition: str
    language: str
    author: str
    description: str
    entry: str
    packages: tuple[str, ...]
    gpu_only: bool
    inplace_state: bool
    state_dtypes: tuple[str, ...]
    tolerances: dict[str, Tolerance] = field(default_factory=dict)

    @property
    def entry_path(self) -> Path:
        return self.directory / self.entry

    def missing_packages(self) -> list[str]:
        """Packages in ``packages`` that cannot be imported here."""
        return [p for p in self.packages if importlib.util.find_spec(p) is None]


def _field(table: dict, key: str, kind, path: Path, default=None):
    if key not in table:
        if default is None:
            raise HarnessInputError(path, f"solution.{key}", "is required")
        return default
    value = table[key]
    if not isinstance(value, kind):
        raise HarnessInputError(path, f"solution.{key}", f"must be {kind.__name__}, got {type(value).__name__}")
    return value


def _tolerances(data: dict, state_dtypes, path: Path) -> dict[str, Tolerance]:
    result = {}
    for dtype, table in data.get("tolerance", {}).items():
        if dtype not in state_dtypes:
            raise HarnessInputError(path, f"tolerance.{dtype}", f"is not one of state_dtypes {list(state_dtypes)}")
        try:
            result[dtype] = Tolerance(float(table["atol"]), float(table["rtol"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise HarnessInputError(path, f"tolerance.{dtype}", "needs numeric 'atol' and 'rtol'") from exc
    return result


def load_meta(directory: str | Path) -> SolutionMeta:
    """Parse and validate ``<directory>/solution.toml``.

    Raises:
        HarnessInputError: unreadable TOML, or a missing or malformed field.
    """
    directory = Path(directory)
    path = directory / "solution.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise HarnessInputError(path, None, "file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise HarnessInputError(path, None, f"not valid TOML: {exc}") from exc
    table = data.get("solution")
    if not isinstance(table, dict):
        raise HarnessInputError(path, "solution", "a [solution] table is required")
    name = _field(table, "name", str, path)
    if name != directory.name:
        raise HarnessInputError(path, "solution.name", f"is {name!r} but the folder is {directory.name!r}")
    language = _field(table, "language", str, path)
    if language not in LANGUAGES:
        raise HarnessInputError(path, "solution.language", f"must be one of {LANGUAGES}, got {language!r}")
    state_dtypes = tuple(_field(table, "state_dtypes", list, path, ["float32"]))
    bad = [d for d in state_dtypes if d not in STATE_DTYPES]
    if bad or not state_dtypes:
        raise HarnessInputError(path, "solution.state_dtypes", f"must be a non-empty subset of {STATE_DTYPES}")
    entry = _field(table, "entry", str, path)
    if not (directory / entry).is_file():
        raise HarnessInputError(path, "solution.entry", f"file {entry!r} not found in {directory}")
    return SolutionMeta(
        name=name, directory=directory, definition=_field(table, "definition", str, path),
        language=language, author=_field(table, "author", str, path, ""),
        description=_field(table, "description", str, path, ""), entry=entry,
        packages=tuple(_field(table, "packages", list, path, [])),
        gpu_only=_field(table, "gpu_only", bool, path, False),
        inplace_state=_field(table, "inplace_state", bool, path, False),
        state_dtypes=state_dtypes, tolerances=_tolerances(data, state_dtypes, path),
    )


def discover(root: str | Path = SOLUTIONS_DIR) -> dict[str, Path]:
    """Map solution name to folder for every ``root/*/solution.toml``, sorted by name."""
    return {p.parent.name: p.parent for p in sorted(Path(root).glob("*/solution.toml"))}


def load_module(meta: SolutionMeta) -> ModuleType:
    """Import the entry module from its path (its folder goes first on sys.path
    so that sibling modules import). Exceptions from the module propagate."""
    module_name = f"gdn_solution_{meta.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(module_name, meta.entry_path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(meta.directory))
    try:
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(meta.directory))
    if not callable(getattr(module, "run", None)):
        raise AttributeError(f"{meta.entry_path} defines no callable run(inputs)")
    return module
