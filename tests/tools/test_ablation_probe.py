"""The ablation probe (tools/ablation_probe.py) on the CPU: its ablation builds of cuda-v4 compile
for Hopper without spilling, and its arithmetic; the timing itself needs a GPU."""

import re

import pytest

from conftest import CUDA_V4_KERNEL, REPO
from tools.ablation_probe import BUILDS, main, summarize


SOURCE = REPO / "solutions" / "cuda-v4" / "kernel.cu"


@pytest.fixture(scope="module")
def shipped():
    """ptxas's report of the shipped build (the launch tables' variants) for sm_90a; skips without nvcc or tvm-ffi."""
    from harness.judge import build

    try:
        build.find_nvcc(), build.tvm_ffi_paths()
    except build.CompileError as exc:
        pytest.skip(str(exc))
    return build.kernel_resources(SOURCE)


@pytest.mark.parametrize("name", ["no-operands-no-exchange", "copy", "v-early-operands-first", "fast-gates"])
def test_an_ablation_build_compiles_the_shipped_variants_without_spilling(name, shipped):
    from harness.judge import build

    ablated = build.kernel_resources(SOURCE, defines=BUILDS[name])
    assert {re.search(CUDA_V4_KERNEL, k).groups() for k in ablated} == \
        {re.search(CUDA_V4_KERNEL, k).groups() for k in shipped}
    assert all(used.spill_store_bytes == 0 and used.spill_load_bytes == 0 for used in ablated.values())


def test_an_ablation_define_outside_the_flags_does_not_compile(shipped):
    from harness.judge import build

    with pytest.raises(build.CompileError, match="GDN_V4_ABLATE"):
        build.kernel_resources(SOURCE, defines=("GDN_V4_ABLATE=32",))


def test_the_summary_measures_each_subject_from_the_full_kernel_and_the_fastest_copy():
    probed = {"times_us": {"full": [2.0, 2.1, 2.2], "no-exchange": [1.9, 1.9, 2.0],
                           "torch copy_": [2.0, 2.0, 2.0], "triton streaming copy BLOCK=1024 w4": [1.8, 1.7, 1.9]}}
    rows = {row["subject"]: row for row in summarize(1, probed)}
    assert rows["full"]["median_us"] == pytest.approx(2.1)
    assert rows["no-exchange"]["minus_full_us"] == pytest.approx(-0.2)
    assert rows["no-exchange"]["over_floor_us"] == pytest.approx(0.1)
    assert rows["torch copy_"]["over_floor_us"] == pytest.approx(0.2)
    assert (rows["full"]["min_us"], rows["full"]["max_us"]) == (2.0, 2.2)


def test_without_a_gpu_it_says_so_and_exits_2(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--out", str(tmp_path)]) == 2


def test_an_unknown_build_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--builds", "full,no-such"]) == 2
    assert "no-such" in capsys.readouterr().err
