"""Contest entries, judged as shipped: flashinfer-bench Solution JSON and starter-kit folders.

This module is the map of how ``run_local.py --solutions PATH`` finds what to judge and how a
contest entry becomes a solution of this harness. It converts each entry once, when the run
starts (:func:`load`), into what the rest of the judge already runs: a validated
:class:`~harness.judge.solutions.SolutionMeta` and the files of its private copy. Nothing
downstream knows an entry from a ``solution.toml`` folder (docs/interop.md, "Judging a contest
entry")::

    PATH is / holds                    read with                            becomes
    ---------------------------------  -----------------------------------  ---------------------------
    <name>/solution.toml (depth 1)     solutions.load_meta                  this project's own, as ever
    *.json, any depth                  flashinfer_bench.data.Solution       meta + files, origin
                                                                            "solution-json"
    a starter-kit folder (config.toml) the kit's pack_solution.py: config's meta + files, origin
                                       [solution] and [build], the files    "starter-kit"
                                       flashinfer_bench.agents.
                                       pack_solution_from_files packs from
                                       solution/<language>/
    a dataset (definitions/ and        its solutions/ folder, as above
    solutions/)

A folder holding ``solution.toml`` or ``config.toml`` is one solution: nothing below it is
another (fla-recurrent's ``launch_tables/*.json`` are not Solutions). Entries for another
definition are left out with a note (a dataset's ``solutions/`` holds every track's); if that
leaves nothing, or two entries share a name (flashinfer-bench's ``TraceSet`` refuses that too),
the input is bad (:class:`~harness.errors.HarnessInputError`).

An entry's sources go unchanged under :data:`SUBMISSION_DIR` in its private copy, beside the
positional entry the harness generates for it (:mod:`harness.judge.dps`, ``calling`` ``dps`` or
``value``), so no file of the entry can clash with the harness's. Python, Triton, TileLang and
CuTe DSL entries (flashinfer-bench's ``python``) are imported as a package there, relative imports
working as in flashinfer-bench's ``PythonBuilder``; ``cuda`` and ``cpp`` entries are compiled by
the judge before any worker starts (:func:`build`): binding ``tvm-ffi`` (the default) with this
harness's nvcc command (:func:`harness.judge.build.build_solution`), binding ``torch`` as
flashinfer-bench's ``TorchBuilder`` compiles it but without importing it in the judge
(:func:`harness.judge.build.build_torch_extension`).

Every way an entry can be malformed raises :class:`~harness.judge.solutions.SolutionLoadError`
naming the file and the field; the run makes it that entry's COMPILE_ERROR, or exits 2 when no
entry could be loaded (:func:`harness.judge.run.run_benchmark`).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness.data.definition import Definition
from harness.errors import HarnessInputError
from harness.fib_import import import_fib
from harness.judge import dps
from harness.judge.solutions import (SolutionLoadError, SolutionMeta, build_library_file, check_name, load_meta,
                                     no_solution_problem, snapshot_files)

#: The folder of a solution's private copy that holds a contest entry's own files.
SUBMISSION_DIR = "submission"
#: What marks a folder as this project's solution, and as a starter-kit folder.
SOLUTION_FILE, KIT_FILE = "solution.toml", "config.toml"
#: flashinfer-bench's languages that are Python modules, with the module each needs beside torch.
PYTHON_LANGUAGES = {"python": (), "triton": ("triton",), "tilelang": ("tilelang",)}
#: Sources a compiled entry's build compiles (flashinfer-bench's builders take these suffixes).
COMPILED_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
#: What the starter kit's pack_solution.py sets that its config.toml does not say.
KIT_TARGET_HARDWARE = ["cuda"]
#: A contest entry's name: as this project's names, upper case allowed (flashinfer-bench's are free text).
ENTRY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: A dependency that names an importable module (``flashinfer``, ``cutlass.cute``), which is then
#: checked like a solution's ``packages``; pip names (``flashinfer-python``) are not checked.
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_SKIPPED_FOLDERS = {"__pycache__", ".git"}


# ---------------------------------------------------------------------------- what PATH holds

def is_entry(path: Path) -> bool:
    """Whether ``path`` is a contest entry: a ``.json`` file, or a starter-kit folder (one with a
    ``config.toml`` that is not this project's solution folder)."""
    path = Path(path)
    if path.is_dir():
        return (path / KIT_FILE).is_file() and not (path / SOLUTION_FILE).is_file()
    return path.is_file() and path.suffix == ".json"


@dataclass
class Discovery:
    """What a ``--solutions`` path holds: name -> solution folder or entry, and what was left out."""

    found: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # entries left out (another definition), one line each

#: What a contest entry needs flashinfer-bench for, said where it is missing.
READING = "reading a contest entry"


def discover_all(root: str | Path, definition: str | None = None) -> Discovery:
    """Every solution under ``root`` (see module doc), sorted by name; entries whose ``definition``
    is not ``definition`` (when given) left out with a note. Nothing is validated here beyond the
    name and definition an entry states: :func:`load` does that, one at a time.

    Raises:
        HarnessInputError: ``root`` is missing or holds nothing to judge (the message says what
            was expected, and why what was there was left out); two solutions share a name.
    """
    root = Path(root)
    if root.is_file() and root.suffix != ".json":
        raise HarnessInputError(root, None, "is neither a flashinfer-bench Solution JSON (*.json) nor a folder "
                                            "of solutions")
    if (root / SOLUTION_FILE).is_file():  # its own files (fla-recurrent's launch_tables/*.json) are no entries
        raise HarnessInputError(root, None, no_solution_problem(root))
    candidates = [root] if is_entry(root) else _walk(root) if root.is_dir() else []
    discovery, other = Discovery(), {}
    for path in candidates:
        name, stated = _stated(path)
        if definition is not None and stated is not None and stated != definition:
            other[path] = stated
            continue
        if name in discovery.found:
            raise HarnessInputError(path, "name", f"{name!r} is also the name of {discovery.found[name]}: "
                                    "a run judges one solution per name (flashinfer-bench refuses it too)")
        discovery.found[name] = path
    if other:
        kinds = sorted(set(other.values()))
        discovery.notes.append(f"{len(other)} solution(s) for other definitions left out ({', '.join(kinds)}): "
                               f"{', '.join(str(p) for p in sorted(other)[:5])}{', ...' if len(other) > 5 else ''}")
    if not discovery.found:
        raise HarnessInputError(root, "definition" if other else None,
                                _nothing_problem(root, other, definition))
    discovery.found = dict(sorted(discovery.found.items()))
    return discovery


def _nothing_problem(root: Path, other: dict[Path, str], definition: str | None) -> str:
    """Why ``root`` holds nothing this run can judge."""
    if other:
        return (f"every solution there is for another definition ({', '.join(sorted(set(other.values())))}); "
                f"this run judges {definition!r}")
    if not root.exists():
        return "no such file or folder"
    return (no_solution_problem(root) + ", nor a flashinfer-bench Solution JSON (*.json, at any depth) or a "
            "starter-kit folder (config.toml and solution/<language>/) (docs/interop.md)")


def _walk(folder: Path, depth: int = 0) -> list[Path]:
    """The solution folders directly in ``folder`` (depth 0) and the entries at any depth below it;
    a dataset folder is read through its ``solutions/`` alone (its definitions are JSON too)."""
    if depth == 0 and (folder / "definitions").is_dir() and (folder / "solutions").is_dir():
        return _walk(folder / "solutions", depth + 1)
    found = []
    for path in sorted(folder.iterdir()):
        if path.name in _SKIPPED_FOLDERS or path.name.startswith("."):
            continue
        if path.is_file() and path.suffix == ".json":
            found.append(path)
        elif path.is_dir() and (path / SOLUTION_FILE).is_file():
            found += [path] if depth == 0 else []  # this project's solutions live directly in the folder
        elif path.is_dir() and (path / KIT_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            found += _walk(path, depth + 1)
    return found


def _stated(path: Path) -> tuple[str, str | None]:
    """``(name, definition)`` as the solution states them, read leniently (a broken file is named
    after itself and reported by :func:`load`); the definition of this project's folders is not
    filtered on (theirs is SKIPPED, as it always was)."""
    if path.is_dir() and (path / SOLUTION_FILE).is_file():
        return path.name, None
    try:
        if path.is_file():
            data = json.loads(path.read_text())
        else:
            data = tomllib.loads((path / KIT_FILE).read_text()).get("solution", {})
    except (OSError, ValueError, UnicodeDecodeError):
        data = {}
    data = data if isinstance(data, dict) else {}
    name, definition = data.get("name"), data.get("definition")
    fallback = path.stem if path.is_file() else path.name
    return (name if isinstance(name, str) and name else fallback), (definition if isinstance(definition, str) else None)


# ---------------------------------------------------------------------------- reading an entry

@dataclass(frozen=True)
class Loaded:
    """A solution as the judge will run it: its validated metadata and, for a contest entry, the
    files of its private copy (relative path -> bytes: its sources under :data:`SUBMISSION_DIR` and
    the generated positional entry). A ``solution.toml`` folder's files are taken later
    (:func:`files_of`), after the run decided it can run here, as they always were."""

    meta: SolutionMeta
    files: dict[str, bytes] | None = None


def load(path: Path, definition: Definition) -> Loaded:
    """The solution at ``path``: a contest entry (:func:`is_entry`) read and converted, or a
    ``solution.toml`` folder's metadata.

    Raises:
        SolutionLoadError: a malformed entry or ``solution.toml``, naming the file and field.
        HarnessInputError: flashinfer-bench is not installed (needed to read an entry).
    """
    path = Path(path)
    if not is_entry(path):
        return Loaded(load_meta(path))
    solution = read_solution_json(path) if path.is_file() else read_starter_kit(path)
    return convert(solution, path, "solution-json" if path.is_file() else "starter-kit", definition)


def _validation_error(path: Path, exc: Exception, prefix: str = "") -> SolutionLoadError:
    """A pydantic ValidationError (or a plain ValueError) as a SolutionLoadError naming the field
    (``prefix`` + the model's field path; a model-level complaint about the entry point or the
    sources named as that field)."""
    errors = exc.errors() if callable(getattr(exc, "errors", None)) else []
    if not errors:
        return SolutionLoadError(path, prefix.rstrip(".") or None, str(exc))
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = first.get("msg", str(exc))
    lowered = message.lower()
    if "entry point" in lowered or "entry source" in lowered:
        where = "spec.entry_point" if not prefix else "entry_point"
    elif "source path" in lowered and not where:
        where = "sources"
    if first.get("type") not in ("missing", "value_error") and "input" in first:
        message += f" (got {first['input']!r})"[:300]
    return SolutionLoadError(path, f"{prefix}{where}" if where else (prefix.rstrip(".") or None), message)


def read_solution_json(path: Path):
    """The flashinfer-bench ``Solution`` in ``path``.

    Raises:
        SolutionLoadError: not JSON, or not a valid Solution (the field named).
    """
    models = import_fib("flashinfer_bench.data", READING)
    try:
        text = path.read_text()
        json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise SolutionLoadError(path, None, f"cannot be read: {exc}") from exc
    except ValueError as exc:
        raise SolutionLoadError(path, None, f"not valid JSON: {exc}") from exc
    try:
        return models.Solution.model_validate_json(text)
    except ValueError as exc:
        raise _validation_error(path, exc) from exc


def read_starter_kit(kit: Path):
    """The ``Solution`` a starter-kit folder packs into, as the kit's ``scripts/pack_solution.py``
    packs it: ``[solution]`` name, definition, author; ``[build]`` language, entry_point and
    destination_passing_style (default true); target_hardware ``["cuda"]``; the source files directly
    in ``solution/<language>/``, through flashinfer-bench's own ``pack_solution_from_files``. The
    harness also reads ``[build]`` ``target_hardware`` and ``binding`` where a kit states them (the
    kit's script ignores both: its defaults are the ones above and tvm-ffi).

    Raises:
        SolutionLoadError: unreadable ``config.toml``, a missing or malformed field, no
            ``solution/<language>/`` folder or nothing in it to pack.
    """
    models = import_fib("flashinfer_bench.data", READING)
    handler = import_fib("flashinfer_bench.agents.solution_handler", READING)
    config_path = kit / KIT_FILE
    try:
        config = tomllib.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SolutionLoadError(config_path, None, f"not valid TOML: {exc}") from exc
    table = {section: config.get(section) for section in ("solution", "build")}
    for section, values in table.items():
        if not isinstance(values, dict):
            raise SolutionLoadError(config_path, section, f"a [{section}] table is required")
    build = table["build"]
    spec_fields = {"language": build.get("language"), "entry_point": build.get("entry_point"),
                   "destination_passing_style": build.get("destination_passing_style", True),
                   "target_hardware": build.get("target_hardware", KIT_TARGET_HARDWARE),
                   **({"binding": build["binding"]} if "binding" in build else {})}
    try:
        spec = models.BuildSpec(**spec_fields)
    except ValueError as exc:
        raise _validation_error(config_path, exc, "build.") from exc
    source_dir = kit / "solution" / spec.language.value
    if not source_dir.is_dir():
        raise SolutionLoadError(config_path, "build.language", f"is {spec.language.value!r} but the kit has no "
                                f"{source_dir.relative_to(kit)}/ folder of sources")
    solution = table["solution"]
    try:
        return handler.pack_solution_from_files(
            path=str(source_dir), spec=spec, name=solution.get("name"), definition=solution.get("definition"),
            author=solution.get("author"), description=solution.get("description", ""))
    except ValueError as exc:  # pydantic's ValidationError is one; so is the packer's "no source files"
        raise _kit_error(config_path, source_dir, exc, handler.VALID_SOURCE_EXTENSIONS) from exc


def _kit_error(config_path: Path, source_dir: Path, exc: ValueError, packed_suffixes) -> SolutionLoadError:
    """What the kit's packing refused, naming config.toml's field or the source file at fault."""
    errors = exc.errors() if callable(getattr(exc, "errors", None)) else []
    loc = tuple(errors[0].get("loc", ())) if errors else ()
    if isinstance(exc, UnicodeDecodeError):  # the packer reads every source as text
        packed = sorted(p for p in source_dir.iterdir() if p.is_file() and p.suffix.lower() in packed_suffixes)
        culprit = next((p for p in packed if not _is_utf8(p)), source_dir)
        return SolutionLoadError(culprit, None, f"is not UTF-8 text ({exc.reason} at byte {exc.start}): the kit "
                                 "packs its sources as text")
    if not errors:  # the packer's own: no source file in the folder
        return SolutionLoadError(source_dir, None, f"{exc} (the kit packs {', '.join(sorted(packed_suffixes))} "
                                 "files directly in this folder)")
    if getattr(exc, "title", "") == "SourceFile":  # one file refused as it was packed: an empty one
        packed = sorted(p for p in source_dir.iterdir() if p.is_file() and p.suffix.lower() in packed_suffixes)
        culprit = next((p for p in packed if not p.read_text(errors="replace")), source_dir)
        return SolutionLoadError(culprit, None, f"{errors[0].get('msg', exc)}: flashinfer-bench packs no empty file")
    if loc and loc[0] in ("name", "definition", "author", "description"):
        return _validation_error(config_path, exc, "solution.")
    return _validation_error(config_path, exc, "build.")


def _is_utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return True


# ---------------------------------------------------------------------------- converting it

def convert(solution, path: Path, origin: str, definition: Definition) -> Loaded:
    """A flashinfer-bench ``Solution`` as this harness's solution (see module doc).

    Raises:
        SolutionLoadError: another definition, a name the harness cannot use, an entry point
            that is not ``<file>::<function>`` of a file of the right kind.
    """
    where = path / KIT_FILE if origin == "starter-kit" else path
    prefix = "solution." if origin == "starter-kit" else ""
    build_prefix = "build." if origin == "starter-kit" else "spec."
    if solution.definition != definition.name:
        raise SolutionLoadError(where, f"{prefix}definition", f"is {solution.definition!r}; this run judges "
                                f"{definition.name!r}")
    check_name(solution.name, where, f"{prefix}name", ENTRY_NAME, "letters")
    spec, language = solution.spec, solution.spec.language.value
    entry_file, function = str(solution.get_entry_path().as_posix()), solution.get_entry_symbol()
    if not function.isidentifier():
        raise SolutionLoadError(where, f"{build_prefix}entry_point", f"{spec.entry_point!r}: the part after '::' "
                                "must be the name of a function")
    compiled = language in dps.COMPILED_LANGUAGES
    if compiled and PurePosixPath(entry_file).suffix not in COMPILED_SUFFIXES:
        raise SolutionLoadError(where, f"{build_prefix}entry_point", f"{spec.entry_point!r}: a {language} entry "
                                f"point names a source file ({', '.join(COMPILED_SUFFIXES)})")
    if not compiled and (PurePosixPath(entry_file).suffix != ".py" or language not in PYTHON_LANGUAGES):
        raise SolutionLoadError(where, f"{build_prefix}entry_point", f"{spec.entry_point!r}: a {language} entry "
                                "point names a Python file (.py)")
    sources = {s.path: s.content for s in solution.sources}
    _check_source_paths(list(sources), where, "sources" if origin == "solution-json" else "solution/")
    meta = SolutionMeta(
        name=solution.name, directory=path, definition=solution.definition, language=language,
        author=solution.author, description=solution.description or "",
        entry="" if compiled else f"{SUBMISSION_DIR}/{entry_file}",
        packages=_packages(language, spec), gpu_only=compiled or "cpu" not in [t.lower() for t in spec.target_hardware],
        inplace_state=False, state_dtypes=("float32",),
        sources=tuple(p for p in sources if PurePosixPath(p).suffix in COMPILED_SUFFIXES) if compiled else (),
        calling="dps" if spec.destination_passing_style else "value", function=function,
        binding=spec.binding.value if spec.binding is not None else "tvm-ffi", origin=origin)
    files = {f"{SUBMISSION_DIR}/{p}": text.encode() for p, text in sources.items()}
    return Loaded(meta, dps.with_entry(meta, definition, files))


#: The longest file or folder name most file systems take (bytes): a longer one fails where the entry is
#: written out for its worker, so it is refused when the entry is read.
NAME_MAX = 255


def _check_source_paths(paths: list[str], where: Path, field: str) -> None:
    """Refuse source paths flashinfer-bench's model lets through but no file system can hold as the entry's
    files: one that names no file (``.``), holds a NUL byte or a part longer than :data:`NAME_MAX` bytes, two
    that name one file (``a.py`` and ``./a.py``), or one that is also the folder of another (``pkg`` and
    ``pkg/a.py``). They used to end the whole run with a traceback when the entry was written out for its
    worker (2026-11-28). What a file system reads as usual (``./a.py``, ``sub/``) is left as it is.

    Raises:
        SolutionLoadError: naming ``where``, the field and the path.
    """
    def at(index: int) -> str:
        return f"{field}[{index}].path" if field == "sources" else field

    seen: dict[str, int] = {}
    for index, text in enumerate(paths):
        normal = str(PurePosixPath(text))
        if "\0" in text or normal == ".":
            raise SolutionLoadError(where, at(index), f"{text!r} names no file (or holds a NUL byte)")
        if any(len(part.encode()) > NAME_MAX for part in normal.split("/")):
            raise SolutionLoadError(where, at(index), f"{text[:60]!r}...: a name longer than {NAME_MAX} bytes")
        if normal in seen:
            raise SolutionLoadError(where, at(index), f"{text!r} is the file of {paths[seen[normal]]!r} too")
        seen[normal] = index
    folders = {str(parent) for normal in seen for parent in PurePosixPath(normal).parents if str(parent) != "."}
    for normal, index in seen.items():
        if normal in folders:
            raise SolutionLoadError(where, at(index), f"{paths[index]!r} is a file and also the folder of another source")


def _packages(language: str, spec) -> tuple[str, ...]:
    """What must be importable (else SKIPPED): torch, the language's module, the binding's, and
    every dependency that names a module."""
    if language in dps.COMPILED_LANGUAGES:
        return ("torch",) if spec.binding is not None and spec.binding.value == "torch" else ("torch", "tvm_ffi")
    named = [d for d in spec.dependencies if MODULE_NAME.match(d)]
    return tuple(dict.fromkeys(["torch", *PYTHON_LANGUAGES[language], *named]))


# ---------------------------------------------------------------------------- building it

def files_of(loaded: Loaded, definition: Definition) -> dict[str, bytes]:
    """The files of the solution's private copy: a contest entry's, or a ``solution.toml``
    folder's snapshot with the generated positional entry (:func:`harness.judge.dps.with_entry`).

    Raises:
        SolutionLoadError: see :func:`harness.judge.dps.with_entry`.
    """
    if loaded.files is not None:
        return loaded.files
    return dps.with_entry(loaded.meta, definition, snapshot_files(loaded.meta.directory))


def build(loaded: Loaded) -> Path | None:
    """Where the build cache holds the solution's compiled library (built first when it lacks it);
    None where nothing is compiled. A contest entry's sources are compiled from a scratch copy,
    removed afterwards; nothing of the entry's runs in the judge.

    Raises:
        harness.judge.build.CompileError: nvcc, tvm-ffi or a CUDA build of torch missing, or the
            build failed.
    """
    meta = loaded.meta
    if loaded.files is None:
        return build_library_file(meta)
    if meta.language not in dps.COMPILED_LANGUAGES:
        return None
    from harness.judge import build as builder

    scratch = Path(tempfile.mkdtemp(prefix="gdn-entry-build-"))
    try:
        folder = scratch / meta.name  # the build cache names its entry after the folder
        sources = {path[len(SUBMISSION_DIR) + 1:]: data for path, data in loaded.files.items()
                   if path.startswith(f"{SUBMISSION_DIR}/")}
        for relative, data in sources.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(data)
        if meta.binding == "torch":
            return builder.build_torch_extension(folder, meta.sources, dps.torch_extension_name(meta),
                                                 with_cuda=meta.language == "cuda")
        return builder.build_solution(folder, meta.sources, headers=sorted(set(sources) - set(meta.sources)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
