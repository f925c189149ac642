"""PNG plots of the stored runs, under ``results/plots/``.

    python -m harness.records.plots [--results results/]

* ``latency_vs_batch_<hardware>_<tier>.png``: latency (µs) against batch size
  on the ``sweep`` set, one line per solution (its latest sweep run on that
  hardware and tier), with the copy floor as a dashed black line; log-log.
  One file per (hardware, tier); :func:`headline_tier` names the one to show.
* ``tiers_b1_<hardware>.png``: the timing tiers side by side per solution at
  batch size 1 (median over the B = 1 workloads), from the latest run on that
  hardware that measured several tiers; grouped bars, log y axis.

Missing data skips a plot with a printed note; it is never an error.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on the benchmark machines

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from harness.facts import COPY_FLOOR, HEADLINE_TIERS, Tier  # noqa: E402
from harness.paths import RESULTS_DIR  # noqa: E402
from harness.records.leaderboard import latest_runs, load_measurements, state_dtype  # noqa: E402
from harness.records.trace import is_floor_label  # noqa: E402
from harness.run_lock import writing_into  # noqa: E402

SWEEP_SET = "sweep"
PLOTS_DIR = "plots"
#: One colour per tier, the same in every plot.
TIER_COLORS = {Tier.CUPTI: "#1b9e77", Tier.EVENTS: "#7570b3", Tier.SYNC: "#d95f02", Tier.WALLCLOCK: "#666666"}


def slug(text: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3`` (safe in a file name)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def latency_plot_path(plots_dir: Path, hardware: str, tier: str) -> Path:
    return Path(plots_dir) / f"latency_vs_batch_{slug(hardware)}_{tier}.png"


def tiers_plot_path(plots_dir: Path, hardware: str) -> Path:
    return Path(plots_dir) / f"tiers_b1_{slug(hardware)}.png"


def headline_tier(tiers) -> str | None:
    """The tier to lead with among ``tiers``: cupti (pure GPU time) if there,
    else events, then the CPU's wallclock, then sync."""
    return next((t for t in HEADLINE_TIERS if t in set(tiers)), None)


def _us_label(value: float, _pos=None) -> str:
    return f"{value:g}"


def _bar_label(value: float) -> str:
    """µs for a bar: 3 significant digits, never in exponent notation."""
    if np.isnan(value):
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _log_axis(axis) -> None:
    """Log ticks at 1, 2 and 5 per decade, labelled as plain numbers (no
    10^n), so that even an axis spanning less than a decade has labels."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(_us_label))
    axis.set_minor_formatter(NullFormatter())


# ----------------------------------------------------- latency vs batch size


def sweep_curves(measurements: pd.DataFrame, hardware: str, tier: str) -> dict[str, pd.Series]:
    """Median µs per batch size for each solution (latest sweep run of each)
    and for the copy floor (latest sweep run that has one), on one hardware
    and tier; slowest at the largest batch first."""
    m = measurements[(measurements["hardware"] == hardware) & (measurements["set"] == SWEEP_SET)
                     & (measurements["tier"] == tier)]
    curves = {}
    for _, key in latest_runs(m).sort_values("solution").iterrows():
        rows = m[(m["run"] == key["run"]) & (m["solution"] == key["solution"])]
        curve = rows.groupby("batch_size")["value_us"].median().dropna()
        if not curve.empty:
            curves[key["solution"]] = curve
    # slowest first: the legend then lists the lines in the order they stack at the right edge
    return dict(sorted(curves.items(), key=lambda item: -item[1].iloc[-1]))


def solution_colors(names) -> dict[str, str]:
    """A fixed colour per solution (by sorted name), so that a solution has the
    same colour in every plot of a run of this command."""
    palette = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors
    names = sorted(n for n in set(names) if not is_floor_label(n))
    return {n: to_hex(palette[i % len(palette)]) for i, n in enumerate(names)}


def plot_latency_vs_batch(curves: dict[str, pd.Series], hardware: str, tier: str, path: Path,
                          colors: dict[str, str] | None = None) -> Path:
    """Log-log latency vs batch size; non-fp32 state variants dashed."""
    colors = colors or solution_colors(curves)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    batches = sorted({b for c in curves.values() for b in c.index})
    for name, curve in curves.items():
        if is_floor_label(name):
            ax.plot(curve.index, curve.values, "k--" if name == COPY_FLOOR else "k:", linewidth=2,
                    label=f"copy floor ({state_dtype(name)} state read + write)".replace("float32", "fp32"))
            continue
        style = "-" if state_dtype(name) == "float32" else "--"
        ax.plot(curve.index, curve.values, style, marker="o", markersize=4, label=name, color=colors[name])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(batches)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    _log_axis(ax.yaxis)
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"latency, µs ({tier} tier)")
    ax.set_title(f"gdn_decode_qk4_v8_d128_k_last, {SWEEP_SET} set\n{hardware}, {tier} tier")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return _save(fig, path)


# ----------------------------------------------------------- tiers at B = 1


def multi_tier_run(measurements: pd.DataFrame, hardware: str) -> str | None:
    """The latest run on ``hardware`` with numbers in two tiers or more."""
    m = measurements[(measurements["hardware"] == hardware) & measurements["value_us"].notna()]
    tiers = m.groupby("run")["tier"].nunique()
    runs = m[m["run"].isin(tiers[tiers >= 2].index)][["run", "started"]].drop_duplicates()
    return runs.sort_values(["started", "run"])["run"].iloc[-1] if not runs.empty else None


def tier_table(measurements: pd.DataFrame, run: str) -> pd.DataFrame:
    """Median µs at batch size 1 per solution (rows, copy floor first) and tier (columns)."""
    m = measurements[(measurements["run"] == run) & (measurements["batch_size"] == 1)]
    table = m.pivot_table(index="solution", columns="tier", values="value_us", aggfunc="median")
    table = table.dropna(how="all")
    order = sorted(table.index, key=lambda s: (not is_floor_label(s), s))
    tiers = [t for t in TIER_COLORS if t in table.columns]
    return table.loc[order, tiers]


def plot_tiers(table: pd.DataFrame, title: str, path: Path) -> Path:
    """Grouped bars: one group per solution, one bar per tier, log y axis,
    each bar labelled with its µs."""
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(table) + 2), 5.5))
    width = 0.8 / len(table.columns)
    x = np.arange(len(table))
    for i, tier in enumerate(table.columns):
        values = table[tier].to_numpy(dtype=float)
        bars = ax.bar(x + (i - (len(table.columns) - 1) / 2) * width, values, width, label=tier,
                      color=TIER_COLORS[tier])
        ax.bar_label(bars, labels=[_bar_label(v) for v in values], fontsize=7,
                     rotation=90, padding=2)
    ax.set_yscale("log")
    _log_axis(ax.yaxis)
    low, high = np.nanmin(table.to_numpy()), np.nanmax(table.to_numpy())
    ax.set_ylim(low / 2, high * 6)  # headroom for the rotated value labels
    ax.set_xticks(x)
    names = ["copy floor\n(limit)" if s == COPY_FLOOR else s.replace("[", "\n[") for s in table.index]
    ax.set_xticklabels(names, fontsize=9, rotation=20, ha="right")
    ax.set_ylabel("latency at batch size 1, µs (median over workloads)")
    ax.set_title(title)
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(title="tier", loc="upper left", fontsize=9)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ driver


def write_plots(results_dir: Path = RESULTS_DIR, log=print) -> list[Path]:
    """Every plot the stored runs allow; a note via ``log`` for each skipped one."""
    measurements = load_measurements(results_dir)
    plots_dir = Path(results_dir) / PLOTS_DIR
    if measurements.empty:
        log(f"note: no traces under {Path(results_dir) / 'runs'}; no plots")
        return []
    colors = solution_colors(measurements["solution"])
    with writing_into([plots_dir]):  # never while a run's vault watches results/ (harness/run_lock.py)
        return [path for hardware in sorted(measurements["hardware"].unique())
                for path in _hardware_plots(measurements, hardware, plots_dir, colors, log)]


def _hardware_plots(measurements: pd.DataFrame, hardware: str, plots_dir: Path, colors: dict, log) -> list[Path]:
    """One GPU's plots: latency against batch size per tier of its sweep runs, and the tiers at B = 1."""
    written = []
    on_hw = measurements[measurements["hardware"] == hardware]
    sweep_tiers = on_hw.loc[(on_hw["set"] == SWEEP_SET) & on_hw["value_us"].notna(), "tier"].unique()
    if len(sweep_tiers) == 0:
        log(f"note: {hardware}: no '{SWEEP_SET}' run; latency-vs-batch plot skipped")
    for tier in sorted(sweep_tiers, key=list(TIER_COLORS).index):
        curves = sweep_curves(measurements, hardware, tier)
        written.append(plot_latency_vs_batch(curves, hardware, tier,
                                             latency_plot_path(plots_dir, hardware, tier), colors))
    run = multi_tier_run(measurements, hardware)
    table = tier_table(measurements, run) if run else pd.DataFrame()
    if table.empty:
        log(f"note: {hardware}: no run with several tiers at batch size 1; tier plot skipped")
        return written
    run_set = measurements.loc[measurements["run"] == run, "set"].iloc[0]
    title = f"timing tiers at batch size 1\n{hardware}, {run_set} set, run {run.split('_')[0]}"
    written.append(plot_tiers(table, title, tiers_plot_path(plots_dir, hardware)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plot the stored runs into results/plots/.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (results/)")
    args = parser.parse_args(argv)
    for path in write_plots(args.results):
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
