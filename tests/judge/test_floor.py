"""The copy floor as the best of several copies: the Triton streaming copy and fill (under
TRITON_INTERPRET=1 on a CPU, compiled on a GPU), the candidate rule, the best-of selection, and everything
downstream of it (annotation, summary, leaderboard, the judge's limit), old stored runs included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import TRITON_DEVICE, write_small_dataset
from harness.data.dataset import open_dataset
from harness.data.workloads import stored_tensors
from harness.judge import core
from harness.judge.floor import (DEFAULT_FLOOR_MARGIN, FLOOR_MARGINS, Copy, _first_call, _time_copy, candidate_tiers,
                                 floor_buffer_sets, floor_margin, measure_floor, physical_limit_us, triton_copies)
from harness.judge.stream_copy import (MEDIUM_STATE_BYTES, SMALL_STATE_BYTES, CopyConfig, candidate_configs,
                                       stream_copy, stream_fill_zero)
from harness.judge.timing import L2Flusher, TimingConfig
from harness.records.annotate import annotate
from harness.records.best_floor import BestFloor, best_floors, floor_times
from harness.records.leaderboard import build_leaderboard
from harness.records.report import solution_summary, trace_rows
from harness.records.store import load_run, run_dirs
from harness.records.trace import Environment, FloorMeasurement, TierFigure, is_floor_label

from support.records import STAMP, make_trace, row, write_run

REPO = Path(__file__).resolve().parents[2]
TORCH_COPY, SMALL, LARGE = "torch copy_", "triton streaming copy BLOCK=1024 w4", "triton streaming copy BLOCK=2048 w4"
#: Every configuration the rule can choose, whatever the size.
ALL_CONFIGS = sorted({c for n in (1, SMALL_STATE_BYTES + 1, MEDIUM_STATE_BYTES + 1) for c in candidate_configs(n)},
                     key=lambda c: (c.block, c.num_warps))


def state(batch: int, dtype: torch.dtype, device: str = TRITON_DEVICE) -> torch.Tensor:
    """A random state ``[B, 8, 128, 128]`` in ``dtype`` (the definition's shape), by default where Triton runs."""
    return torch.randn(batch, 8, 128, 128, generator=torch.Generator().manual_seed(batch)).to(device, dtype)


# ------------------------------------------------------------------ kernels


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 2])
def test_the_streaming_copy_and_fill_are_exact_for_the_state(batch, dtype):
    source = state(batch, dtype)
    for config in candidate_configs(source.numel() * source.element_size()):
        target = torch.full_like(source, float("nan"))
        assert stream_copy(source, target, config) is target
        assert torch.equal(target.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                           source.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)), config
        assert stream_fill_zero(target, config) is target and bool((target == 0).all()), config


@pytest.mark.parametrize("numel", [1, 1023, 4097, 8193 + 5])
def test_every_configuration_handles_sizes_that_are_no_multiple_of_its_block(numel):
    source = torch.randn(numel + 7, device=TRITON_DEVICE)[:numel]  # and a guard zone past the end that must stay untouched
    for config in ALL_CONFIGS:
        backing = torch.full((numel + 7,), -1.0, device=TRITON_DEVICE)
        target = backing[:numel]
        stream_copy(source, target, config)
        assert torch.equal(target, source) and bool((backing[numel:] == -1.0).all()), config
        stream_fill_zero(target, config)
        assert bool((target == 0).all()) and bool((backing[numel:] == -1.0).all()), config


def test_the_copy_refuses_what_it_cannot_walk_in_order():
    source = torch.randn(4, 4)
    with pytest.raises(ValueError, match="contiguous"):
        stream_copy(source.t(), torch.empty(4, 4).t(), CopyConfig(1024, 4))
    with pytest.raises(ValueError, match="into"):
        stream_copy(source, torch.empty(4, 4, dtype=torch.bfloat16), CopyConfig(1024, 4))


_ASSEMBLE = """
import sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from harness.judge import stream_copy

kernels = ((stream_copy._stream_copy_kernel, {"src": "*fp32", "dst": "*fp32", "numel": "i32", "BLOCK": "constexpr"}),
           (stream_copy._stream_fill_kernel, {"dst": "*bf16", "numel": "i32", "BLOCK": "constexpr"}))
configs = {c for n in (1 << 20, 16 << 20, 64 << 20) for c in stream_copy.candidate_configs(n)}
for arch in map(int, sys.argv[1:]):
    for kernel, signature in kernels:
        for config in configs:
            compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs={"BLOCK": config.block}),
                                      target=GPUTarget("cuda", arch, 32), options={"num_warps": config.num_warps})
            assert compiled.asm.get("cubin"), (kernel, config, arch)
print("assembled")
"""


def test_the_streaming_kernels_assemble_for_hopper_and_blackwell_without_a_gpu():
    """The interpreter never runs ptxas: the first H100 run found the load's ``.cg`` +
    ``evict_first`` refused by it, for every floor of the run. Compiling every candidate for
    sm_90 (H100, H200) and sm_100 (the contest's B200) catches that on the CPU; in a process of
    its own, since this one runs Triton's interpreter (TRITON_INTERPRET=1)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _ASSEMBLE, "90", "100"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "assembled" in done.stdout, done.stderr[-3000:]


def test_the_rule_picks_configurations_by_the_state_bytes():
    b1, b4, b5, b64, b128 = (b * 8 * 128 * 128 * 4 for b in (1, 4, 5, 64, 128))  # fp32 state bytes
    assert candidate_configs(b1) == candidate_configs(b4) == (CopyConfig(1024, 4), CopyConfig(2048, 4))
    assert candidate_configs(b5) == candidate_configs(b64) == (CopyConfig(4096, 4), CopyConfig(8192, 8))
    assert candidate_configs(b128) == (CopyConfig(8192, 8),)
    assert CopyConfig(4096, 4).method() == "triton streaming copy BLOCK=4096 w4"
    with pytest.raises(ValueError):
        candidate_configs(0)


# ------------------------------------------------------------ the judge's side


def test_a_candidate_is_checked_on_its_first_call_and_recorded_unavailable_when_wrong():
    source = state(1, torch.float32)
    target = source.clone()  # as torch's copy leaves it: the check must not be fooled by it
    copies = triton_copies(source, target, ("cupti",))
    assert [c.method for c in copies] == [SMALL, LARGE]
    assert [c.first_call() for c in copies] == [None, None] and torch.equal(target, source)
    lazy = Copy("lazy", lambda s, t: None, ("cupti",), lambda: _first_call(lambda: None, target, source))
    method, figures = _time_copy(lazy, floor_buffer_sets(source, target), 8, "cpu", TimingConfig(), lambda: None)
    assert method == "lazy" and not figures["cupti"].available and "exactly" in figures["cupti"].reason
    fills = triton_copies(None, target, ("cupti",))
    assert [c.method for c in fills] == [f"{m.replace('copy', 'fill')} (no state input)" for m in (SMALL, LARGE)]
    assert [c.first_call() for c in fills] == [None, None] and bool((target == 0).all())


def test_a_candidate_that_raises_is_recorded_not_fatal():
    def boom():
        raise RuntimeError("no such GPU")

    calls = []

    def broken():
        calls.append(1)
        boom()

    for _ in range(3):  # the next workloads: the same reason, without calling (compiling) it again
        _, figures = _time_copy(Copy("broken", lambda s, t: None, ("cupti",), broken), [], 8, "cpu", TimingConfig(),
                                lambda: None)
        assert not figures["cupti"].available and "RuntimeError: no such GPU" in figures["cupti"].reason
    assert calls == [1]


def test_the_floors_calls_take_as_many_buffer_sets_as_the_cores_in_turn(monkeypatch):
    """A kernel's figure is a median over the timing core's buffer sets (placements); the floor it
    is divided by takes as many, each a separate allocation holding the state, in turn."""
    source = state(1, torch.float32, "cpu")
    assert len(floor_buffer_sets(source, torch.empty_like(source))) == 1  # a CPU: no placement to vary
    monkeypatch.setattr(core, "buffer_sets_for", lambda values: 3)
    sets = floor_buffer_sets(source, torch.empty_like(source))
    assert len({t.data_ptr() for s in sets for t in s.values()}) == 6 and sets[0]["state"] is source
    assert all(torch.equal(s["state"], source) for s in sets)
    handed = []
    copy = Copy("torch copy_", lambda s, t: handed.append(t.data_ptr()) or t.copy_(s), ("wallclock",))
    _time_copy(copy, sets, 8, "cpu", TimingConfig(warmup=1, iters=6, min_iters=6, warm_s=0.0), lambda: None)
    timed = handed[-6:]  # after the warm-up and estimate calls, on the first set
    assert timed == [sets[i % 3]["new_state"].data_ptr() for i in range(6)]
    fills = floor_buffer_sets(None, torch.empty(4))
    assert [s["state"] for s in fills] == [None] * 3


def test_the_candidates_take_the_first_tier_torch_measured_in_headline_order():
    ok, missing = TierFigure(tier="x", available=True, value_us=1.0), TierFigure(tier="x", available=False)
    tiers = ("cupti", "events", "sync")
    assert candidate_tiers(tiers, {"cupti": ok, "events": ok, "sync": ok}) == ("cupti",)
    assert candidate_tiers(tiers, {"cupti": missing, "events": ok, "sync": ok}) == ("events",)
    assert candidate_tiers(("wallclock",), {"wallclock": missing}) == ()


def measured_floors(tmp_path, device: str, tiers: tuple[str, ...]) -> list[FloorMeasurement]:
    """measure_floor on the B = 1 workload of a small generated dataset."""
    dataset = open_dataset(str(write_small_dataset(tmp_path / "dataset", batch_sizes=(1,), scales=(0.0,))),
                           show_progress=False)
    workload = dataset.workloads[0]
    stored = stored_tensors(workload, dataset.definition, dataset.files)
    timing = TimingConfig(warmup=1, iters=5, budget_s=0.2, warm_s=0.0)
    flush = L2Flusher(device) if device.startswith("cuda") else (lambda: None)
    return measure_floor(dataset.definition, workload, stored, "float32", device, tiers, timing, flush,
                         Environment(hardware="test", device=device))


def test_a_cpu_floor_is_torchs_copy_alone(tmp_path):
    floors = measured_floors(tmp_path, "cpu", ("wallclock",))
    assert [f.method for f in floors] == [TORCH_COPY] and floors[0].best_of and floors[0].tiers["wallclock"].available


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton copies are timed on a CUDA device only")
def test_a_gpu_floor_adds_the_triton_copies_in_one_tier(tmp_path):
    floors = measured_floors(tmp_path, "cuda", ("cupti", "events", "sync"))
    assert [f.method for f in floors] == [TORCH_COPY, SMALL, LARGE] and len({f.best_of for f in floors}) == 1
    assert set(floors[0].tiers) == {"cupti", "events", "sync"}
    assert all(len(f.tiers) == 1 and all(t.available for t in f.tiers.values()) for f in floors[1:])


# ------------------------------------------------------------------ best of


def floor(workload: str, method: str, us: dict[str, float], best_of: str | None = "g") -> FloorMeasurement:
    """One copy's measurement: per tier ``value_us`` = ``us``, its fastest call 10 % below."""
    tiers = {t: TierFigure(tier=t, available=True, value_us=v, median_us=v, min_us=0.9 * v) for t, v in us.items()}
    return FloorMeasurement(workload=workload, batch_size=1, nbytes=1 << 20, method=method, best_of=best_of,
                            tiers=tiers, timestamp=STAMP, environment=Environment(hardware="NVIDIA H100 80GB HBM3"))


def several_copies(group: str = "g") -> list[FloorMeasurement]:
    """Two workloads; torch's copy best in events, a Triton copy best in cupti (the other at w1)."""
    return [floor("w0", TORCH_COPY, {"cupti": 2.0, "events": 6.0}, group), floor("w0", SMALL, {"cupti": 1.8}, group),
            floor("w0", LARGE, {"cupti": 1.9}, group),
            floor("w1", TORCH_COPY, {"cupti": 4.0, "events": 9.0}, group), floor("w1", SMALL, {"cupti": 3.9}, group),
            floor("w1", LARGE, {"cupti": 3.5}, group)]


def test_the_floor_is_the_fastest_copy_per_tier():
    times = floor_times(several_copies())
    assert times == {("w0", "float32", "cupti"): 1.8, ("w0", "float32", "events"): 6.0,
                     ("w1", "float32", "cupti"): 3.5, ("w1", "float32", "events"): 9.0}
    assert floor_times(list(reversed(several_copies()))) == times


def test_several_lanes_count_by_the_median_of_their_bests():
    lanes = [floor("w0", TORCH_COPY, {"cupti": 2.0}, "lane0"), floor("w0", SMALL, {"cupti": 1.0}, "lane0"),
             floor("w0", TORCH_COPY, {"cupti": 2.2}, "lane1"), floor("w0", SMALL, {"cupti": 3.0}, "lane1"),
             floor("w0", TORCH_COPY, {"cupti": 5.0}, "lane2"), floor("w0", SMALL, {"cupti": 4.0}, "lane2")]
    assert floor_times(lanes) == {("w0", "float32", "cupti"): 2.2}  # median of the bests 1.0, 2.2, 4.0
    best = best_floors(lanes)
    assert [(b.tiers["cupti"].value_us, b.tier_methods["cupti"]) for b in best] == [
        (1.0, SMALL), (2.2, TORCH_COPY), (4.0, SMALL)]  # a row per lane, as --gpus had
    old = [floor("w0", TORCH_COPY, {"cupti": v}, None) for v in (2.0, 3.0)]  # stored before best_of: alone
    assert floor_times(old) == {("w0", "float32", "cupti"): 2.5} and len(best_floors(old)) == 2


def test_best_floors_keep_one_floor_per_workload_naming_every_copy():
    best = best_floors(several_copies())
    assert [(b.workload, b.tiers["cupti"].value_us, b.tiers["events"].value_us) for b in best] == [
        ("w0", 1.8, 6.0), ("w1", 3.5, 9.0)]
    assert best[1].tier_methods == {"cupti": LARGE, "events": TORCH_COPY}
    assert best[1].methods == [TORCH_COPY, SMALL, LARGE] and best[1].method == "best of 3 copies"


def test_the_physical_limit_is_the_fastest_call_of_any_copy():
    copies = several_copies()[:3]
    assert physical_limit_us(copies) == pytest.approx(0.9 * 1.8)
    assert physical_limit_us(copies[:1]) == pytest.approx(0.9 * 2.0)
    assert physical_limit_us([]) is None
    assert floor_margin(copies) == FLOOR_MARGINS["cupti"] and floor_margin([]) == DEFAULT_FLOOR_MARGIN


# ---------------------------------------------------------------- downstream


def run_records() -> list:
    traces = [make_trace("pt-reference", f"w{i}", {"cupti": 50.0, "events": 60.0}) for i in range(2)]
    traces += [make_trace("mine", "w0", {"cupti": 3.6, "events": 12.0}),
               make_trace("mine", "w1", {"cupti": 7.0, "events": 18.0})]
    return traces + several_copies()


def test_annotation_divides_by_the_best_copy_of_the_same_tier():
    records = run_records()
    traces = [r for r in records if not isinstance(r, FloorMeasurement)]
    out = {(t.solution, t.workload.uuid): t.evaluation.performance.tiers for t in
           annotate(traces, [r for r in records if isinstance(r, FloorMeasurement)])}
    assert out[("mine", "w0")]["cupti"].x_copy_floor == pytest.approx(3.6 / 1.8)  # Triton's copy in cupti
    assert out[("mine", "w0")]["events"].x_copy_floor == pytest.approx(12.0 / 6.0)  # torch's in events
    assert out[("mine", "w1")]["cupti"].copy_floor_us == 3.5


def test_the_summary_has_one_floor_row_per_workload_with_its_methods():
    records = run_records()
    frame = trace_rows([r for r in records if not isinstance(r, FloorMeasurement)],
                       [r for r in records if isinstance(r, FloorMeasurement)])
    floors = frame[frame["solution"].map(is_floor_label)]
    assert list(floors["workload"]) == ["w0", "w1"]
    assert list(floors["cupti_value_us"]) == [1.8, 3.5] and list(floors["events_value_us"]) == [6.0, 9.0]
    assert list(floors["cupti_method"]) == [SMALL, LARGE] and list(floors["events_method"]) == [TORCH_COPY] * 2
    assert all(SMALL in log and LARGE in log and TORCH_COPY in log for log in floors["log"])
    assert "copy-floor" not in set(solution_summary(frame)["solution"])


def test_the_leaderboard_divides_by_the_best_copy(tmp_path):
    write_run(tmp_path, "r1", run_records())
    board = build_leaderboard(tmp_path)
    assert row(board, "mine", tier="cupti")["x_copy_floor"] == pytest.approx((3.6 / 1.8 + 7.0 / 3.5) / 2)
    assert row(board, "mine", tier="events")["x_copy_floor"] == pytest.approx((12 / 6 + 18 / 9) / 2)
    assert not any(is_floor_label(s) for s in board["solution"])
    assert len(load_run(tmp_path / "runs" / "r1").floors) == 6  # every copy kept in floors.jsonl


STORED_RUNS = run_dirs(REPO / "results")
#: The stored runs from before the floor was the best of several copies (no ``best_of``).
OLD_RUNS = [run_dir for run_dir in STORED_RUNS if all(f.best_of is None for f in load_run(run_dir).floors)]


def test_old_stored_runs_give_the_floors_they_gave():
    """Runs stored with torch's copy alone: one floor per workload, its figures unchanged."""
    assert OLD_RUNS
    for run_dir in OLD_RUNS:
        run = load_run(run_dir)
        best = best_floors(run.floors)
        assert [b.workload for b in best] == [f.workload for f in run.floors], run_dir.name
        for stored, mine in zip(run.floors, best):
            assert isinstance(mine, BestFloor) and mine.methods == ["torch copy_"], run_dir.name
            assert {t: f for t, f in mine.tiers.items()} == stored.tiers, run_dir.name


def test_the_stored_leaderboard_is_rebuilt_with_the_same_numbers():
    """results/leaderboard.csv was built from the stored runs before the floor was a best-of: every
    row rebuilt from the same run gives the same numbers (a run stored later may take a row over)."""
    stored = pd.read_csv(REPO / "results" / "leaderboard.csv")
    rebuilt = build_leaderboard(REPO / "results")
    both = rebuilt.merge(stored, on=["hardware", "set", "tier", "solution", "run"], suffixes=("", "_stored"))
    assert len(both) >= 0.5 * len(stored) and both["x_copy_floor"].notna().any()
    for column in ("x_copy_floor", "score", "median_us"):
        pd.testing.assert_series_equal(both[column], both[f"{column}_stored"], rtol=1e-5, check_names=False)


def test_the_floor_is_timed_once_per_state_shape_and_serves_every_workload_of_it(tmp_path):
    """A copy's time depends on the bytes it moves: B = 1, 2, 1 gives two measurements, and the
    third workload's records name the workload whose state was copied."""
    from harness.judge.references import References
    from harness.judge.run import RunConfig, measure_floors

    dataset = open_dataset(str(write_small_dataset(tmp_path / "dataset", batch_sizes=(1, 2, 1),
                                                   scales=(0.0, 0.0, 0.0))), show_progress=False)
    config = RunConfig(timing=TimingConfig(warmup=1, iters=5, budget_s=0.2, warm_s=0.0))
    floors = measure_floors(dataset, References(dataset, "cpu"), config, {"float32"},
                            Environment(hardware="test", device="cpu"), progress=False)
    first, second, third = floors  # one copy (torch's) per workload on the CPU
    assert [f.workload for f in floors] == ["small-0", "small-1", "small-2"]
    assert first.measured_on is None and second.measured_on is None and second.batch_size == 2
    assert third.measured_on == "small-0" and third.tiers == first.tiers and third.best_of == first.best_of


def test_a_floor_that_cannot_be_measured_is_said_and_the_run_goes_on(tmp_path, monkeypatch):
    """A CUPTI or CUDA error in a copy (one lane's CUPTI records left open, 2026-11-26) costs that
    floor, never the run."""
    from harness.judge import run as run_mod
    from harness.judge.references import References

    dataset = open_dataset(str(write_small_dataset(tmp_path / "dataset", batch_sizes=(1, 2),
                                                   scales=(0.0, 0.0))), show_progress=False)

    def broken(definition, workload, *args, **kwargs):
        raise RuntimeError("incomplete CUPTI record memcpy DTOD")

    monkeypatch.setattr(run_mod, "measure_floor", broken)
    notes = []
    floors = run_mod.measure_floors(dataset, References(dataset, "cpu"), run_mod.RunConfig(), {"float32"},
                                    Environment(hardware="test", device="cpu"), progress=False, notes=notes)
    assert floors == [] and len(notes) == 2 and "incomplete CUPTI record" in notes[0] and "B = 1" in notes[0]
