"""Pack a solution folder as a contest submission (``python -m harness pack NAME --out DIR``).

Writes the submission in two forms, each to a folder of its own:

* ``DIR/NAME.json``: a flashinfer-bench ``Solution`` (sources inlined), what
  flashinfer-bench's builders take and the contest scored. ``DIR`` receives
  nothing else, so it may be a dataset's ``solutions/`` folder:
  ``flashinfer_bench.data.TraceSet.from_path`` reads every ``*.json`` under
  ``solutions/`` (recursively) as a ``Solution``, and fails on any that is not;
* ``KIT/NAME/``, only when asked for (``--starter-kit KIT``, never inside
  ``DIR``): the contest starter kit's folder, ``config.toml`` (``[solution]``
  name, definition, author; ``[build]`` language, entry point) and the sources
  under ``solution/<language>/``, JSON launch tables included.

The contest calls a solution in destination-passing style with positional
arguments in definition order. A Python, Triton or CuTe DSL solution is packed
with the generated positional entry :data:`harness.judge.dps.ENTRY_FILE`, the
very file the judge calls it through (:mod:`harness.judge.dps`), so what is
judged is what is submitted. A CUDA solution is packed without its Python
entry: the contest builds its ``sources`` (with the headers beside them, which
they may include, e.g. cuda-v4's launch tables) with TVM-FFI and calls the
exported ``ffi_function`` directly, as the judge does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.data.definition import Definition
from harness.errors import HarnessInputError
from harness.fib_import import import_fib
from harness.judge import dps
from harness.judge.build import local_headers
from harness.judge.solutions import SolutionMeta, snapshot_files

#: flashinfer-bench's language of each of ours (a CuTe DSL solution is Python code to it).
FIB_LANGUAGES = {"python": "python", "triton": "triton", "cuda": "cuda", "cutedsl": "python"}
#: Files of a solution folder that are not part of a submission.
NOT_SOURCES = {"solution.toml"}


@dataclass(frozen=True)
class Packed:
    """Where :func:`pack` wrote a submission, and the flashinfer-bench ``Solution`` it holds."""

    json_path: Path
    kit_dir: Path | None  # None: no starter kit asked for
    solution: object  # flashinfer_bench.data.Solution
    #: a starter-kit folder ``DIR/NAME/`` that an earlier pack (which wrote the kit beside the
    #: JSON) left in the JSON's folder, where flashinfer-bench would misread its JSON; None if none
    stale_kit: Path | None = None


def pack(meta: SolutionMeta, definition: Definition, out_dir: str | Path,
         kit_root: str | Path | None = None) -> Packed:
    """Write ``out_dir/<name>.json`` and, when ``kit_root`` is given, the starter-kit
    folder ``kit_root/<name>/`` (see module doc); nothing else is written.

    Raises:
        HarnessInputError: flashinfer-bench is not installed; the solution is
            for another definition; a CUDA solution names no ``ffi_function``;
            a Python-family solution already has a file called :data:`harness.judge.dps.ENTRY_FILE`;
            flashinfer-bench's ``Solution`` model rejects the result; the
            starter-kit folder would lie inside ``out_dir`` or a dataset's
            ``solutions/`` (:func:`misplaced_kit`; nothing is written then).
    """
    fib = import_fib()
    if meta.definition != definition.name:
        raise HarnessInputError(meta.directory / "solution.toml", "solution.definition",
                                f"is {meta.definition!r}; this harness packs for {definition.name!r}")
    out_dir = Path(out_dir)
    kit_dir = None if kit_root is None else Path(kit_root) / meta.name
    misplaced = misplaced_kit(kit_dir, out_dir) if kit_dir is not None else None
    if misplaced:
        raise HarnessInputError(kit_dir, None, f"the starter-kit folder would lie inside {misplaced}, which takes "
                                "only Solution JSON: in a dataset's solutions/ flashinfer-bench reads every *.json "
                                "(recursively) as a Solution, and a kit's JSON launch tables are not; choose a "
                                "folder outside it")
    sources, entry_point = submission_sources(meta, definition)
    language = FIB_LANGUAGES[meta.language]
    solution = fib_solution(fib, meta, language, entry_point, sources)
    if kit_dir is not None:
        write_starter_kit(kit_dir, meta, language, entry_point, sources)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{meta.name}.json"
    json_path.write_text(solution.model_dump_json(indent=2) + "\n")
    stale = out_dir / meta.name
    return Packed(json_path, kit_dir, solution, stale if (stale / "config.toml").is_file() else None)


def misplaced_kit(kit_dir: Path, out_dir: Path) -> Path | None:
    """The folder a starter kit at ``kit_dir`` must stay out of, or None where it may go:
    ``out_dir`` (it takes only Solution JSON) or a dataset's ``solutions/`` folder (one
    beside a ``definitions/`` folder) that holds ``kit_dir``."""
    kit = kit_dir.resolve()
    if kit.is_relative_to(out_dir.resolve()):
        return out_dir
    return next((p for p in kit.parents if p.name == "solutions" and (p.parent / "definitions").is_dir()), None)


def fib_solution(fib, meta: SolutionMeta, language: str, entry_point: str, sources: dict[str, str]):
    """The flashinfer-bench ``Solution`` (module ``fib``'s model) of the submission.

    Raises:
        HarnessInputError: flashinfer-bench's model rejects it.
    """
    spec = fib.BuildSpec(
        language=language, target_hardware=["cuda"] if meta.gpu_only else ["cpu", "cuda"],
        entry_point=entry_point, dependencies=[] if meta.language == "cuda" else list(meta.packages),
        destination_passing_style=True, binding="tvm-ffi" if meta.language == "cuda" else None)
    try:
        return fib.Solution(
            name=meta.name, definition=meta.definition, author=meta.author or "unknown",
            description=meta.description or None, spec=spec,
            sources=[fib.SourceFile(path=path, content=text) for path, text in sources.items()])
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise HarnessInputError(meta.directory, None, f"flashinfer-bench rejects the packed solution: {exc}") from exc


def submission_sources(meta: SolutionMeta, definition: Definition) -> tuple[dict[str, str], str]:
    """``({relative path: text}, entry point "file::function")`` of the submission.

    Raises:
        HarnessInputError: see :func:`pack`.
    """
    files = snapshot_files(meta.directory)
    if meta.language == "cuda":
        if not meta.ffi_function:
            raise HarnessInputError(meta.directory / "solution.toml", "solution.ffi_function",
                                    "is required to pack a CUDA solution: the exported TVM-FFI function "
                                    "with the definition's positional DPS signature")
        names = dict.fromkeys((*meta.sources, *local_headers(meta.directory)))  # what the sources may #include
        return {s: _text(meta, s, files[s]) for s in names}, f"{meta.sources[0]}::{meta.ffi_function}"
    files = dps.with_entry(meta, definition, files)
    return ({path: _text(meta, path, data) for path, data in files.items() if path not in NOT_SOURCES},
            f"{dps.ENTRY_FILE}::run")


def _text(meta: SolutionMeta, path: str, data: bytes) -> str:
    """A source file's text: a Solution JSON holds every source as text.

    Raises:
        HarnessInputError: naming the file, where it is not UTF-8 (a binary file in the solution's folder).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessInputError(meta.directory / path, None, f"is not UTF-8 text ({exc.reason} at byte {exc.start}): "
                                "a Solution JSON holds its sources as text; move the file out of the "
                                "solution's folder or make it text") from None


def write_starter_kit(kit_dir: Path, meta: SolutionMeta, language: str, entry_point: str,
                      sources: dict[str, str]) -> Path:
    """The contest starter kit's layout: ``config.toml`` and ``solution/<language>/<sources>``."""
    source_dir = kit_dir / "solution" / language
    for path, text in sources.items():
        target = source_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    config = [
        "[solution]",
        f"name = {json.dumps(meta.name)}",
        f"definition = {json.dumps(meta.definition)}",
        f"author = {json.dumps(meta.author or 'unknown')}",
        "",
        "[build]",
        f"language = {json.dumps(language)}",
        f"entry_point = {json.dumps(entry_point)}",
        "",
    ]
    (kit_dir / "config.toml").write_text("\n".join(config))
    return kit_dir
