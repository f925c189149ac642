"""The tier parity check (tools/tier_parity.py) on the CPU: what it reads of a harness run and how
it judges each ratio; the plain-process timers themselves need a GPU (results/judge-check)."""

from support.records import make_floor, make_trace, write_run

from tools.tier_parity import COPY, COPY_METHOD, TARGETS, compare, harness_figures


def test_the_harness_side_is_each_solutions_figures_and_the_torch_copy_of_the_floor(tmp_path):
    copy = make_floor("w8", {"cupti": 4.0, "events": 6.0}, batch=8)
    other_copy = make_floor("w8", {"cupti": 3.5}, batch=8).model_copy(update={"method": "triton stream copy"})
    traces = [make_trace("cuda-v4", "w8", {"cupti": 4.5, "sync": 20.0}, batch=8),
              make_trace("cuda-v4", "w2", {"cupti": 2.5}, batch=2)]
    run = write_run(tmp_path, "run", [copy, other_copy, *traces])
    assert copy.method == COPY_METHOD
    assert harness_figures(run, {8}) == {(COPY, 8): {"cupti": 4.0, "events": 6.0},
                                         ("cuda-v4", 8): {"cupti": 4.5, "sync": 20.0}}


def test_each_ratio_is_judged_against_its_tiers_target():
    harness = {("cuda-v4", 1): {"cupti": 2.03, "events": 5.0, "sync": 30.0}}
    plain = {("cuda-v4", 1): {"cupti": 2.0, "events": 4.0, "sync": 27.0, "contest": 2.0}}
    rows = {r["tier"]: r for r in compare(harness, plain)}
    assert set(rows) == {"cupti", "events", "sync"}  # the contest tier only where both sides have it
    assert rows["cupti"]["within"] and abs(rows["cupti"]["ratio"] - 1.015) < 1e-9
    assert not rows["events"]["within"] and rows["events"]["target"] == TARGETS["events"]  # 1.25 > 1.10
    assert rows["sync"]["within"]  # 1.11 within 15%
