"""PNG plots from synthetic traces (helpers from test_leaderboard.py)."""

from __future__ import annotations

from support.records import B200, H100, make_floor, make_trace, write_run

from harness.records.plots import headline_tier, latency_plot_path, tiers_plot_path, write_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def sweep_traces(tiers=("cupti", "events", "sync")) -> list:
    """copy floor, reference, two solutions and a bf16-state variant over the sweep's batch sizes."""
    factors = {"pt-reference": 80.0, "cuda-v4": 1.2, "fla-recurrent": 1.4, "cutedsl-bf16[bfloat16-state]": 0.6}

    def us(b, f):
        return {t: (2 + 0.35 * b) * f * (1 + i) for i, t in enumerate(tiers)}

    traces = [make_floor(f"w{b}", us(b, 1.0), batch=b) for b in SWEEP]
    traces += [make_trace(name, f"w{b}", us(b, f), batch=b) for name, f in factors.items() for b in SWEEP]
    traces.append(make_trace("broken", "w1", {}, batch=1, status="RUNTIME_ERROR"))  # no curve, no bar
    return traces


def assert_png(path):
    assert path.exists() and path.stat().st_size > 5000
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plots_from_synthetic_traces(tmp_path):
    write_run(tmp_path, "h100-sweep", sweep_traces(), set_name="sweep", hardware=H100)
    write_run(tmp_path, "b200-sweep", sweep_traces(("events",)), set_name="sweep", hardware=B200)
    notes = []
    written = write_plots(tmp_path, log=notes.append)
    plots = tmp_path / "plots"
    expected = {latency_plot_path(plots, H100, t) for t in ("cupti", "events", "sync")} | {
        tiers_plot_path(plots, H100), latency_plot_path(plots, B200, "events")}
    assert set(written) == expected
    for path in written:
        assert_png(path)
    # the B200 run has one tier only: its tier plot is skipped with a note
    assert any(B200 in n and "tier plot skipped" in n for n in notes)


def test_missing_data_is_a_note_not_an_error(tmp_path):
    notes = []
    assert write_plots(tmp_path, log=notes.append) == []
    assert notes and "no traces" in notes[0]
    traces = [make_floor("w0", {"events": 5.0}), make_trace("pt-reference", "w0", {"events": 5.0})]
    write_run(tmp_path, "contest", traces, set_name="contest-v1")
    notes.clear()
    assert write_plots(tmp_path, log=notes.append) == []
    assert any("no 'sweep' run" in n for n in notes)


def test_headline_tier_prefers_cupti_then_events():
    assert headline_tier(["sync", "events", "cupti"]) == "cupti"
    assert headline_tier(["sync", "events"]) == "events"
    assert headline_tier(["wallclock"]) == "wallclock"
    assert headline_tier([]) is None
