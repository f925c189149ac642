"""The ablation probe (tools/ablation_probe.py) on the CPU: its builds of cuda-v4 compile for
Hopper without spilling, a candidate's code is told apart from the full build's, a build that
computes what it should not is refused, and its arithmetic; the timing itself needs a GPU."""

import re

import pytest
import torch

from conftest import REPO, shared_cubin_build
from tools.ablation_probe import BUILDS, main, misbuilt, same_code_as_full, summarize
from tools.tune.cuda_v4 import KERNEL_NAME, KERNEL_NAME_BF16

SOURCE = REPO / "solutions" / "cuda-v4" / "kernel.cu"


def variants(names) -> set:
    """The fp32-state variants among mangled kernel names (the bf16 state's are named with ``t``)."""
    return {found.groups() for name in names if (found := re.search(KERNEL_NAME, name))}


@pytest.fixture(scope="module")
def shipped_code():
    """The shipped build's machine code per kernel for sm_90a, built once per test run (not once
    per xdist worker); skips without nvcc or tvm-ffi."""
    return shared_cubin_build(SOURCE.parent).code


#: Builds of several candidates and ablations at once (a sum of their flags): one nvcc run checks them
#: all, where CI's five minutes allow few. Each sum's parts touch different code: sk-all-reduce (1024)
#: the exchange, warm-stores (2048) the loads' tail, qk-private (ablation 32) q's and k's addresses,
#: cluster-sync (32768) the launch and a barrier between the loads; v-early and operands-first (3) the
#: loads' order, output-last (4096) the stores' order, kq-early and gates-early (8192 + 16384) what the
#: row sums wait on. (cluster-sync-first, 65536, spills in the bf16 state's staged variants: the probe
#: times the fp32 state's.)
COMBINED = {"sk-all-reduce+warm-stores+qk-private+cluster-sync": ("GDN_V4_CANDIDATE=35840", "GDN_V4_ABLATE=32"),
            "v-early-operands-first+output-last+kq-gates-early": ("GDN_V4_CANDIDATE=28675",)}


@pytest.mark.parametrize("name", ["no-operands-no-exchange", "copy", "shared-qk", *COMBINED])
def test_a_build_compiles_the_shipped_variants_without_spilling(name, shipped_code):
    from harness.judge import build

    ablated = build.kernel_resources(SOURCE, defines=COMBINED.get(name) or BUILDS[name])
    assert variants(ablated) == variants(shipped_code)
    assert all(used.spill_store_bytes == 0 and used.spill_load_bytes == 0 for used in ablated.values())


def test_the_precise_gates_candidate_changes_every_shipped_kernels_code(shipped_code):
    from harness.judge import build

    precise = build.kernel_code(SOURCE, defines=BUILDS["precise-gates"])
    assert precise.keys() == shipped_code.keys()
    assert all(precise[name] != code for name, code in shipped_code.items())
    assert build.kernel_code(SOURCE) == shipped_code  # a fresh build of the shipped source: the same bytes


def test_the_bf16_packed_candidate_halves_only_the_bf16_states_registers(shipped_code):
    """kernel.cu's kCandidateBf16Packed (GDN_V4_CANDIDATE=128, issue #33): every fp32 kernel keeps its
    machine code, and the bf16 variants of 16 rows a warp and 8 lanes a row, which widen their state
    to fp32 as it lands in the shipped build (119-127 registers), hold it packed in at most 96
    registers without spilling."""
    from harness.judge import build

    packed, resources = build.cubin_build(SOURCE, defines=("GDN_V4_CANDIDATE=128",))
    assert packed.keys() == shipped_code.keys()
    assert all(packed[name] == code for name, code in shipped_code.items() if re.search(KERNEL_NAME, name))
    assert any(packed[name] != code for name, code in shipped_code.items() if re.search(KERNEL_NAME_BF16, name))
    big = [used for name, used in resources.items()
           if (found := re.search(KERNEL_NAME_BF16, name)) and found.group(2) == "16" and found.group(4) == "8"]
    assert big and all(used.registers <= 96 and used.spill_store_bytes == 0 for used in big)


def test_an_ablation_define_outside_the_flags_does_not_compile(shipped_code):
    from harness.judge import build

    with pytest.raises(build.CompileError, match="GDN_V4_ABLATE"):
        build.kernel_resources(SOURCE, defines=("GDN_V4_ABLATE=64",))


def test_a_candidate_with_the_full_builds_code_at_the_launched_kernel_is_named(monkeypatch):
    full = {"k_gdn_decode_v4_kernelILi8ELi2ELi2ELi32ELi1ELb0EfE": b"A", "k_gdn_decode_v4_kernelILi4ELi8ELi1ELi8ELi1ELb0EfE": b"B"}
    builds = {(): full,
              BUILDS["operands-first"]: {**full, "k_gdn_decode_v4_kernelILi4ELi8ELi1ELi8ELi1ELb0EfE": b"C"},
              BUILDS["precise-gates"]: {name: code + b"!" for name, code in full.items()}}
    monkeypatch.setattr("harness.judge.build.kernel_code", lambda source, target, defines=(): builds[tuple(defines)])
    same = same_code_as_full(["full", "operands-first", "precise-gates", "no-gates"], {1: (8, 2, 2, 32, 1, 0), 4: (4, 8, 1, 8, 1, 0)},
                             ("compute_90a", "sm_90a"))
    assert same == {1: ["operands-first"], 4: []}


class FakeBuild:
    """A build's ``run``: writes ``value`` into both destinations."""

    def __init__(self, value: float):
        self.value = value

    def run(self, given: dict) -> None:
        given["output"].fill_(self.value)
        given["new_state"].fill_(self.value)


def test_a_build_that_computes_what_it_should_not_is_refused():
    inputs = {"output": torch.zeros(4), "new_state": torch.zeros(4)}
    builds = {"full": FakeBuild(1.0), "no-gates": FakeBuild(1.0), "no-v": FakeBuild(2.0),
              "precise-gates": FakeBuild(1.001), "v-early": FakeBuild(1.5)}
    assert misbuilt(builds, inputs) == ["no-gates", "v-early"]


def test_the_summary_measures_each_subject_from_the_full_kernel_and_the_fastest_copy():
    probed = {"times_us": {"full": [2.0, 2.1, 2.2], "no-exchange": [1.9, 1.9, 2.0],
                           "torch copy_": [2.0, 2.0, 2.0], "triton streaming copy BLOCK=1024 w4": [1.8, 1.7, 1.9]}}
    rows = {row["subject"]: row for row in summarize(1, probed)}
    assert rows["full"]["median_us"] == pytest.approx(2.1)
    assert rows["no-exchange"]["minus_full_us"] == pytest.approx(-0.2)
    assert rows["no-exchange"]["over_floor_us"] == pytest.approx(0.1)
    assert rows["torch copy_"]["over_floor_us"] == pytest.approx(0.2)
    assert (rows["full"]["min_us"], rows["full"]["max_us"]) == (2.0, 2.2)


def test_the_summary_sets_the_window_means_beside_the_medians_where_a_run_kept_them():
    probed = {"times_us": {"full": [1.984] * 3, "v-early": [1.984] * 3, "torch copy_": [1.824] * 3},
              "window_means_us": {"full": [1.981, 1.979, 1.980], "v-early": [1.969, 1.971, 1.970],
                                  "torch copy_": [1.812, 1.810, 1.811]}}
    rows = {row["subject"]: row for row in summarize(1, probed)}
    assert rows["v-early"]["minus_full_us"] == 0
    assert rows["v-early"]["window_minus_full_us"] == pytest.approx(-0.010)
    assert rows["full"]["window_over_floor_us"] == pytest.approx(0.169)
    assert (rows["full"]["window_min_us"], rows["full"]["window_max_us"]) == (1.979, 1.981)
    assert "window_median_us" not in summarize(1, {"times_us": probed["times_us"]})[0]


def test_an_unknown_build_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--builds", "full,no-such"]) == 2
    assert "no-such" in capsys.readouterr().err


def test_the_state_dtypes_are_the_ones_cuda_v4_declares(tmp_path, capsys):
    """--state-dtype offers what solution.toml declares, and anything else is a clear error (exit 2)."""
    from tools.ablation_probe import declared_state_dtypes

    assert declared_state_dtypes() == ("float32", "bfloat16")
    with pytest.raises(SystemExit) as exited:
        main(["--out", str(tmp_path), "--state-dtype", "float16"])
    assert exited.value.code == 2 and "float16" in capsys.readouterr().err


def test_a_bf16_candidate_is_held_to_the_bf16_states_tolerance():
    """A candidate's results are judged with the tolerance of the probe's state dtype: 0.1 apart
    at 1.0 is outside the fp32 one (atol = rtol = 1e-2) and inside the bf16 one; 2.0 apart is
    outside both."""
    inputs = {"output": torch.zeros(4), "new_state": torch.zeros(4)}
    builds = {"full": FakeBuild(1.0), "precise-gates": FakeBuild(1.1)}
    assert misbuilt(builds, inputs, "bfloat16") == []
    assert misbuilt(builds, inputs, "float32") == ["precise-gates"]
    builds["precise-gates"] = FakeBuild(3.0)
    assert misbuilt(builds, inputs, "bfloat16") == ["precise-gates"]
