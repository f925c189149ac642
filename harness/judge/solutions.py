"""Solutions: discovery under ``solutions/``, validation of ``solution.toml``, loading as a package.

The contract is in docs/solutions.md. A solution folder holds ``solution.toml``
and an entry module defining ``run(inputs)``. The judge never imports a
solution from where it lies: it snapshots the folder's files when the run
starts (:func:`snapshot_files`), writes them into a private directory for each
worker (:func:`materialize`), and imports that copy as a package named
``gdn_solution_<name>`` (:func:`import_entry`), so relative imports work and
nothing on ``sys.path`` changes. A CUDA solution's ``sources`` are compiled by
the harness (:mod:`harness.judge.build`) into ``<stem of the first source>.so``
beside them in that copy, as flashinfer-bench's builder compiles a CUDA
solution before calling it.

Every way a folder can be malformed raises :class:`SolutionLoadError` naming
the file and field; the run turns it into COMPILE_ERROR traces for that
solution only (see docs/judging.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType

from harness.errors import HarnessInputError
from harness.facts import MAX_NAME_LENGTH, RESERVED_NAMES, STATE_DTYPES
from harness.paths import SOLUTIONS_DIR

LANGUAGES = ("python", "triton", "cuda", "cutedsl")
#: Keys ``[solution]`` may hold; anything else is a typo or a claim the judge does not honour.
KNOWN_KEYS = frozenset({"name", "definition", "language", "author", "description", "entry", "packages",
                        "gpu_only", "inplace_state", "state_dtypes", "sources", "ffi_function"})
#: A solution name: it becomes part of a package name, file names and CSV cells.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
#: Files larger than this are not part of a solution snapshot (build outputs, data).
MAX_FILE_BYTES = 16 * 1024 * 1024
SKIPPED_PARTS = {"__pycache__", ".git"}


class SolutionLoadError(HarnessInputError):
    """A solution folder that cannot be loaded: bad TOML, a missing or
    malformed field, an entry outside the folder, a reserved name. The
    message names the file and field."""


@dataclass(frozen=True)
class SolutionMeta:
    """What ``solution.toml`` says about a solution (validated)."""

    name: str
    directory: Path
    definition: str
    language: str
    author: str
    description: str
    entry: str  # a .py file inside the folder, relative to it
    packages: tuple[str, ...]  # importable modules it needs; a missing one -> SKIPPED
    gpu_only: bool
    inplace_state: bool
    state_dtypes: tuple[str, ...]
    sources: tuple[str, ...] = ()  # CUDA sources the harness compiles (language "cuda")
    #: the TVM-FFI function ``sources`` export with the definition's positional DPS
    #: signature (language "cuda"): the entry point of the packed submission
    ffi_function: str = ""
    #: how the generated positional entry calls the solution (:mod:`harness.judge.dps`):
    #: ``dict``, this project's ``run(inputs)``; for a contest entry (:mod:`harness.judge.entries`)
    #: ``dps``, its function takes the inputs then the outputs, or ``value``, it takes the inputs
    #: and returns the outputs (flashinfer-bench's ``destination_passing_style`` true / false)
    calling: str = "dict"
    #: a contest entry's function, the part after ``::`` of its entry point (``kernel.py::kernel``)
    function: str = "run"
    #: a compiled contest entry's binding: ``tvm-ffi`` (the library's exported function) or
    #: ``torch`` (a PyTorch extension module; :func:`harness.judge.build.build_torch_extension`)
    binding: str = "tvm-ffi"
    #: where the solution came from: ``folder`` (``solution.toml``), ``solution-json``, ``starter-kit``
    origin: str = "folder"

    @property
    def package_name(self) -> str:
        """The name the entry's package gets when imported: ``gdn_solution_<name>``."""
        return "gdn_solution_" + re.sub(r"[^0-9a-zA-Z_]", "_", self.name)

    @property
    def entry_module(self) -> str:
        """Dotted name of the entry module inside the package (``main`` for ``main.py``)."""
        return ".".join(PurePosixPath(self.entry).with_suffix("").parts)

    @property
    def library_name(self) -> str | None:
        """File name of the compiled CUDA library beside the sources (``kernel.so``), or None."""
        return f"{PurePosixPath(self.sources[0]).stem}.so" if self.sources else None

    def missing_packages(self) -> list[str]:
        """Packages in ``packages`` that cannot be imported here (a dotted name whose parent is
        missing, or a relative one, counts as missing: ``find_spec`` raises for those)."""
        return [p for p in self.packages if not _importable(p)]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # "a.b" imports "a" first; ".a" has no package to be relative to
        return False


def _field(table: dict, key: str, kind, path: Path, default=None):
    if key not in table:
        if default is None:
            raise SolutionLoadError(path, f"solution.{key}", "is required")
        return default
    value = table[key]
    if not isinstance(value, kind):
        raise SolutionLoadError(path, f"solution.{key}", f"must be {kind.__name__}, got {type(value).__name__}")
    return value


def _string_list(table: dict, key: str, path: Path) -> tuple[str, ...]:
    values = _field(table, key, list, path, [])
    if not all(isinstance(v, str) and v for v in values):
        raise SolutionLoadError(path, f"solution.{key}", "must be a list of non-empty strings")
    return tuple(values)


def _inside(relative: str, directory: Path, path: Path, field: str) -> str:
    """``relative`` if it names a file inside ``directory`` (no absolute path, no ``..``)."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or relative.startswith("~"):
        raise SolutionLoadError(path, field, f"{relative!r} must be a path inside the solution folder")
    if not (directory / pure).is_file():
        raise SolutionLoadError(path, field, f"file {relative!r} not found in {directory}")
    return str(pure)


def _validate_name(name: str, directory: Path, path: Path) -> None:
    if name != directory.name:
        raise SolutionLoadError(path, "solution.name", f"is {name!r} but the folder is {directory.name!r}")
    check_name(name, path, "solution.name", NAME_PATTERN, "lower-case letters")


def check_name(name: str, path: Path, field: str, pattern: re.Pattern, letters: str) -> None:
    """A solution's name, which becomes a trace label, a package name and file names: at most
    :data:`~harness.facts.MAX_NAME_LENGTH` characters, ``pattern`` (``letters``, digits, '.',
    '_', '-'), not reserved.

    Raises:
        SolutionLoadError: naming ``path`` and ``field``.
    """
    if len(name) > MAX_NAME_LENGTH:
        raise SolutionLoadError(path, field, f"is {len(name)} characters long; at most {MAX_NAME_LENGTH}")
    if not pattern.match(name):
        raise SolutionLoadError(path, field, f"{name!r} must be {letters}, digits, '.', '_', '-'")
    if name in RESERVED_NAMES:
        raise SolutionLoadError(path, field, f"{name!r} is reserved by the harness")


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise SolutionLoadError(path, None, "file not found") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SolutionLoadError(path, None, f"not valid TOML: {exc}") from exc


def load_meta(directory: str | Path) -> SolutionMeta:
    """Parse and validate ``<directory>/solution.toml``.

    Raises:
        SolutionLoadError: unreadable TOML, a missing, unknown or malformed
            field, a name that is not the folder's, too long or reserved, an
            entry or source outside the folder or missing, a ``[tolerance]``
            table (tolerances are the harness's: docs/judging.md).
    """
    directory = Path(directory)
    path = directory / "solution.toml"
    data = _read_toml(path)
    extra_tables = sorted(set(data) - {"solution"})
    if extra_tables:
        raise SolutionLoadError(path, extra_tables[0], "is not allowed: a solution declares only [solution] "
                                "(tolerances are the definition's and the harness's, docs/judging.md)")
    table = data.get("solution")
    if not isinstance(table, dict):
        raise SolutionLoadError(path, "solution", "a [solution] table is required")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise SolutionLoadError(path, f"solution.{unknown[0]}", f"is not a known field ({sorted(KNOWN_KEYS)})")
    name = _field(table, "name", str, path)
    _validate_name(name, directory, path)
    language = _field(table, "language", str, path)
    if language not in LANGUAGES:
        raise SolutionLoadError(path, "solution.language", f"must be one of {LANGUAGES}, got {language!r}")
    state_dtypes = _string_list(table, "state_dtypes", path) or ("float32",)
    if any(d not in STATE_DTYPES for d in state_dtypes):
        raise SolutionLoadError(path, "solution.state_dtypes", f"must be a subset of {STATE_DTYPES}")
    entry = _inside(_field(table, "entry", str, path), directory, path, "solution.entry")
    if not entry.endswith(".py"):
        raise SolutionLoadError(path, "solution.entry", f"{entry!r} must be a Python module (.py)")
    sources = tuple(_inside(s, directory, path, "solution.sources") for s in _string_list(table, "sources", path))
    if language == "cuda" and not sources:
        raise SolutionLoadError(path, "solution.sources", "a CUDA solution lists the .cu files the harness compiles")
    ffi_function = _field(table, "ffi_function", str, path, "")
    if ffi_function and (language != "cuda" or not ffi_function.isidentifier()):
        raise SolutionLoadError(path, "solution.ffi_function", "names a C++ function exported by the sources "
                                "(an identifier), and only a CUDA solution has one")
    return SolutionMeta(
        name=name, directory=directory, definition=_field(table, "definition", str, path), language=language,
        author=_field(table, "author", str, path, ""), description=_field(table, "description", str, path, ""),
        entry=entry, packages=_string_list(table, "packages", path),
        gpu_only=_field(table, "gpu_only", bool, path, False),
        inplace_state=_field(table, "inplace_state", bool, path, False),
        state_dtypes=state_dtypes, sources=sources, ffi_function=ffi_function,
    )


def discover(root: str | Path = SOLUTIONS_DIR) -> dict[str, Path]:
    """Map folder name to folder for every ``root/*/solution.toml``, sorted by name.
    Folders are not validated here: :func:`load_meta` does that, one at a time. (A run selects
    from contest entries too: :func:`harness.judge.entries.discover_all`.)

    Raises:
        HarnessInputError: ``root`` holds no solution folder (the message says what it expected,
            and what it found instead that a contestant may take for one).
    """
    found = {p.parent.name: p.parent for p in sorted(Path(root).glob("*/solution.toml"))}
    if not found:
        raise HarnessInputError(root, None, no_solution_problem(Path(root)))
    return found


def no_solution_problem(root: Path) -> str:
    """Why ``root``, holding no ``*/solution.toml``, is not a solutions folder."""
    if not root.is_dir():
        return "no such folder"
    if (root / "solution.toml").is_file():
        return f"is a solution folder itself; pass the folder that holds it ({root.parent})"
    problem = ("holds no solution folder: expected one folder per solution, <name>/solution.toml beside "
               "its entry module (docs/solutions.md)")
    # what `python -m harness pack` writes, and what a contestant brings from the contest's starter kit
    foreign = [p.name for p in sorted(root.glob("*.json"))] + [f"{p.parent.name}/" for p in
                                                                sorted(root.glob("*/config.toml"))]
    if (root / "config.toml").is_file():
        foreign.insert(0, "config.toml")
    if foreign:
        problem += (f"; it holds {', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}: flashinfer-bench "
                    "Solution JSON or starter-kit folders (config.toml), which run_local.py --solutions judges as "
                    "they are (harness.judge.entries) but which are not this project's solution folders")
    return problem


def snapshot_files(directory: Path) -> dict[str, bytes]:
    """Every file of a solution folder (relative POSIX path -> bytes), read through
    symlinks, without caches and files over :data:`MAX_FILE_BYTES`. The judge takes
    this once when a run starts; every worker gets a copy of it, so a solution that
    edits another's files on disk changes nothing that is run."""
    files = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if SKIPPED_PARTS & set(relative.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        if path.stat().st_size <= MAX_FILE_BYTES:
            files[relative.as_posix()] = path.read_bytes()
    return files


def materialize(meta: SolutionMeta, files: dict[str, bytes], root: Path, library: bytes | None = None) -> Path:
    """Write a snapshot as ``<root>/<package name>/`` (plus the compiled CUDA
    library as :attr:`SolutionMeta.library_name`) and return that folder."""
    package_dir = Path(root) / meta.package_name
    for relative, data in files.items():
        target = package_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if library is not None:
        (package_dir / meta.library_name).write_bytes(library)
    return package_dir


def import_entry(meta: SolutionMeta, package_dir: Path) -> ModuleType:
    """Import ``package_dir`` as the package :attr:`SolutionMeta.package_name` and
    return its entry module. Exceptions from the solution's code propagate.

    Raises:
        AttributeError: the entry defines no callable ``run``.
    """
    module = import_package(meta.package_name, meta.entry_module, package_dir)
    if not callable(getattr(module, "run", None)):
        raise AttributeError(f"{meta.directory / meta.entry} defines no callable run(inputs)")
    return module


def import_package(package_name: str, entry_module: str, package_dir: Path) -> ModuleType:
    """Import ``package_dir`` as package ``package_name`` (its ``__init__.py`` is
    optional) and return its submodule ``entry_module``; no ``sys.path`` change."""
    package_dir = Path(package_dir)
    for name in [n for n in sys.modules if n == package_name or n.startswith(package_name + ".")]:
        del sys.modules[name]  # a copy imported earlier in this process must not answer for this one
    init = package_dir / "__init__.py"
    spec = importlib.util.spec_from_file_location(package_name, init, submodule_search_locations=[str(package_dir)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[package_name] = package
    if init.is_file():
        spec.loader.exec_module(package)
    return importlib.import_module(f"{package_name}.{entry_module}")


def build_library_file(meta: SolutionMeta, defines: tuple[str, ...] = ()) -> Path | None:
    """Where the compiled CUDA library of a ``language = "cuda"`` solution lies in the build cache
    (None for others; built first when the cache lacks it); ``defines``: preprocessor macros (a
    tuner's build of every variant).

    Raises:
        harness.judge.build.CompileError: nvcc or tvm-ffi missing, or the build failed.
    """
    if not meta.sources:
        return None
    from harness.judge.build import build_solution

    return Path(build_solution(meta.directory, meta.sources, defines=defines))


def build_library(meta: SolutionMeta, defines: tuple[str, ...] = ()) -> bytes | None:
    """The bytes of :func:`build_library_file` (None for a solution that is not CUDA).

    Raises:
        harness.judge.build.CompileError: nvcc or tvm-ffi missing, or the build failed.
    """
    path = build_library_file(meta, defines)
    return path.read_bytes() if path is not None else None


def load_solution(meta: SolutionMeta, workdir: str | Path | None = None,
                  defines: tuple[str, ...] = ()) -> ModuleType:
    """Copy, build (CUDA, with ``defines``) and import a solution in this process:
    what tools and tests use to call a solution directly. ``workdir`` (a new
    temporary folder if None) receives the copy."""
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"{meta.package_name}-"))
    package_dir = materialize(meta, snapshot_files(meta.directory), root, build_library(meta, defines))
    try:
        return import_entry(meta, package_dir)
    except BaseException:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
        raise
