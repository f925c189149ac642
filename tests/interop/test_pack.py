"""`python -m harness pack`: every solution packs into a flashinfer-bench Solution
that flashinfer-bench's own models and builders accept (harness/interop/pack.py).

On the CPU: the JSON validates with flashinfer-bench's ``Solution``; a dataset
whose ``solutions/`` holds every packed JSON loads with its ``TraceSet``; its
``BuilderRegistry`` (what the contest built submissions with) imports and
signature-checks the Python-family solutions and compiles the CUDA ones with
nvcc (``TVM_FFI_CUDA_ARCH_LIST`` names the architecture, as no GPU is there).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO, write_small_dataset
from harness.data.dataset import OUR_DEFINITION
from harness.data.definition import load_definition
from harness.errors import HarnessInputError
from harness.interop.export import export_dataset
from harness.interop.pack import pack
from harness.judge.dps import ENTRY_FILE
from harness.judge.build import CompileError, find_nvcc
from harness.judge.solutions import discover, load_meta

import flashinfer_bench.data as fib_data  # noqa: E402 - installed by the README's test command
SOLUTIONS = discover()
CUDA = [n for n in SOLUTIONS if load_meta(SOLUTIONS[n]).language == "cuda"]
PYTHON_FAMILY = [n for n in SOLUTIONS if n not in CUDA]
IMPORTS_HARNESS = re.compile(r"^\s*(from|import)\s+(harness|tools)\b", re.MULTILINE)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """Every solution packed once, as it would go into a dataset: the JSON into the
    ``solutions/`` folder of an exported dataset, the starter kits beside the dataset:
    {name: Packed}."""
    root = tmp_path_factory.mktemp("packed")
    dataset = export_dataset(str(write_small_dataset(root / "small")), root / "dataset", show_progress=False)
    definition = load_definition(OUR_DEFINITION)
    return {name: pack(load_meta(folder), definition, dataset / "solutions", root / "kits")
            for name, folder in SOLUTIONS.items()}


@pytest.fixture(scope="module")
def fib_definition():
    return fib_data.Definition.model_validate(json.loads(OUR_DEFINITION.read_text()))


@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_every_solution_packs_into_a_valid_flashinfer_bench_solution(packed, name):
    result = packed[name]
    solution = fib_data.Solution.model_validate_json(result.json_path.read_text())
    meta = load_meta(SOLUTIONS[name])
    assert (solution.name, solution.definition, solution.author) == (meta.name, meta.definition, meta.author)
    assert not [s.path for s in solution.sources if IMPORTS_HARNESS.search(s.content)]
    config = tomllib.loads((result.kit_dir / "config.toml").read_text())
    assert config["build"]["entry_point"] == solution.spec.entry_point
    kit_sources = result.kit_dir / "solution" / config["build"]["language"]
    assert {s.path: s.content for s in solution.sources} == {
        p.relative_to(kit_sources).as_posix(): p.read_text() for p in kit_sources.rglob("*") if p.is_file()}
    if meta.language == "cuda":
        assert solution.spec.entry_point == f"kernel.cu::{meta.ffi_function}"
        assert solution.spec.binding.value == "tvm-ffi"
    else:
        assert solution.spec.entry_point == f"{ENTRY_FILE}::run"


def test_a_dataset_with_every_packed_solution_in_its_solutions_folder_loads_in_flashinfer_bench(packed):
    solutions = next(iter(packed.values())).json_path.parent
    assert {p.name for p in solutions.iterdir()} == {f"{name}.json" for name in SOLUTIONS}  # nothing else
    assert {"fla-recurrent", "cuda-v1", "cuda-v4", "cutedsl-bf16"} <= set(SOLUTIONS)  # the issue's, at least
    traces = fib_data.TraceSet.from_path(str(solutions.parent))
    definition = load_definition(OUR_DEFINITION).name
    assert sorted(s.name for s in traces.solutions[definition]) == sorted(SOLUTIONS)
    assert len(traces.workloads[definition]) == 2


def test_a_starter_kit_is_refused_inside_the_json_folder_or_a_datasets_solutions(packed, tmp_path):
    meta, definition = load_meta(SOLUTIONS["fla-recurrent"]), load_definition(OUR_DEFINITION)
    assert list((meta.directory / "launch_tables").glob("*.json"))  # what flashinfer-bench would misread
    dataset_solutions = next(iter(packed.values())).json_path.parent
    for out, kit_root in ((tmp_path / "out", tmp_path / "out"), (tmp_path / "out", tmp_path / "out" / "kits"),
                          (tmp_path / "out", dataset_solutions / "kits")):
        with pytest.raises(HarnessInputError, match="would lie inside .* takes only Solution JSON"):
            pack(meta, definition, out, kit_root)
    assert not (tmp_path / "out").exists() and not (dataset_solutions / "kits").exists()  # nothing written


@pytest.mark.parametrize("what, status", [("solution-json", "PASSED"), ("starter-kits", "SKIPPED")])
def test_run_local_judges_the_packed_forms_as_they_are(packed, what, status, tmp_path):
    """A contestant points --solutions at what pack wrote: it is judged as shipped
    (harness/judge/entries.py). pt-reference's JSON names target_hardware cpu and cuda and runs on
    the CPU; its starter kit, like every kit, is packed for ["cuda"] by the kit's own script. Beside
    the packed JSON, a contest entry as its author shipped it (a value-returning Solution JSON of
    tests/fixtures/contest_entries) is judged in the same run: the README's "Judge a contest entry"."""
    some = next(iter(packed.values()))
    dataset = some.json_path.parent.parent
    folder = some.json_path.parent if what == "solution-json" else some.kit_dir.parent
    expected = {("pt-reference", status)}
    algo = "pt-reference"
    if what == "solution-json":  # a copy of the folder, with the shipped entry beside the packed ones
        folder = Path(shutil.copytree(folder, tmp_path / "solutions"))
        shutil.copy(REPO / "tests" / "fixtures" / "contest_entries" / "entries" / "python-value.json", folder)
        expected.add(("python-value", "PASSED"))
        algo += ",python-value"
    done = subprocess.run([sys.executable, "run_local.py", "--solutions", str(folder), "--algo", algo,
                           "--device", "cpu", "-n", "1", "--budget", "0.2", "--workloads", str(dataset),
                           "--results", str(tmp_path / "r"), "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    runs = tmp_path / "r" / "runs"
    traces = [json.loads(line) for line in next(runs.glob("*/traces.jsonl")).read_text().splitlines()]
    traces += [json.loads(line) for line in next(runs.glob("*/skipped.jsonl")).read_text().splitlines()
               ] if next(runs.glob("*/skipped.jsonl"), None) else []
    assert traces and {(t["solution"], t["evaluation"]["status"]) for t in traces} == expected


def test_the_generated_entry_takes_the_definitions_arguments_in_order(packed):
    source = next(s.content for s in packed["fla-recurrent"].solution.sources if s.path == ENTRY_FILE)
    assert "def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):" in source
    inplace = next(s.content for s in packed["fi-baseline"].solution.sources if s.path == ENTRY_FILE)
    assert "new_state.copy_(state)" in inplace  # an in-place solution gets new_state as its state


@pytest.mark.parametrize("name", PYTHON_FAMILY)
def test_flashinfer_bench_imports_and_signature_checks_the_python_family(packed, fib_definition, name,
                                                                         tmp_path, monkeypatch):
    meta = load_meta(SOLUTIONS[name])
    if meta.missing_packages():
        pytest.skip(f"needs {meta.missing_packages()}")
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path))
    from flashinfer_bench.compile.registry import BuilderRegistry

    runnable = BuilderRegistry.get_instance().build(fib_definition, packed[name].solution)
    assert runnable.metadata.destination_passing_style


def cuda_home_for_tvm_ffi(tmp_path: Path) -> Path:
    """A CUDA_HOME where tvm-ffi's build finds nvcc, the headers and ``lib64/libcudart``: the
    toolkit's own root when it has ``lib64``, else a folder of links to it (some toolkits keep
    the libraries under ``targets/<arch>/lib`` only)."""
    dry = subprocess.run([find_nvcc(), "-dryrun", "-c", "-x", "cu", "/dev/null", "-o", str(tmp_path / "x.o")],
                         capture_output=True, text=True).stderr
    root = Path(re.search(r"^#\$ TOP=(.+)$", dry, re.MULTILINE).group(1)).resolve()
    if (root / "lib64").is_dir():
        return root
    libs = [Path(p) for p in re.findall(r'"-L([^"]+)"', dry) if not p.endswith("stubs")]
    shim = tmp_path / "cuda"
    shim.mkdir()
    for name, target in (("bin", root / "bin"), ("include", root / "include"), ("lib64", libs[0])):
        (shim / name).symlink_to(target)
    return shim


def nvcc_missing() -> str | None:
    try:
        find_nvcc()
    except CompileError as exc:
        return str(exc)
    return None


@pytest.mark.skipif(nvcc_missing() is not None, reason=nvcc_missing() or "")
@pytest.mark.parametrize("name", CUDA)
def test_flashinfer_bench_compiles_the_cuda_solutions(packed, fib_definition, name, tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib"))
    monkeypatch.setenv("CUDA_HOME", str(cuda_home_for_tvm_ffi(tmp_path)))
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")  # one architecture: the test is about the build
    from flashinfer_bench.compile.registry import BuilderRegistry

    runnable = BuilderRegistry.get_instance().build(fib_definition, packed[name].solution)
    assert Path(runnable.metadata.misc["binary"]).is_file()


def test_pack_on_the_command_line_writes_both_forms_apart_and_names_a_bad_solution(tmp_path, capsys):
    from harness.interop.cli import main

    def pack_cli(name, *options):  # in this process (a subprocess each took 1.7 s): (exit code, stderr)
        code = main(["pack", name, "--out", str(tmp_path / "out"), *options])
        return code, capsys.readouterr().err

    assert pack_cli("cutedsl-bf16")[0] == 0
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["cutedsl-bf16.json"]
    assert pack_cli("cutedsl-bf16", "--starter-kit", str(tmp_path / "kits"))[0] == 0
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["cutedsl-bf16.json"]
    assert (tmp_path / "kits" / "cutedsl-bf16" / "config.toml").is_file()
    code, err = pack_cli("cutedsl-bf16", "--starter-kit", str(tmp_path / "out"))
    assert code == 2 and "takes only Solution JSON" in err and not (tmp_path / "out" / "cutedsl-bf16").exists()
    (tmp_path / "out" / "cutedsl-bf16").mkdir()  # a kit an earlier pack wrote beside the JSON
    (tmp_path / "out" / "cutedsl-bf16" / "config.toml").write_text("")
    code, err = pack_cli("cutedsl-bf16")
    assert code == 0 and "earlier pack left beside the JSON" in err
    bad = subprocess.run([sys.executable, "-m", "harness", "pack", "no-such-solution", "--out", str(tmp_path / "out")],
                         cwd=REPO, capture_output=True, text=True)  # once through the real entry: exit 2, no traceback
    assert bad.returncode == 2 and "no solution 'no-such-solution'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_file_that_is_not_text_or_an_out_that_is_a_file_is_named_and_exits_2(tmp_path, capsys):
    """A Solution JSON holds its sources as text: a binary file in the folder is named, not a traceback; so
    is an --out that is a file."""
    from harness.interop.cli import main

    folder = tmp_path / "solutions" / "pt-reference"
    shutil.copytree(REPO / "solutions" / "pt-reference", folder)
    (folder / "table.bin").write_bytes(b"\x00\xff\xfe")
    assert main(["pack", "pt-reference", "--solutions", str(folder.parent), "--out", str(tmp_path / "out")]) == 2
    assert f"{folder / 'table.bin'}: is not UTF-8 text" in capsys.readouterr().err
    (folder / "table.bin").unlink()
    (tmp_path / "a-file").write_text("")
    assert main(["pack", "pt-reference", "--solutions", str(folder.parent), "--out", str(tmp_path / "a-file")]) == 2
    assert "cannot write the output" in (err := capsys.readouterr().err) and str(tmp_path / "a-file") in err
