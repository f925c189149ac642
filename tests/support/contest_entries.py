"""The contest-entry fixtures (tests/fixtures/contest_entries/): each entry's form, written from src/.

The entries' source files live once, in ``src/``; the Solution JSONs in ``entries/`` inline them
and are written by :func:`write_entries` through flashinfer-bench's own models (so they validate
by construction). ``tests/judge/test_contest_entries.py`` checks that the committed JSONs are what
this writes; after editing ``src/`` or :data:`ENTRIES`, rewrite them::

    python tests/support/contest_entries.py

The starter-kit folder ``entries/triton-kit/`` is written by hand: its ``solution/triton/kernel.py``
is a symbolic link to ``src/triton_kernel.py``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "contest_entries"
SOURCES = FOLDER / "src"
ENTRIES_DIR = FOLDER / "entries"
DEFINITION = "gdn_decode_qk4_v8_d128_k_last"


@dataclass(frozen=True)
class Entry:
    """One Solution JSON: its spec and its files (path in the entry -> file in ``src/``)."""

    language: str
    entry_point: str
    files: dict[str, str]
    dps: bool = True
    binding: str | None = None
    target_hardware: list[str] = field(default_factory=lambda: ["cpu", "cuda"])
    dependencies: list[str] = field(default_factory=lambda: ["torch"])
    description: str = ""


PYTHON_FILES = {"gdn_math.py": "gdn_math.py"}
CUDA_FILES = {"gdn_kernel.cuh": "gdn_kernel.cuh"}

#: name -> entry. Every one is our own fp32 implementation of the definition's math.
ENTRIES: dict[str, Entry] = {
    "python-dps": Entry("python", "main.py::run", {"main.py": "dps_main.py", **PYTHON_FILES},
                        description="Python, destination-passing"),
    "python-value": Entry("python", "main.py::run", {"main.py": "value_main.py", **PYTHON_FILES}, dps=False,
                          description="Python, value-returning"),
    "python-inplace": Entry("python", "main.py::run", {"main.py": "inplace_main.py", **PYTHON_FILES}, dps=False,
                            description="Python, value-returning, the input state updated in place and returned "
                                        "(the shape of FlashInfer's baseline)"),
    "triton-dps": Entry("triton", "kernel.py::kernel", {"kernel.py": "triton_kernel.py"},
                        dependencies=["torch", "triton"], description="Triton, destination-passing"),
    "cuda-tvm-ffi": Entry("cuda", "kernel.cu::gdn_forward", {"kernel.cu": "tvm_ffi_kernel.cu", **CUDA_FILES},
                          binding="tvm-ffi", target_hardware=["cuda"], dependencies=[],
                          description="CUDA, TVM-FFI binding, destination-passing"),
    "cuda-torch": Entry("cuda", "kernel.cu::gdn_forward", {"kernel.cu": "torch_kernel.cu", **CUDA_FILES},
                        binding="torch", target_hardware=["cuda"], dependencies=[],
                        description="CUDA, torch binding (a PyTorch extension), destination-passing"),
}
#: The starter-kit folder beside the JSONs.
KIT = "triton-kit"


def solution(name: str):
    """The flashinfer-bench ``Solution`` of entry ``name``."""
    from flashinfer_bench.data import BuildSpec, Solution, SourceFile

    entry = ENTRIES[name]
    spec = BuildSpec(language=entry.language, target_hardware=entry.target_hardware, entry_point=entry.entry_point,
                     dependencies=entry.dependencies, destination_passing_style=entry.dps, binding=entry.binding)
    return Solution(name=name, definition=DEFINITION, author="tests", description=entry.description, spec=spec,
                    sources=[SourceFile(path=path, content=(SOURCES / source).read_text())
                             for path, source in entry.files.items()])


def json_text(name: str) -> str:
    """The JSON file of entry ``name``, as committed."""
    return solution(name).model_dump_json(indent=2) + "\n"


def write_entries(folder: Path = ENTRIES_DIR) -> list[Path]:
    """Write every entry's ``<name>.json`` into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ENTRIES:
        (folder / f"{name}.json").write_text(json_text(name))
        written.append(folder / f"{name}.json")
    return written


if __name__ == "__main__":
    for path in write_entries():
        print(path)
    sys.exit(0)
