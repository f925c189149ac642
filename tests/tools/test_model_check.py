"""The default launch model against the tuned tables, each table pretended missing
(tools/tune/model_check.py, docs/tuning.md), on the CPU: the config per batch size and,
from the tuning reports, its µs against the tuned config's.

The H100 bounds are fit residuals (the model was fitted to those tables). The H200 bounds pin
an out-of-sample result (the model was not fitted to its tables): they are the measured
slowdowns plus a rounding margin, so that a change of L or of a ladder that makes the
default worse on the H200 fails here. cuda-v4's bf16 ladder is fitted to both GPUs' tunes: its
bounds are fit residuals on both, and its out-of-sample test is each GPU's fit alone against
the other's table. The B200 figures (``--predict b200 --batches``) are a
prediction on paper; they are pinned so that docs/tuning.md's tables stay what the tool prints."""

from __future__ import annotations

import pytest

from tools.tune import model_check

H100 = model_check.H100
H200 = model_check.H200
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def _check(name: str) -> dict:
    try:
        return model_check.check_solution(name)
    except ImportError as exc:  # a solution whose packages are not installed here
        pytest.skip(str(exc))


def _check_latency(name: str, latency: float) -> dict:
    """:func:`_check` with the model's L replaced by ``latency`` seconds."""
    try:
        return model_check.check_solution(name, latency=latency)
    except ImportError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("name, dtypes, worst", [
    # fla's ladder is the fit of its 32-lane H100 table; the table since has fewer lanes a row at B <= 32
    ("fla-recurrent", ("float32",), 1.05),
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


def _require_cuda_v4_build() -> None:
    """Skip unless cuda-v4's default build can be compiled here (nvcc, tvm-ffi)."""
    from harness.judge import build

    try:
        build.find_nvcc(), build.tvm_ffi_paths()
    except build.CompileError as exc:
        pytest.skip(str(exc))


def _check_cuda_v4() -> dict:
    _require_cuda_v4_build()
    return _check("cuda-v4")  # the model's choice read from kernel.cu's default build


def test_the_cuda_v4_default_model_lands_close_to_the_h100_table():
    """Its ladder is the octave fit of the H100's fast-gates tune (2026-11-26; MODEL_REPORTS); the
    table has since been re-tuned with two passes over a lane's rows, which no rung has: against
    that table's report the model is 1.008x on average and 1.029x at worst (B = 8, where the
    table's two-pass pick is 0.13 µs faster)."""
    rows = _check_cuda_v4()[H100, "float32"]
    summary = model_check.summary(rows)
    assert summary["timed"] == len(rows) == 10
    assert summary["worst"] <= 1.03, model_check.format_rows("cuda-v4", H100, "float32", rows)


def test_the_reports_a_ladder_was_fitted_to_stand_in_for_the_tables_only_where_named():
    adapter = model_check.load_adapter("fla-recurrent")
    tables, model = model_check.gpu_reports("fla-recurrent", adapter), model_check.model_reports("fla-recurrent", adapter)
    assert model[H200] == tables[H200] and model[H100] != tables[H100]
    assert not any("/l" in name for at in model[H100][1]["float32"].values() for name in at)  # 32 lanes only
    assert any("/l" in name for at in tables[H100][1]["float32"].values() for name in at)
    adapter = model_check.load_adapter("cutedsl-bf16")
    assert model_check.model_reports("cutedsl-bf16", adapter) == model_check.gpu_reports("cutedsl-bf16", adapter)
    _require_cuda_v4_build()
    adapter = model_check.load_adapter("cuda-v4")
    tables, model = model_check.gpu_reports("cuda-v4", adapter), model_check.model_reports("cuda-v4", adapter)
    assert model[H200] == tables[H200] and model[H100] != tables[H100]
    assert not any(name.endswith("/p2") for at in model[H100][1]["float32"].values() for name in at)
    assert any(name.endswith("/p2") for at in tables[H100][1]["float32"].values() for name in at)
    assert model[H100][1]["bfloat16"] == tables[H100][1]["bfloat16"]  # the stand-in timed no bf16 state


@pytest.mark.parametrize("name, dtype, geomean, worst", [
    # fla-recurrent's 32-lane ladder against the H200's three-round tune with the lanes-per-row knob
    # (2026-11-26): measured 1.008, 1.034 (B = 8; fewer lanes won at B <= 16); against its 32-lane tune
    # of 2026-11-23 it was exact (bv4 up to B = 16, bv8 from 32)
    ("fla-recurrent", "float32", 1.01, 1.035),
    # the ladders fitted to the H100's fast-gates tunes (2026-11-26), against the H200's fast-gates tunes
    # of the same day: measured 1.016, 1.043 (B = 1); 1.014, 1.039 (B = 128); 1.020, 1.132 (B = 64).
    # The ladders before the fit: cuda-v4 1.034, 1.111 against these tunes; cutedsl-bf16 1.085, 1.164
    # and 1.109, 1.202 against the H200's IEEE-gates tunes (2026-11-23)
    ("cuda-v4", "float32", 1.02, 1.05),
    ("cutedsl-bf16", "float32", 1.02, 1.045),
    ("cutedsl-bf16", "bfloat16", 1.025, 1.14),
    # (cuda-v4's bf16 ladder is fitted to both GPUs' tunes: FITTED_TO, and the leave-one-out test below)
])
def test_the_default_model_predicts_the_h200_tables(name, dtype, geomean, worst):
    """The H200 tables were tuned after the model was fitted to the H100's: an out-of-sample test."""
    rows = (_check_cuda_v4() if name == "cuda-v4" else _check(name))[H200, dtype]
    summary = model_check.summary(rows)
    assert [row.batch for row in rows] == BATCHES and summary["timed"] == len(rows)
    assert summary["geomean"] <= geomean and summary["worst"] <= worst, model_check.format_rows(name, H200, dtype, rows)


def test_an_octave_fit_takes_per_octave_the_config_least_slow_over_its_batch_sizes():
    latency = 0.9e-6
    bandwidth = model_check.state_bytes(4, "float32") / latency  # rho = B / 4
    times = {
        1: {"y": 1.0, "x": 1.0},  # rho 0.25, octave 0: a tie, the first name wins
        4: {"a": 1.0, "b": 1.2},  # octave 1: a
        8: {"a": 2.2, "b": 2.0}, 12: {"a": 3.0, "b": 3.1, "c": 2.9},  # octave 2: b's summed log slowdown is least
        20: {"a": 5.0}, 24: {"a": 6.0, "b": 5.0},  # octave 4: a, the one config timed at both
        64: {"b": 1.0}, 160: {"b": 1.0},  # octaves 16 and 32: b, one rung
    }
    assert model_check.fit_octaves([(times, bandwidth)], "float32", latency) == [
        (0.0, "x"), (1.0, "a"), (2.0, "b"), (4.0, "a"), (16.0, "b")]
    with pytest.raises(ValueError, match="no timed batch sizes"):
        model_check.fit_octaves([({}, bandwidth)], "float32", latency)


def test_a_fit_to_two_gpus_weighs_their_points_of_one_octave_together():
    """A GPU of twice the bandwidth puts a batch size an octave of rho lower: its B = 16 meets the
    first GPU's B = 8 in octave 2, where a is 1.3x slow on one and b 1.1x on the other; each GPU's fit
    alone picks its own winner there."""
    latency = 0.9e-6
    bandwidth = model_check.state_bytes(4, "float32") / latency  # rho = B / 4 on the first GPU, B / 8 on the second
    first = {8: {"a": 1.3, "b": 1.0}}
    second = {16: {"a": 1.0, "b": 1.1}, 2: {"a": 1.0, "b": 2.0}}
    assert model_check.fit_octaves([(first, bandwidth)], "float32", latency) == [(2.0, "b")]
    assert model_check.fit_octaves([(second, 2 * bandwidth)], "float32", latency) == [(0.0, "a")]
    assert model_check.fit_octaves([(first, bandwidth), (second, 2 * bandwidth)], "float32", latency) == [
        (0.0, "a"), (2.0, "b")]


#: The GPUs whose tunes a ladder was fitted to, where not the H100's alone: cuda-v4's bf16 state
#: (kernel.cu's GDN_V4_DEFAULT_LADDER_BF16), whose staged rung each GPU's fit places an octave apart.
FITTED_TO = {("cuda-v4", "bfloat16"): (H100, H200)}


@pytest.mark.parametrize("name", ["fla-recurrent", "cuda-v4", "cutedsl-bf16"])
def test_the_ladders_are_the_octave_fit_of_their_tunes(name):
    """fla-recurrent's hand-made ladder is what the fit gives; cuda-v4's and cutedsl-bf16's were
    written from the fit (``--fit``) of the H100's tune, or of the GPUs FITTED_TO names: after a
    re-tune of those tables, fit again, unless the re-tune timed variants the other GPUs' tunes
    lack (MODEL_REPORTS). The model's pick is the ladder's at every batch size on each of them."""
    if name == "cuda-v4":
        _require_cuda_v4_build()
    try:
        adapter = model_check.load_adapter(name)
    except ImportError as exc:  # a solution whose packages are not installed here
        pytest.skip(str(exc))
    reports = model_check.model_reports(name, adapter)
    latency = model_check.model_latency(name)
    for dtype in adapter.state_dtypes():
        devices = FITTED_TO.get((name, dtype), (H100,))
        fitted = model_check.fit_octaves([(reports[d][1][dtype], reports[d][0]) for d in devices], dtype, latency)
        for device in devices:
            bandwidth = reports[device][0]
            assert {batch: model_check.ladder_pick(fitted, batch, dtype, bandwidth, latency) for batch in BATCHES} == {
                batch: adapter.model_config_name(batch, dtype, bandwidth) for batch in BATCHES}, (dtype, device)


@pytest.mark.parametrize("fitted, judged, geomean, worst", [
    # measured 1.020, 1.092 (B = 64: the H100's fit gives the staged variant from rho 4, the H200's B = 64
    # is rho 3.9, where it picks a two-pass variant 9% slower than the H200's table's staged one)
    (H100, H200, 1.021, 1.095),
    # measured 1.014, 1.096 (B = 64 again, the other way: the H200's fit gives staged at rho 2-4 only)
    (H200, H100, 1.02, 1.10),
])
def test_each_gpus_bf16_fit_alone_predicts_the_others_table_within_ten_percent(fitted, judged, geomean, worst):
    """The out-of-sample test of cuda-v4's bf16 ladder, now that it is fitted to both GPUs: each GPU's
    fit alone against the other's table (the table's µs of each pick, from its tune). What a GPU
    without a table (the B200) may expect of the fit of both."""
    _require_cuda_v4_build()
    adapter = model_check.load_adapter("cuda-v4")
    reports, latency = model_check.model_reports("cuda-v4", adapter), model_check.model_latency("cuda-v4")
    ladder = model_check.fit_octaves([(reports[fitted][1]["bfloat16"], reports[fitted][0])], "bfloat16", latency)
    bandwidth, times = reports[judged][0], reports[judged][1]["bfloat16"]
    rows = model_check.compare(adapter.gpu_tables()[judged]["bfloat16"], times, BATCHES,
                               lambda batch: model_check.ladder_pick(ladder, batch, "bfloat16", bandwidth, latency))
    summary = model_check.summary(rows)
    assert summary["timed"] == len(BATCHES)
    assert summary["geomean"] <= geomean and summary["worst"] <= worst, \
        model_check.format_rows("cuda-v4", judged, "bfloat16", rows)


def test_the_bf16_ladder_fitted_to_both_gpus_lands_close_to_both_tables():
    """In sample: measured 1.004x on average and 1.022x at worst on the H100 (B = 32), 1.003x and 1.026x
    on the H200 (B = 128), where the H100's fit alone read 1.020x and 1.092x on the H200."""
    rows = _check_cuda_v4()
    for device in (H100, H200):
        summary = model_check.summary(rows[device, "bfloat16"])
        assert summary["timed"] == len(BATCHES)
        assert summary["geomean"] <= 1.005 and summary["worst"] <= 1.03, \
            model_check.format_rows("cuda-v4", device, "bfloat16", rows[device, "bfloat16"])


def test_the_fit_command_prints_a_ladder_and_refuses_a_gpu_without_a_table(capsys):
    assert model_check.main(["--algo", "fla-recurrent", "--fit", H100]) == 0
    assert capsys.readouterr().out == f"fla-recurrent float32 fitted to {H100}: 0: bv4/w1 · 2: bv8/w1\n"
    assert model_check.main(["--algo", "fla-recurrent", "--fit", f"{H100},{H200}"]) == 0
    assert capsys.readouterr().out.startswith(f"fla-recurrent float32 fitted to {H100} + {H200}: 0: bv4")
    assert model_check.main(["--algo", "fla-recurrent", "--fit", f"{H100},NVIDIA B200"]) == 2
    assert "fla-recurrent has no table of 'NVIDIA B200'" in capsys.readouterr().err


def test_the_three_solutions_share_one_memory_latency():
    """L belongs to the memory system, not to a kernel; each standalone solution defines its own copy."""
    assert set(model_check.LATENCY_DEFINITIONS) == set(model_check.ADAPTERS)
    latencies = {name: model_check.model_latency(name) for name in model_check.LATENCY_DEFINITIONS}
    assert len(set(latencies.values())) == 1, latencies


def test_a_latency_scan_moves_the_switches_as_rho_says():
    """--latency-us scales the bandwidth the model is asked about: at the solutions' own L nothing
    changes; below 0.874 µs fla's H200 switch to bv8 comes at B = 16 instead of 32."""
    own = _check("fla-recurrent")
    assert _check_latency("fla-recurrent", model_check.model_latency("fla-recurrent")) == own
    rows = _check_latency("fla-recurrent", 0.85e-6)[H200, "float32"]
    assert [row.default for row in rows if row.batch in (8, 16)] == ["bv4/w1", "bv8/w1"]


def test_predict_gives_batch_ranges_of_a_gpu_without_a_table():
    adapter = model_check.load_adapter("fla-recurrent")
    assert model_check.predict(adapter, "float32", 8e12) == [(1, 27, "bv4/w1"), (28, None, "bv8/w1")]  # a B200
    assert model_check.predict(adapter, "float32", 4.8e12, range(1, 33)) == [(1, 16, "bv4/w1"), (17, None, "bv8/w1")]
    assert model_check.format_prediction("fla-recurrent", "float32", [(1, 27, "bv4/w1"), (28, None, "bv8/w1")]) == \
        "fla-recurrent float32: bv4/w1 B 1-27 · bv8/w1 B >= 28"


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
    table = model_check.markdown_table({"cuda-v4": {(H100, "float32"): rows}})
    assert table.splitlines()[2] == f"| cuda-v4 fp32 | {H100} | 1/3 | 1.049 | 1.100 (B = 1) |"


def test_a_call_moves_the_definitions_bytes():
    """State read and written plus q, k, v, a, b, A_log, dt_bias read and the bf16 output written."""
    per_batch = 2 * 8 * 128 * 128 * 4 + (4 + 4 + 8) * 128 * 2 + 2 * 8 * 2 + 8 * 128 * 2  # fp32 state
    assert model_check.call_bytes(1, "float32") == per_batch + 2 * 8 * 4 == 1_054_816
    assert model_check.call_bytes(64, "float32") == 64 * per_batch + 64
    assert model_check.call_bytes(1, "bfloat16") == per_batch - 8 * 128 * 128 * 4 + 2 * 8 * 4 == 530_528


class _OneConfig:
    """A stand-in adapter whose default model picks ``name`` at every batch size."""

    def __init__(self, name: str):
        self.name = name

    def model_config_name(self, batch: int, state_dtype: str, bandwidth: float) -> str:
        return self.name


def test_predict_latency_is_the_floor_plus_the_tuned_gpus_mean_fixed_term():
    nbytes = model_check.call_bytes(1, "float32")
    floors = {"A": nbytes / 2e12 * 1e6, "B": nbytes / 4e12 * 1e6}
    reports = {"A": (2e12, {"float32": {1: {"x": floors["A"] + 1.0}}}),
               "B": (4e12, {"float32": {1: {"x": floors["B"] + 1.2}, 2: {"y": 9.0}}})}
    row, = model_check.predict_latency(_OneConfig("x"), "float32", 8e12, [1], reports)
    assert (row.batch, row.config, row.nbytes) == (1, "x", nbytes)
    assert row.floor_us == pytest.approx(nbytes / 8e12 * 1e6)
    assert row.fixed_terms_us == pytest.approx((1.0, 1.2))
    assert (row.fixed_us, row.spread_us) == (pytest.approx(1.1), pytest.approx(0.1))
    assert row.predicted_us == pytest.approx(row.floor_us + 1.1)
    untimed, = model_check.predict_latency(_OneConfig("y"), "float32", 8e12, [1], reports)  # timed at B = 2 only
    assert untimed.measured == () and untimed.fixed_us is None and untimed.predicted_us is None
    text = model_check.format_latency_predictions("s", "float32", 8e12, [row, untimed])
    assert "at 8000 GB/s" in text and "A 1.53 (t0 1.00), B 1.46 (t0 1.20)" in text
    assert "predicted 1.23 ± 0.10 µs" in text and text.splitlines()[-1].endswith("none timed | predicted -")


def test_the_command_line_names_a_b200_and_refuses_bad_input(capsys):
    assert model_check.parser().parse_args(["--predict", "B200"]).predict == model_check.PRESETS["b200"] == 8e12
    assert model_check.parser().parse_args(["--predict", "7.672e12", "--batches", "1,16,64"]).batches == [1, 16, 64]
    for argv in (["--predict", "b300"], ["--predict", "b200", "--batches", "0,16"],
                 ["--predict", "b200", "--batches", "x"], ["--batches", "1"]):
        with pytest.raises(SystemExit) as exc:
            model_check.main(argv)
        assert exc.value.code == 2, argv
    assert "--batches needs --predict" in capsys.readouterr().err


#: docs/tuning.md "The contest's GPU on paper": per solution and state dtype, at B = 1, 16, 64 on a
#: B200 (8 TB/s), the default model's config and the predicted µs (floor + the H100's and H200's mean t0).
B200_PAPER = {
    ("fla-recurrent", "float32"): [("bv4/w1", 1.97), ("bv4/w1", 4.51), ("bv8/w1", 12.11)],
    ("cuda-v4", "float32"): [("r4/noalloc/l16/w2", 1.79), ("r4/noalloc/l16/w2", 4.16), ("r16/noalloc/l8/w2", 12.61)],
    ("cuda-v4", "bfloat16"): [("r4/plain/l16/w4", 1.76), ("r4/noalloc", 3.12), ("r16/noalloc/l16/w1/p2s", 6.88)],
    ("cutedsl-bf16", "float32"): [("t16/s1/regs/cs/p2", 1.88), ("t16/s1/mix1/cs/p2", 4.42),
                                  ("t32/s2/mix2/cs/p2", 12.98)],
    ("cutedsl-bf16", "bfloat16"): [("t16/s2/regs/cs", 1.87), ("t16/s1/regs/cs", 3.49), ("t64/s4/regs/cs/p2", 8.29)],
}


#: The GPUs whose tunes measured a solution's state dtype, where not both (none since the H100's bf16 tune of cuda-v4:
#: model_reports keeps it beside the H100's fp32 stand-in).
B200_PAPER_GPUS: dict[tuple[str, str], set[str]] = {}


@pytest.mark.parametrize("name, dtype", list(B200_PAPER))
def test_the_b200_on_paper(name, dtype):
    """The picks and predictions docs/tuning.md shows for the contest's GPU; the picks are the same
    at the B200's own reported bandwidth (7.67 TB/s) and at the 8.18 TB/s an older driver reports."""
    if name == "cuda-v4":
        _require_cuda_v4_build()
    try:
        adapter = model_check.load_adapter(name)
    except ImportError as exc:
        pytest.skip(str(exc))
    rows = model_check.predict_latency(adapter, dtype, model_check.PRESETS["b200"], [1, 16, 64],
                                       model_check.model_reports(name, adapter))
    assert [(row.config, round(row.predicted_us, 2)) for row in rows] == B200_PAPER[name, dtype]
    assert all({device for device, _, _ in row.measured} == B200_PAPER_GPUS.get((name, dtype), {H100, H200})
               for row in rows)
    for bandwidth in (7.672e12, 8.184e12):
        assert [adapter.model_config_name(b, dtype, bandwidth) for b in (1, 16, 64)] == \
            [config for config, _ in B200_PAPER[name, dtype]]
