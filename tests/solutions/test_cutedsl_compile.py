"""CPU tests of the cutedsl-bf16 solution: metadata, launch heuristics, and
compilation to sm_90a without a GPU (the CuTe DSL compiles fake tensors all
the way to a cubin on the CPU; only *running* needs a GPU).

The PTX checks pin the design's invariants (one 16-byte cp.async, one
128-bit shared load and one 128-bit global store per owned row, one commit
group per stage, no CTA barrier, the expected number of warp shuffles), which
is what broke once already: a ``(1, vec)`` tile turned each row copy into
``vec`` overlapping 16-byte copies.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from harness.judge.solutions import load_meta

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "cutedsl-bf16"
HAVE_CUTLASS = importlib.util.find_spec("cutlass") is not None
needs_cutlass = pytest.mark.skipif(not HAVE_CUTLASS, reason="nvidia-cutlass-dsl (module 'cutlass') not installed")


@pytest.fixture(scope="module")
def solution_module(tmp_path_factory):
    """The solution's entry module, loaded the way the harness loads it (a
    private copy of the folder, imported as a package)."""
    if not HAVE_CUTLASS:
        pytest.skip("nvidia-cutlass-dsl (module 'cutlass') not installed")
    from harness.judge.solutions import load_solution

    return load_solution(load_meta(SOLUTION), workdir=tmp_path_factory.mktemp("cutedsl"))


@pytest.fixture(scope="module")
def build(solution_module):
    """The solution's build module (gdn_cute_build), the sibling its entry imports."""
    return solution_module.build


def test_metadata():
    meta = load_meta(SOLUTION)
    assert meta.language == "cutedsl" and meta.gpu_only and not meta.inplace_state
    assert meta.state_dtypes == ("float32", "bfloat16")
    assert "cutlass" in meta.packages and "tvm_ffi" in meta.packages


def test_bf16_state_tolerance_is_the_derived_one():
    """The harness's, no longer the solution's (docs/bf16-state-tolerance.md)."""
    from harness.facts import STATE_DTYPE_TOLERANCES

    tol = STATE_DTYPE_TOLERANCES["bfloat16"]
    assert tol.rtol == 2.0**-5 and tol.atol == 0.75


@needs_cutlass
def test_tile_heuristic(build):
    """Small batches get short tiles (more CTAs), large batches tall ones."""
    choose = lambda batch, dtype: build.choose_tile_v(batch, 8, 128, 128, dtype, num_sms=132)  # noqa: E731
    assert choose(1, torch.float32) == 8
    assert choose(64, torch.float32) == 64
    assert choose(1, torch.bfloat16) == 8
    tiles = [choose(b, torch.float32) for b in (1, 2, 4, 8, 16, 32, 64, 512)]
    assert tiles == sorted(tiles)
    for dtype in (torch.float32, torch.bfloat16):
        for b in (1, 4, 64):
            tile = choose(b, dtype)
            assert tile % build.row_groups(128, dtype) == 0 and 128 % tile == 0


@needs_cutlass
def test_lanes_and_groups(build):
    assert build.lanes_per_row(128, torch.float32) == 32 and build.row_groups(128, torch.float32) == 4
    assert build.lanes_per_row(128, torch.bfloat16) == 16 and build.row_groups(128, torch.bfloat16) == 8


@needs_cutlass
@pytest.mark.parametrize("args, match", [
    ((4, 6, 128, 128, torch.float32), "multiple of H"),
    ((4, 8, 96, 128, torch.float32), "power-of-two"),
    ((4, 8, 128, 128, torch.float16), "state dtype"),
    ((4, 8, 128, 100, torch.float32), "tile height"),
])
def test_validate_shapes_rejects(build, args, match):
    with pytest.raises(ValueError, match=match):
        build.validate_shapes(*args)


@needs_cutlass
def test_cache_key_covers_shape_parameters(build):
    """Every codegen parameter is a field of the key (the reviewed FlashInfer
    kernel keyed on (T, B) only); the batch size is dynamic, not keyed."""
    key_fields = set(build.KernelKey.__dataclass_fields__)
    assert "config" in key_fields  # the launch configuration is keyed whole, every field of it
    fields = key_fields - {"config"} | set(build.LaunchConfig._fields)
    assert {"state_dtype", "num_q_heads", "num_v_heads", "head_k", "head_v", "tile_v", "rows_per_stage",
            "arch", "load", "streaming", "parts", "reg_rows"} == fields


@needs_cutlass
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])  # the H100/H200, and the contest's B200
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tile", [8, 64])
def test_compiles_for_hopper_and_blackwell(build, dtype, tile, arch):
    key = build.KernelKey(dtype, 4, 8, 128, 128, build.LaunchConfig(tile, build.rows_per_stage(tile, 128, dtype)), arch)
    compiled = build.compile_kernel(key)
    assert compiled is not None
    assert build.compile_kernel(key) is compiled  # cached


_PTX_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    from harness.judge.solutions import load_meta, load_solution
    build = load_solution(load_meta(sys.argv[1]), workdir=sys.argv[2]).build
    out = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        for tile in (8, 32, 64):
            for load, streaming, parts in (("smem", False, 1), ("regs", True, 1), ("regs", False, 2)):
                if tile not in build.valid_tiles(128, 128, dtype, parts):
                    continue
                rps = build.rows_per_stage(tile, 128, dtype, parts)
                key = build.KernelKey(dtype, 4, 8, 128, 128, build.LaunchConfig(tile, rps, load, streaming, parts), "sm_90a")
                ptx = build.compile_kernel(key).artifacts.PTX  # the text, or the path of a dump
                out[f"{name}-{tile}-{load}-p{parts}"] = ptx if chr(10) in ptx else open(ptx).read()
        tile = 128 if dtype == torch.bfloat16 else 32  # mixed path: 4 of a thread's rows in registers
        key = build.KernelKey(dtype, 4, 8, 128, 128, build.LaunchConfig(tile, 2, "mixed", False, 1, 4), "sm_90a")
        ptx = build.compile_kernel(key).artifacts.PTX
        out[f"{name}-{tile}-mixed4"] = ptx if chr(10) in ptx else open(ptx).read()
    json.dump(out, sys.stdout)
""")


@pytest.fixture(scope="module")
def ptx_texts(tmp_path_factory):
    """PTX of the kernel variants the invariant tests read, compiled in a fresh process (PTX dumping is set
    by environment variables read when the DSL starts)."""
    if not HAVE_CUTLASS:
        pytest.skip("nvidia-cutlass-dsl (module 'cutlass') not installed")
    dump = tmp_path_factory.mktemp("ptx")
    env = dict(os.environ, CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump), CUTE_DSL_DISABLE_FILE_CACHING="1",
               CUTE_DSL_NO_CACHE="1")
    copy = tmp_path_factory.mktemp("copy")  # where the harness's loader puts the solution's copy
    proc = subprocess.run([sys.executable, "-c", _PTX_SCRIPT, str(SOLUTION), str(copy)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


_VARIANTS = [f"{dtype}-{tile}" for dtype in ("float32", "bfloat16") for tile in (8, 32, 64)]


def _rows_per_thread(variant: str) -> tuple[int, int]:
    """(rows each thread owns, lanes per row) of a ``dtype-tile`` variant."""
    name, tile = variant.split("-")
    lanes = 32 if name == "float32" else 16
    return int(tile) // (128 // lanes), lanes


@needs_cutlass
@pytest.mark.parametrize("variant", _VARIANTS)
def test_ptx_invariants_smem_path(ptx_texts, variant):
    rows, lanes = _rows_per_thread(variant)
    stages = rows // min(rows, 4)
    ptx = ptx_texts[f"{variant}-smem-p1"]
    copies = [line for line in ptx.splitlines() if "cp.async.cg.shared.global" in line]
    assert len(copies) == rows and all(line.rstrip().endswith("16, 16;") for line in copies)
    assert ptx.count("cp.async.commit_group") == stages
    assert ptx.count("cp.async.wait_group") == stages
    assert ptx.count("ld.shared.v4.b32") == rows
    assert ptx.count("st.global.v4.b32") == rows  # write-back policy: no .cs
    assert "bar.sync" not in ptx and "barrier.sync" not in ptx
    assert ptx.count("shfl.sync.bfly") == (2 * rows + 1) * int(math.log2(lanes))


@needs_cutlass
@pytest.mark.parametrize("variant", [v for v in _VARIANTS if v != "bfloat16-8"])
def test_ptx_invariants_two_parts_per_lane(ptx_texts, variant):
    """Two 16-byte pieces per lane and row: half the lanes per row, twice the
    rows per CTA at once, so a thread owns half the rows, each with two
    loads and stores, and every reduction has one butterfly step less."""
    rows, lanes = _rows_per_thread(variant)
    rows, lanes = rows // 2, lanes // 2
    ptx = ptx_texts[f"{variant}-regs-p2"]
    state_loads = [line for line in ptx.splitlines() if "ld.global.v4.b32" in line]
    assert len(state_loads) >= 2 * rows  # the state's, plus (bf16) q and k's 16-byte pieces
    assert ptx.count("st.global.v4.b32") == 2 * rows
    assert "cp.async" not in ptx and "ld.shared" not in ptx
    assert ptx.count("shfl.sync.bfly") == (2 * rows + 1) * int(math.log2(lanes))
    assert ptx.count("cvt.rn.bf16") >= rows  # bf16 output rounding (and bf16 state stores)


@needs_cutlass
@pytest.mark.parametrize("variant", _VARIANTS)
def test_ptx_invariants_regs_streaming_path(ptx_texts, variant):
    """Registers instead of shared memory: one 128-bit evict-first load and
    store per row, no cp.async, no shared memory traffic, no barrier."""
    rows, lanes = _rows_per_thread(variant)
    ptx = ptx_texts[f"{variant}-regs-p1"]
    assert ptx.count("ld.global.cs.v4.b32") == rows
    assert ptx.count("st.global.cs.v4.b32") == rows
    assert "cp.async" not in ptx and "ld.shared" not in ptx
    assert "bar.sync" not in ptx and "barrier.sync" not in ptx
    assert ptx.count("shfl.sync.bfly") == (2 * rows + 1) * int(math.log2(lanes))


@needs_cutlass
@pytest.mark.parametrize("variant, rows, lanes", [("float32-32-mixed4", 8, 32), ("bfloat16-128-mixed4", 16, 16)])
def test_ptx_invariants_mixed_path(ptx_texts, variant, rows, lanes):
    """The first 4 of a thread's rows by ld.global into registers, the rest by
    cp.async through shared memory (one commit group per 2-row stage), and
    the kernel compiled for 8 resident CTAs per SM."""
    smem_rows = rows - 4
    ptx = ptx_texts[variant]
    copies = [line for line in ptx.splitlines() if "cp.async.cg.shared.global" in line]
    assert len(copies) == smem_rows
    assert ptx.count("ld.shared.v4.b32") == smem_rows
    assert ptx.count("cp.async.commit_group") == ptx.count("cp.async.wait_group") == smem_rows // 2
    state_loads = ptx.count("ld.global.v4.b32")  # bf16: q and k are 16-byte loads too
    assert state_loads == 4 + (2 if variant.startswith("bfloat16") else 0)
    assert ptx.count("st.global.v4.b32") == rows
    assert "bar.sync" not in ptx and "barrier.sync" not in ptx
    assert ptx.count("shfl.sync.bfly") == (2 * rows + 1) * int(math.log2(lanes))
    assert ".minnctapersm 8" in ptx


@needs_cutlass
def test_mixed_path_occupancy_bound_follows_shared_memory(build):
    """bf16 tile 128: 12 rows of 8 groups x 256 B = 24 KiB in shared memory
    leaves room for 9 CTAs, capped at 8; with 2 register rows, 28 KiB: 7."""
    mixed = lambda reg_rows: build.LaunchConfig(128, 2, "mixed", False, 1, reg_rows)  # noqa: E731
    assert build.mixed_smem_bytes(mixed(4), 128, torch.bfloat16) == 24 * 1024
    assert build.min_ctas_per_sm(mixed(4), 128, torch.bfloat16) == 8
    assert build.min_ctas_per_sm(mixed(2), 128, torch.bfloat16) == 7
    assert build.min_ctas_per_sm(build.LaunchConfig(128, 2, "regs"), 128, torch.bfloat16) == 0


@needs_cutlass
@pytest.mark.parametrize("reg_rows, load, match", [(16, "mixed", "reg_rows=16"), (3, "mixed", "reg_rows=3"),
                                                   (4, "regs", "only for the mixed")])
def test_compile_refuses_invalid_register_rows(build, reg_rows, load, match):
    """bf16 tile 128: a thread owns 16 rows; all 16 in registers is the regs
    path, 3 is not a multiple of the 2-row stage."""
    key = build.KernelKey(torch.bfloat16, 4, 8, 128, 128, build.LaunchConfig(128, 2, load, False, 1, reg_rows), "sm_90a")
    with pytest.raises(ValueError, match=match):
        build.compile_kernel(key)


def _cpu_inputs(state_dtype, batch=3):
    return {"q": torch.zeros(batch, 1, 4, 128, dtype=torch.bfloat16), "v": torch.zeros(batch, 1, 8, 128),
            "state": torch.zeros(batch, 8, 128, 128, dtype=state_dtype),
            "new_state": torch.zeros(batch, 8, 128, 128, dtype=state_dtype)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_key_from_inputs(solution_module, dtype):
    key = solution_module.kernel_key(_cpu_inputs(dtype), (16, 2))
    assert (key.state_dtype, key.num_q_heads, key.num_v_heads, key.head_k, key.head_v, key.config.tile_v) == \
        (dtype, 4, 8, 128, 128, 16)


def test_kernel_key_rejects_mixed_state_dtypes(solution_module):
    inputs = _cpu_inputs(torch.float32)
    inputs["new_state"] = inputs["new_state"].bfloat16()
    with pytest.raises(ValueError, match="dtype"):
        solution_module.kernel_key(inputs, (16, 2))


@needs_cutlass
def test_valid_configs_cover_every_tile_and_divide_the_rows(build):
    for dtype in (torch.float32, torch.bfloat16):
        configs = build.valid_configs(128, 128, dtype)
        assert {config.tile_v for config in configs} == set(build.valid_tiles(128, 128, dtype))
        for config in configs:
            assert (config.tile_v // build.row_groups(128, dtype)) % config.rows_per_stage == 0
            assert config.load != "regs" or build.fits_registers(config.tile_v, 128, dtype)
            if config.load == "mixed":
                assert 0 < config.reg_rows < build.rows_per_thread(config.tile_v, 128, dtype, config.parts)
                assert config.reg_rows % config.rows_per_stage == 0 and config.name.split("/")[2].startswith("mix")
            else:
                assert config.reg_rows == 0
            assert build.LaunchConfig.from_name(config.name) == config
        assert len({config.name for config in configs}) == len(configs)
    # fp32 tile 128 holds 512 B per thread: shared memory only (and not even that: 64 KiB > 48 KiB)
    assert not build.fits_registers(128, 128, torch.float32) and build.fits_registers(128, 128, torch.bfloat16)


@needs_cutlass
def test_kernel_key_round_trips_every_launch_config(build):
    for dtype in (torch.float32, torch.bfloat16):
        for config in build.valid_configs(128, 128, dtype):
            key = build.KernelKey(dtype, 4, 8, 128, 128, config, "sm_90a")
            assert key.config == config and (key.state_dtype, key.arch) == (dtype, "sm_90a")


@needs_cutlass
def test_regs_path_refuses_a_tile_too_big_for_registers(build, monkeypatch):
    monkeypatch.setattr(build, "MAX_REG_TILE_BYTES_PER_THREAD", 128)  # fp32 tile 64: 256 B a thread
    key = build.KernelKey(torch.float32, 4, 8, 128, 128, build.LaunchConfig(64, 4, "regs", False), "sm_90a")
    with pytest.raises(ValueError, match="registers"):
        build.compile_kernel(key)


@needs_cutlass
@pytest.mark.parametrize("tile, stage_rows, parts, match", [
    (128, 1, 1, "tile_v=128"), (8, 1, 2, "tile_v=8"), (32, 1, 4, "parts=4"), (8, 2, 2, "rows_per_stage=2")])
def test_compile_refuses_invalid_tile_parts_or_stage(build, tile, stage_rows, parts, match):
    """fp32 tile 128 needs 64 KiB of shared memory; with 2 parts a bf16 row
    group is 8 lanes, so 16 groups need a tile of at least 16 rows; an fp32
    8-row tile in 2 parts leaves each thread 1 row (a 2-row stage would
    compile to a kernel that does nothing)."""
    dtype = torch.bfloat16 if (tile, stage_rows) == (8, 1) else torch.float32
    key = build.KernelKey(dtype, 4, 8, 128, 128, build.LaunchConfig(tile, stage_rows, "smem", False, parts), "sm_90a")
    with pytest.raises(ValueError, match=match):
        build.compile_kernel(key)


@needs_cutlass
def test_the_gpus_table_wins_over_the_heuristic_for_the_tuned_shape(build, monkeypatch):
    table = ((4, build.LaunchConfig(8, 1)), (None, build.LaunchConfig(32, 2, "regs", True)))
    monkeypatch.setattr(build, "LAUNCH_TABLES", {"GPU A": {torch.float32: table}})
    gpu_a = build.select("GPU A", 3.352e12)
    choose = lambda batch, shape=(4, 8, 128, 128): build.choose_config(batch, *shape, torch.float32, 132, gpu_a)  # noqa: E731
    assert choose(1) == choose(4) == (8, 1, "smem", False, 1, 0) and choose(512) == (32, 2, "regs", True, 1, 0)
    assert gpu_a.source(torch.float32) == "table GPU A"
    # another shape falls back to the heuristic; a dtype the table lacks to the default model
    tile = build.choose_tile_v(512, 16, 128, 128, torch.float32, 132)
    assert choose(512, (4, 16, 128, 128)) == (tile, build.rows_per_stage(tile, 128, torch.float32), "smem", False, 1,
                                              0)
    assert build.choose_config(1, 4, 8, 128, 128, torch.bfloat16, 132, gpu_a) == build.LaunchConfig(16, 2, "regs", True)
    assert gpu_a.source(torch.bfloat16) == "default model (3352 GB/s)"


@needs_cutlass
def test_a_gpu_without_a_table_gets_the_default_model(build):
    b200 = build.select("NVIDIA B200", 8e12)
    assert b200.tables == {} and b200.source(torch.float32) == "default model (8000 GB/s)"
    # rho = B x 512 KiB / (8 TB/s x 0.9 us) = 0.0728 B (fp32), half that for bf16: the rungs of
    # 0.5, 1, 2, ... start at B = 7, 14, 28, ... (fp32) and 14, 28, 55, ... (bf16)
    fp32 = {b: b200.config(b, torch.float32).name for b in (1, 6, 7, 13, 14, 55, 879)}
    assert fp32 == {1: "t16/s1/regs/cs/p2", 6: "t16/s1/regs/cs/p2", 7: "t16/s1/mix1/p2", 13: "t16/s1/mix1/p2",
                    14: "t16/s1/mix1/cs/p2", 55: "t32/s2/mix2/cs/p2", 879: "t32/s4/p2"}
    assert [b200.config(b, torch.bfloat16).name for b in (1, 13, 14, 55, 220, 879)] == [
        "t16/s2/regs/cs", "t16/s2/regs/cs", "t16/s1/regs/cs", "t64/s4/regs/cs/p2", "t128/s4/mix4/cs", "t64/s2"]


@needs_cutlass
@pytest.mark.parametrize("device, report", [
    ("NVIDIA H100 80GB HBM3", "results/tuning/20261126-H100-fast-gates/cutedsl-bf16/NVIDIA-H100-80GB-HBM3.json"),
    ("NVIDIA H200", "results/tuning/20261126-H200-fast-gates/cutedsl-bf16/NVIDIA-H200.json"),
])
def test_each_gpus_tables_are_its_reports_choice(build, device, report):
    """Installed from its report (python -m tools.tune.install): the tuner's own rule over the
    report's rows gives each state dtype's table, and the file cites that report."""
    import json

    from harness.paths import REPO_ROOT
    from harness.records.store import read_stored
    from tools.tune.driver import chosen_table
    from tools.tune.table_files import table_stem

    data = json.loads((build.TABLES_DIR / f"{table_stem(device)}.json").read_text())
    assert data["device"] == device and data["report"] == report
    dtypes = json.loads(read_stored(REPO_ROOT / report))["state_dtypes"]
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        installed = [[limit, config.name] for limit, config in build.LAUNCH_TABLES[device][dtype]]
        assert installed == chosen_table(dtypes[name]["batches"]), (device, name)


@needs_cutlass
def test_every_launch_table_and_model_entry_is_a_valid_config(build):
    """A table entry that compile_kernel would refuse fails here (and at import), not at the first run."""
    for device, tables in build.LAUNCH_TABLES.items():
        for dtype, table in tables.items():
            valid = build.valid_configs(128, 128, dtype)
            assert all(config in valid for _, config in table), (device, dtype)
            assert table[-1][0] is None  # the last entry serves every larger batch
    for dtype, ladder in build.DEFAULT_LADDER.items():
        assert all(config in build.valid_configs(128, 128, dtype) for _, config in ladder), dtype
