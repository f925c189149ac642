"""CPU tests of the CUDA solutions' build: no GPU needed.

* The cache key and the nvcc command are checked as pure functions.
* Each ``kernel.cu`` is built for real with the shipped flags (sm_90a and
  sm_100a cubins plus compute_90 PTX, one nvcc run per source), into a
  temporary cache; the test fails if a kernel does not compile or link, or
  if nvcc warns.
* Each solution is loaded as the judge loads it (a private copy, its
  ``sources`` compiled into ``kernel.so`` beside ``main.py``); the library
  its entry module loads exports functions that, called with CPU tensors,
  must refuse them with a clear error: this checks the exported names and
  argument lists without launching anything.

The build tests are skipped, with the reason, when nvcc or apache-tvm-ffi is
missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.judge import build as cuda_build
from harness.judge.build import CompileError

REPO_ROOT = Path(__file__).resolve().parents[2]
CUDA_SOLUTIONS = ("cuda-v1", "cuda-v4")
FLAGS = cuda_build.nvcc_flags()


# ---------------------------------------------------------------- pure functions

def test_cache_key_is_stable():
    sources = {"kernel.cu": "__global__ void f() {}\n"}
    assert cuda_build.cache_key(sources, FLAGS, "nvcc 13.0") == \
        cuda_build.cache_key(dict(sources), list(FLAGS), "nvcc 13.0")


@pytest.mark.parametrize("change", ["source", "file name", "extra header", "flags", "nvcc", "extra"])
def test_cache_key_changes_with_every_input(change):
    sources = {"kernel.cu": "__global__ void f() {}\n"}
    flags, version, extra = list(FLAGS), "nvcc 13.0", ["tvm_ffi=0.1"]
    before = cuda_build.cache_key(sources, flags, version, extra)
    if change == "source":
        sources = {"kernel.cu": "__global__ void f() { }\n"}
    elif change == "file name":
        sources = {"kernel2.cu": sources["kernel.cu"]}
    elif change == "extra header":
        sources = {**sources, "helpers.cuh": "#pragma once\n"}
    elif change == "flags":
        flags = flags + ["--use_fast_math"]
    elif change == "nvcc":
        version = "nvcc 13.1"
    else:
        extra = ["tvm_ffi=0.2"]
    assert cuda_build.cache_key(sources, flags, version, extra) != before


def test_cache_key_fields_do_not_run_together():
    # "ab" + "c" and "a" + "bc" must not collide.
    assert cuda_build.cache_key({"k.cu": "ab"}, ["c"], "v") != \
        cuda_build.cache_key({"k.cu": "a"}, ["bc"], "v")


def test_cache_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))
    assert cuda_build.cache_root() == tmp_path / "cuda"


def test_nvcc_command_targets_hopper_and_blackwell():
    cmd = cuda_build.nvcc_command("nvcc", ["kernel.cu"], "kernel.so", lib_dir="/lib/ffi")
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd
    assert "-gencode=arch=compute_100a,code=sm_100a" in cmd
    assert any(flag.endswith("code=compute_90") for flag in cmd), "portable PTX for newer GPUs"
    assert "--use_fast_math" not in cmd and "-O3" in cmd
    assert "-shared" in cmd and "-ltvm_ffi" in cmd
    obj = cuda_build.nvcc_command("nvcc", ["kernel.cu"], "kernel.o", mode="object")
    assert "-c" in obj and "-shared" not in obj
    cubin = cuda_build.nvcc_command("nvcc", ["kernel.cu"], "kernel.cubin", mode="cubin")
    assert "-cubin" in cubin and "-c" not in cubin and "-shared" not in cubin


def test_missing_nvcc_is_a_clear_compile_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cuda_build, "FALLBACK_CUDA_HOME", str(tmp_path))
    with pytest.raises(CompileError, match="nvcc"):
        cuda_build.find_nvcc()


# ---------------------------------------------------------------- real builds

def _toolchain_missing() -> str | None:
    """Why the build tests cannot run here, or None."""
    try:
        cuda_build.find_nvcc()
    except CompileError as exc:
        return str(exc)
    try:
        cuda_build.tvm_ffi_paths()
    except CompileError as exc:
        return str(exc)
    return None


needs_toolchain = pytest.mark.skipif(_toolchain_missing() is not None,
                                     reason=_toolchain_missing() or "")


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory):
    """The GDN_BENCH_CACHE of the build tests of this module, where nvcc really builds: the one
    this test session made, shared by the xdist workers and by later tests loading a CUDA solution
    (e.g. tests/tools/test_model_check.py), so that each solution is compiled once per session
    (the builder's lock makes a second worker wait for the first's build, then hit it). Only the
    real builder writes there: tests that fake a build use caches of their own. Where the user
    named a cache (GDN_BENCH_CACHE set before the session), a private one."""
    from conftest import SESSION_CACHE

    if SESSION_CACHE is not None:
        yield SESSION_CACHE
        return
    path = tmp_path_factory.mktemp("gdn-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("GDN_BENCH_CACHE", str(path))
    yield path
    patch.undo()
    shutil.rmtree(path, ignore_errors=True)


@needs_toolchain
@pytest.mark.parametrize("solution", CUDA_SOLUTIONS)
def test_kernel_builds_for_sm90a_and_sm100a(solution, build_cache):
    library = cuda_build.build_solution(REPO_ROOT / "solutions" / solution)
    assert library.is_file()
    assert library.parent.parent == build_cache / "cuda"
    assert library.parent.name.startswith(f"{solution}-")
    log = json.loads((library.parent / "build.json").read_text())["log"]
    assert "warning" not in log.lower(), f"nvcc warned building {solution}:\n{log}"


@needs_toolchain
@pytest.mark.parametrize("solution", CUDA_SOLUTIONS)
def test_second_build_is_a_cache_hit(solution, build_cache, monkeypatch):
    first = cuda_build.build_solution(REPO_ROOT / "solutions" / solution)

    def no_compiling(*args, **kwargs):
        raise AssertionError("nvcc ran although the cache holds the library")

    monkeypatch.setattr(cuda_build, "_run_nvcc", no_compiling)
    assert cuda_build.build_solution(REPO_ROOT / "solutions" / solution) == first


def cpu_arguments(torch, batch: int = 2) -> tuple:
    """The positional DPS arguments (definition order, zeros) on the CPU, which a kernel refuses."""
    bf16, f32 = torch.bfloat16, torch.float32
    return (
        torch.zeros(batch, 1, 4, 128, dtype=bf16), torch.zeros(batch, 1, 4, 128, dtype=bf16),
        torch.zeros(batch, 1, 8, 128, dtype=bf16), torch.zeros(batch, 8, 128, 128, dtype=f32),
        torch.zeros(8, dtype=f32), torch.zeros(batch, 1, 8, dtype=bf16),
        torch.zeros(8, dtype=f32), torch.zeros(batch, 1, 8, dtype=bf16), 0.0,
        torch.zeros(batch, 1, 8, 128, dtype=bf16), torch.zeros(batch, 8, 128, 128, dtype=f32),
    )


@needs_toolchain
@pytest.mark.parametrize("solution", CUDA_SOLUTIONS)
def test_the_judge_calls_the_function_the_packed_submission_names(solution, build_cache, tmp_path):
    """The entry the judge calls a CUDA solution through (harness/judge/dps.py) is the TVM-FFI
    function ``ffi_function`` of the harness's build, what the contest's builder calls; the
    solution's own main.py is not imported."""
    torch = pytest.importorskip("torch")
    import sys

    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition
    from harness.judge import dps
    from harness.judge.solutions import load_meta

    meta = load_meta(REPO_ROOT / "solutions" / solution)
    run = dps.load_entry(meta, load_definition(OUR_DEFINITION), tmp_path)
    assert f"{meta.package_name}.{meta.entry_module}" not in sys.modules
    assert type(run).__name__ == "Function" and meta.ffi_function == "gdn_decode"
    with pytest.raises(ValueError, match="must be on cuda"):
        run(*cpu_arguments(torch))


@needs_toolchain
@pytest.mark.parametrize("solution, functions", [
    ("cuda-v1", {"gdn_decode": ()}),
    ("cuda-v4", {"gdn_decode": (), "gdn_decode_config": (1, 0, 32, 8, 1, 0)}),
])
def test_module_exports_and_refuses_cpu_tensors(solution, functions, build_cache, tmp_path):
    torch = pytest.importorskip("torch")
    import tvm_ffi

    from harness.judge.solutions import load_meta, load_solution

    meta = load_meta(REPO_ROOT / "solutions" / solution)
    assert meta.sources == ("kernel.cu",)
    entry = load_solution(meta, workdir=tmp_path)
    assert entry.LIBRARY.is_file() and tmp_path in entry.LIBRARY.parents  # kernel.so beside the copy's main.py
    assert callable(entry.load())  # main.py's own loading of kernel.so (at import on a GPU machine)
    module = tvm_ffi.load_module(str(entry.LIBRARY))
    args = cpu_arguments(torch)
    for name, extra in functions.items():
        with pytest.raises(ValueError, match="must be on cuda"):
            getattr(module, name)(*args, *extra)
    if solution == "cuda-v4":  # a shape kernel.cu does not instantiate, refused before any launch
        with pytest.raises(ValueError, match="multiple of that, not 1"):
            module.gdn_decode_config(*args, 1, 0, 16, 8, 1, 0)
        with pytest.raises(ValueError, match="lanes_per_row must be 32, 16 or 8, not 4"):
            module.gdn_decode_config(*args, 8, 0, 4, 8, 1, 0)
        with pytest.raises(ValueError, match="cache_policy must be"):
            module.gdn_decode_config(*args, 8, 4, 32, 8, 1, 0)
        with pytest.raises(ValueError, match="warps_per_block must be 8, 4, 2 or 1, not 16"):
            module.gdn_decode_config(*args, 8, 1, 32, 16, 1, 0)
        with pytest.raises(ValueError, match="passes must be 1, or 2 where a lane holds 2 or more rows"):
            module.gdn_decode_config(*args, 8, 1, 16, 8, 3, 0)
        with pytest.raises(ValueError, match="not 2 with 1 rows per lane"):  # 2 rows over 2 lane groups
            module.gdn_decode_config(*args, 2, 1, 16, 8, 2, 0)
        with pytest.raises(ValueError, match="must be on cuda"):  # 4 rows over 2 lane groups: 2 a lane, valid
            module.gdn_decode_config(*args, 4, 1, 16, 8, 2, 0)
        with pytest.raises(ValueError, match="staged must be 0, or 1 with two passes"):  # nothing to stage
            module.gdn_decode_config(*args, 4, 1, 16, 8, 1, 1)
        with pytest.raises(ValueError, match="staged rows need a bf16 state"):  # args' state is fp32
            module.gdn_decode_config(*args, 4, 1, 16, 8, 2, 1)
        bf16_state = list(args)
        bf16_state[3] = bf16_state[10] = torch.zeros(2, 8, 128, 128, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="must be on cuda"):  # a bf16 state's two passes may stage
            module.gdn_decode_config(*bf16_state, 4, 1, 16, 8, 2, 1)
        # main.py reads the choice from the module: a GPU's table by its exact name, else the
        # default model at its bandwidth (host code: no GPU needed)
        from tools.tune.cuda_v4 import bf16_gpu_tables, gpu_tables

        tables = gpu_tables(REPO_ROOT / "solutions" / "cuda-v4")
        assert set(entry.table_devices()) == set(tables)
        for device, table in tables.items():
            for batch in range(1, 1025):
                expected = next(config for limit, config in table if limit is None or batch <= limit)
                assert tuple(entry.launch_config_for(device, 3.352e12, batch)) == expected, (device, batch)
        # a GPU without a table: rho = B x 512 KiB / (8 TB/s x 0.9 us) = 0.0728 B, the ladder's rungs
        # from rho 0.5, 1, 2, ... at B = 7, 14, 28, 55, 110, 220, 440, 879 (docs/tuning.md)
        b200 = {b: tuple(entry.launch_config_for("NVIDIA B200", 8e12, b))
                for b in (1, 6, 7, 14, 27, 28, 55, 110, 220, 440, 878, 879)}
        rungs = {1: (4, "noalloc", 16, 2, 1), 6: (4, "noalloc", 16, 2, 1), 7: (4, "plain", 16, 4, 1),
                 14: (4, "noalloc", 16, 2, 1), 27: (4, "noalloc", 16, 2, 1), 28: (16, "noalloc", 8, 1, 1),
                 55: (16, "noalloc", 8, 2, 1), 110: (8, "plain", 16, 2, 1), 220: (8, "nc", 16, 2, 1),
                 440: (16, "plain", 16, 2, 1), 878: (16, "plain", 16, 2, 1), 879: (16, "plain", 16, 4, 1)}
        assert b200 == {batch: (*rung, False) for batch, rung in rungs.items()}  # the fp32 ladder stages nothing
        assert entry.launch_config_for("NVIDIA H100 80GB HBM3 ", 3.352e12, 2) == (4, "noalloc", 16, 2, 1, False)  # not its name
        # a bf16 state: a GPU's bf16 table where its file has one, else its fp32 entry of ceil(B / 2)
        # (as many state bytes)
        bf16_tables = bf16_gpu_tables(REPO_ROOT / "solutions" / "cuda-v4")
        for device, table in tables.items():
            own = bf16_tables.get(device)
            for batch in (1, 2, 3, 64, 129, 1024):
                looked_up = batch if own else (batch + 1) // 2
                expected = next(config for limit, config in own or table if limit is None or looked_up <= limit)
                assert tuple(entry.launch_config_for(device, 3.352e12, batch, "bfloat16")) == expected, (device, batch)
        # a bf16 state without a table: its own ladder, rho = B x 256 KiB / (8 TB/s x 0.9 us) = 0.0364 B,
        # the rungs from rho 0.5, 1, 2, 8, 32 at B = 14, 28, 55, 220, 879; the one from 2 stages its rows
        b200_bf16 = {b: tuple(entry.launch_config_for("NVIDIA B200", 8e12, b, "bfloat16"))
                     for b in (1, 13, 14, 28, 54, 55, 219, 220, 878, 879)}
        bf16_rungs = {1: (4, "plain", 16, 4, 1, False), 13: (4, "plain", 16, 4, 1, False),
                      14: (4, "noalloc", 32, 8, 1, False), 28: (8, "stream", 32, 4, 2, False),
                      54: (8, "stream", 32, 4, 2, False), 55: (16, "noalloc", 16, 1, 2, True),
                      219: (16, "noalloc", 16, 1, 2, True), 220: (8, "plain", 32, 8, 2, False),
                      878: (8, "plain", 32, 8, 2, False), 879: (8, "nc", 32, 8, 1, False)}
        assert b200_bf16 == bf16_rungs
        if not torch.cuda.is_available():
            with pytest.raises(RuntimeError):
                entry.launch_source()  # the current device's choice needs one


def test_ptxas_report_is_parsed_per_kernel():
    log = """ptxas info    : Compiling entry function '_Z1fv' for 'sm_90a'
ptxas info    : Function properties for _Z1fv
    0 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 380 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1gv' for 'sm_90a'
ptxas info    : Function properties for _Z1gv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 0 barriers, 380 bytes cmem[0]
"""
    assert cuda_build.parse_ptxas_report(log) == {
        "_Z1fv": cuda_build.KernelResources(64, 16, 12), "_Z1gv": cuda_build.KernelResources(28, 0, 0)}
    with pytest.raises(ValueError, match="no complete ptxas resource report"):
        cuda_build.parse_ptxas_report(log.rsplit("ptxas info    : Used", 1)[0])


def test_cuda_v4_variants_never_spill_and_keep_32_warps_per_sm_where_bounded(cuda_v4_all_variants):
    """kernel.cu's kMinBlocksPerSm asks ptxas for 32 resident warps (64 registers)
    where a warp's state rows and q/k pieces fit in 48 registers; nothing may spill."""
    shapes = cuda_v4_all_variants  # (warps, rows, policy, lanes, passes, staged) -> registers and spills, the tuner's build
    # warps x policies x (rows, lanes) pairs in one pass, and in two those whose lanes hold 2+ rows
    assert len(shapes) == 4 * 4 * ((5 + 4 + 3) + (4 + 3 + 2))
    assert all(used.spill_store_bytes == used.spill_load_bytes == 0 for used in shapes.values())
    bounded = [shape for shape in shapes if 4 * shape[1] + 256 // shape[3] <= 48]
    assert (1, 8, 1, 32, 1, 0) in bounded and (1, 8, 1, 8, 1, 0) not in bounded
    assert not any(shape[5] for shape in shapes)  # an fp32 state never stages
    assert all(shapes[shape].registers <= 64 for shape in bounded)


@needs_toolchain
def test_cuda_v4_staged_variants_hold_half_the_rows_in_registers(tmp_path):
    """STAGED (kernel.cu's "Staged rows", issue #33) keeps only the first pass's rows in registers:
    a bf16 table's staged variants of 16 rows a warp take at most 96 registers (unstaged: 99-126),
    those kMinBlocksPerSm bounds (its rule below) fit 64, nothing spills, and the fp32 state's
    kernels of the same build are never staged. The build is a copy of cuda-v4 with a test table
    naming them (a build compiles only its tables' variants)."""
    import re

    from tools.tune import cuda_v4 as tune
    from tools.tune.table_files import PROVENANCE_FIELDS

    folder = tmp_path / "cuda-v4"
    shutil.copytree(REPO_ROOT / "solutions" / "cuda-v4", folder)
    staged = [(16, "stream", lanes, warps, 2, True) for lanes in (32, 16, 8) for warps in (1, 4)]
    bf16_table = [[limit, config] for limit, config in zip([*range(1, len(staged)), None], staged)]
    origin = {field: "test" for field in PROVENANCE_FIELDS} | {"device": "Test GPU"}
    name = tune.table_file_name("Test GPU")
    (folder / name).write_text(tune.table_header(origin, [[None, (4, "nc", 16, 2, 1, False)]], bf16_table))
    (folder / tune.INDEX).write_text(tune.with_file((folder / tune.INDEX).read_text(), name))
    report = cuda_build.kernel_resources(folder / "kernel.cu")
    found = {tuple(map(int, match.groups())): used for kernel, used in report.items()
             if (match := re.search(tune.KERNEL_NAME_BF16, kernel)) and match.group(6) == "1"}
    tested = {(warps, rows, 0, lanes, passes, 1) for rows, _, lanes, warps, passes, _ in staged}  # 0: kStream
    assert tested <= found.keys()  # and the shipped tables' staged variants, checked alike
    bounded = lambda warps, rows, lanes: 4 * rows // 2 + (warps > 1) + 256 // lanes <= 48  # noqa: E731
    assert sum(bounded(warps, rows, lanes) for warps, rows, _, lanes, _, _ in tested) == 3  # l32 w1 and w4, l16 w1
    for (warps, rows, _, lanes, _, _), used in found.items():
        assert used.spill_store_bytes == used.spill_load_bytes == 0
        assert used.registers <= (64 if bounded(warps, rows, lanes) else 96), (warps, rows, lanes, used)
    assert not any((match := re.search(tune.KERNEL_NAME, kernel)) and match.group(6) == "1" for kernel in report)


def test_compile_error_carries_the_nvcc_log(tmp_path):
    if _toolchain_missing():
        pytest.skip(_toolchain_missing())
    broken = tmp_path / "broken.cu"
    broken.write_text("__global__ void f() { this is not cuda }\n")
    with pytest.raises(CompileError, match="broken.cu"):
        cuda_build.compile_only(broken, tmp_path, targets=[("compute_90a", "sm_90a")])
