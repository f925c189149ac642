"""Pack a solution folder as a contest submission (``python -m harness pack NAME --out DIR``).

Writes two forms of the same submission:

* ``DIR/NAME.json``: a flashinfer-bench ``Solution`` (sources inlined), what
  flashinfer-bench's builders take and the contest scored;
* ``DIR/NAME/``: the contest starter kit's folder, ``config.toml`` (``[solution]``
  name, definition, author; ``[build]`` language, entry point) and the sources
  under ``solution/<language>/``.

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
from harness.interop.fib import import_fib
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
    kit_dir: Path
    solution: object  # flashinfer_bench.data.Solution


def pack(meta: SolutionMeta, definition: Definition, out_dir: str | Path) -> Packed:
    """Write ``out_dir/<name>.json`` and the starter-kit folder ``out_dir/<name>/`` (see module doc).

    Raises:
        HarnessInputError: flashinfer-bench is not installed; the solution is
            for another definition; a CUDA solution names no ``ffi_function``;
            a Python-family solution already has a file called :data:`harness.judge.dps.ENTRY_FILE`;
            flashinfer-bench's ``Solution`` model rejects the result.
    """
    fib = import_fib()
    if meta.definition != definition.name:
        raise HarnessInputError(meta.directory / "solution.toml", "solution.definition",
                                f"is {meta.definition!r}; this harness packs for {definition.name!r}")
    sources, entry_point = submission_sources(meta, definition)
    language = FIB_LANGUAGES[meta.language]
    spec = fib.BuildSpec(
        language=language, target_hardware=["cuda"] if meta.gpu_only else ["cpu", "cuda"],
        entry_point=entry_point, dependencies=[] if meta.language == "cuda" else list(meta.packages),
        destination_passing_style=True, binding="tvm-ffi" if meta.language == "cuda" else None)
    try:
        solution = fib.Solution(
            name=meta.name, definition=meta.definition, author=meta.author or "unknown",
            description=meta.description or None, spec=spec,
            sources=[fib.SourceFile(path=path, content=text) for path, text in sources.items()])
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise HarnessInputError(meta.directory, None, f"flashinfer-bench rejects the packed solution: {exc}") from exc
    out_dir = Path(out_dir)
    kit_dir = write_starter_kit(out_dir / meta.name, meta, language, entry_point, sources)
    json_path = out_dir / f"{meta.name}.json"
    json_path.write_text(solution.model_dump_json(indent=2) + "\n")
    return Packed(json_path, kit_dir, solution)


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
        return {s: files[s].decode() for s in names}, f"{meta.sources[0]}::{meta.ffi_function}"
    files = dps.with_entry(meta, definition, files)
    return {path: data.decode() for path, data in files.items() if path not in NOT_SOURCES}, f"{dps.ENTRY_FILE}::run"


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
