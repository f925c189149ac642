"""The default launch model against the tuned tables, each table pretended missing
(tools/tune/model_check.py, docs/tuning.md), on the CPU: the config per batch size and,
from the tuning reports, its µs against the tuned config's."""

from __future__ import annotations

import pytest

from tools.tune import model_check

H100 = model_check.H100


def _check(name: str) -> dict:
    try:
        return model_check.check_solution(name)
    except ImportError as exc:  # a solution whose packages are not installed here
        pytest.skip(str(exc))


@pytest.mark.parametrize("name, dtypes, worst", [
    ("fla-recurrent", ("float32",), 1.0),  # the model picks the table's config at every batch size
    ("cutedsl-bf16", ("float32", "bfloat16"), 1.02),
])
def test_the_default_model_lands_close_to_the_h100_tables(name, dtypes, worst):
    results = _check(name)
    for dtype in dtypes:
        rows = results[H100, dtype]
        summary = model_check.summary(rows)
        assert [row.batch for row in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        assert summary["timed"] == len(rows)  # the reports timed both configs at every batch size
        assert summary["worst"] <= worst, model_check.format_rows(name, H100, dtype, rows)


def test_the_cuda_v4_default_model_lands_close_to_the_h100_table():
    from harness.judge import build

    try:
        build.find_nvcc(), build.tvm_ffi_paths()
    except build.CompileError as exc:
        pytest.skip(str(exc))
    rows = _check("cuda-v4")[H100, "float32"]  # the model's choice read from kernel.cu's default build
    summary = model_check.summary(rows)
    assert summary["timed"] == len(rows) == 10
    assert summary["geomean"] <= 1.01 and summary["worst"] <= 1.03, model_check.format_rows("cuda-v4", H100,
                                                                                             "float32", rows)


def test_report_names_of_every_tuner_form():
    assert model_check.config_key("cuda-v4", "cuda-v4/r8/nc/l16/w2/rs") == "r8/nc/l16/w2"
    assert model_check.config_key("cuda-v4", "cuda-v4/r8/nc/l16/w2") is None  # the removed all-reduce form
    assert model_check.config_key("cuda-v4", "r8/nc/l16/w2") == "r8/nc/l16/w2"  # python -m tools.tune's names
    assert model_check.config_key("cutedsl-bf16", "t8/s1") == "t8/s1"
    rows = [model_check.Row(1, "a", "b", 2.0, 2.2), model_check.Row(2, "a", "a", 3.0, 3.0),
            model_check.Row(4, "a", "c", 3.0, None)]
    summary = model_check.summary(rows)
    assert (summary["same"], summary["timed"], round(summary["worst"], 3)) == (1, 2, 1.1)
    assert summary["geomean"] == pytest.approx(1.1 ** 0.5)
