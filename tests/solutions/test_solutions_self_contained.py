"""Every solution is self-contained (docs/solutions.md, "Self-contained").

* No file under ``solutions/`` imports the harness, edits ``sys.path`` or
  imports a sibling by file path: siblings are relative imports.
* Each solution's entry imports as a package from a copy of its folder in a
  temporary directory (the judge runs each solution from a private copy), so
  nothing may be reached outside the folder. GPU-only solutions are only
  imported; the others also run once on the CPU and are checked against the
  definition's reference.
* pt-reference's ``reference.py`` is the definition's ``reference`` field,
  character for character.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from harness.judge.solutions import discover, load_meta
from harness.paths import SOLUTIONS_DIR, WORKLOADS_DIR
from support.solution_copies import forget, import_copy

SOLUTIONS = sorted(discover(SOLUTIONS_DIR))
#: What a solution's files may not contain (compiled regular expression -> why).
FORBIDDEN = {
    re.compile(r"^\s*(import|from)\s+harness\b", re.MULTILINE): "imports the harness",
    re.compile(r"^\s*(import|from)\s+tools\b", re.MULTILINE): "imports the developer tools",
    re.compile(r"sys\.path"): "edits or reads sys.path",
    re.compile(r"spec_from_file_location|_load_sibling"): "imports a file by path (use a relative import)",
}
TEXT_SUFFIXES = {".py", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".toml", ".md", ".txt"}


def test_every_solution_is_found():
    assert {"pt-reference", "pt-compiled", "cuda-v1", "cuda-v4", "fla-recurrent", "cutedsl-bf16"} <= set(SOLUTIONS)


@pytest.mark.parametrize("name", SOLUTIONS)
def test_no_harness_import_no_sys_path(name):
    folder = SOLUTIONS_DIR / name
    problems = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or "__pycache__" in path.parts:
            continue
        text = path.read_text()
        problems += [f"{path.relative_to(SOLUTIONS_DIR)}: {why}" for pattern, why in FORBIDDEN.items()
                     if pattern.search(text)]
    assert not problems, problems


def _small_inputs(batch: int = 2, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    return {
        "q": randn(batch, 1, 4, 128).bfloat16(), "k": (randn(batch, 1, 4, 128) / math.sqrt(128)).bfloat16(),
        "v": randn(batch, 1, 8, 128).bfloat16(), "state": randn(batch, 8, 128, 128) * 0.3,
        "A_log": torch.log(1 + 15 * torch.rand(8, generator=gen)), "a": randn(batch, 1, 8).bfloat16(),
        "dt_bias": randn(8) * 0.5, "b": randn(batch, 1, 8).bfloat16(), "scale": 0.0,
    }


@pytest.mark.parametrize("name", SOLUTIONS)
def test_entry_imports_as_a_package_from_a_copy(name, tmp_path, monkeypatch, our_definition):
    meta = load_meta(SOLUTIONS_DIR / name)
    missing = meta.missing_packages()
    if missing:
        pytest.skip(f"missing packages: {', '.join(missing)}")
    monkeypatch.setenv("GDN_PT_COMPILED_EAGER", "1")  # pt-compiled: no inductor build in a unit test
    if meta.sources and torch.cuda.is_available():  # on a GPU the entry loads its library at import
        from harness.judge.solutions import load_solution

        module = load_solution(meta, workdir=tmp_path)
    else:
        module = import_copy(meta.directory, tmp_path)
    try:
        assert module.__package__ and module.__file__.startswith(str(tmp_path)), module.__file__
        assert callable(module.run)
        if meta.gpu_only:
            return  # imported only: running needs a GPU
        inputs = _small_inputs()
        output = torch.full((2, 1, 8, 128), float("nan"), dtype=torch.bfloat16)
        new_state = torch.full((2, 8, 128, 128), float("nan"))
        result = module.run(dict(inputs, output=output, new_state=new_state))
        assert result["output"] is output and result["new_state"] is new_state
        expected = our_definition.run_reference(inputs)
        torch.testing.assert_close(new_state, expected["new_state"], atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(output.float(), expected["output"].float(), atol=1e-2, rtol=1e-2)
    finally:
        forget(module)


@pytest.mark.parametrize("name", ["cuda-v1", "cuda-v4"])
def test_cuda_entry_names_the_missing_library(name, tmp_path):
    """Imported without the harness's build (no kernel.so beside main.py), a
    CUDA solution says which file is missing when asked for its kernel."""
    meta = load_meta(SOLUTIONS_DIR / name)
    assert meta.sources == ("kernel.cu",)
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine the entry loads its library at import")
    module = import_copy(meta.directory, tmp_path)
    try:
        with pytest.raises(FileNotFoundError, match="kernel.so"):
            module.load()
    finally:
        forget(module)


def test_pt_reference_copy_is_the_definitions_reference():
    definition = json.loads((WORKLOADS_DIR / "gdn_decode_qk4_v8_d128_k_last.json").read_text())
    assert (SOLUTIONS_DIR / "pt-reference" / "reference.py").read_text() == definition["reference"]


def _fixture_solutions() -> list[str]:
    from conftest import FIXTURE_SOLUTIONS

    return sorted(discover(FIXTURE_SOLUTIONS))


@pytest.mark.parametrize("name", _fixture_solutions())
def test_fixture_solutions_import_from_a_copy(name, tmp_path):
    """The test fixtures are judged like solutions, from private copies: their
    shared code reaches them through symlinks inside each folder."""
    from conftest import FIXTURE_SOLUTIONS

    meta = load_meta(FIXTURE_SOLUTIONS / name)
    if meta.missing_packages():
        pytest.skip("needs a package nobody has, on purpose")
    if name == "bad-import":
        with pytest.raises(ImportError, match="on purpose"):
            import_copy(meta.directory, tmp_path)
        return
    module = import_copy(meta.directory, tmp_path)
    try:
        assert callable(module.run)
    finally:
        forget(module)
