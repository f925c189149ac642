"""Regenerate the results section of README.md from the leaderboard and plots.

    python -m tools.readme_results [--readme README.md] [--results results/]

Only the text between ``<!-- results:start -->`` and ``<!-- results:end -->``
is replaced: a line saying what the columns mean and the command that
regenerates everything, then per GPU, the one with the latest run first, a
line naming it with its latest run's date and commit, its table (headline tier
of each workload set) and its plots. A README without both markers
is an error (exit 1); this command never adds them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import pandas as pd

from harness.records.leaderboard import LEADERBOARD_FILE
from harness.paths import REPO_ROOT, RESULTS_DIR
from harness.records.plots import PLOTS_DIR, headline_tier, latency_plot_path, tiers_plot_path

START_MARKER = "<!-- results:start -->"
END_MARKER = "<!-- results:end -->"
REGENERATE = "python -m harness.records.leaderboard && python -m harness.records.plots && python -m tools.readme_results"
TABLE_HEADER = ("| solution | set | tier | passed | median µs | geomean µs | score | ×copy floor | vs FlashInfer |\n"
                "|---|---|---|---:|---:|---:|---:|---:|---:|")


class MarkerError(Exception):
    """The README lacks a results marker (or has them in the wrong order)."""

    def __init__(self, readme: Path, marker: str):
        super().__init__(f"{readme} lacks the marker {marker}")
        self.marker = marker


# ------------------------------------------------------------- formatting


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_num(value, suffix: str = "") -> str:
    """About 3 significant digits, never in exponent notation ('–' for none)."""
    if _missing(value):
        return "–"
    text = f"{value:,.0f}" if value >= 100 else (f"{value:.1f}" if value >= 10 else f"{value:.2f}")
    return text + suffix


def table_rows(board: pd.DataFrame) -> list[str]:
    """Markdown rows in the leaderboard's order."""
    return [f"| {r.solution} | {r.set} | {r.tier} | {r.passed}/{r.total} | {fmt_num(r.median_us)} | "
            f"{fmt_num(r.geomean_us)} | {fmt_num(r.score)} | {fmt_num(r.x_copy_floor, '×')} | "
            f"{fmt_num(r.vs_flashinfer, '×')} |" for r in board.itertuples()]


# --------------------------------------------------------------- selection


def gpus_by_latest_run(board: pd.DataFrame) -> list[str]:
    """Every GPU's hardware name, the one with the latest run first (CPU runs are named ``CPU ...``)."""
    gpus = board[~board["hardware"].str.startswith("CPU")]
    return list(gpus.groupby("hardware")["date"].max().sort_values(ascending=False).index)


def headline_rows(board: pd.DataFrame, hardware: str) -> pd.DataFrame:
    """That hardware's rows in the headline tier of each workload set."""
    rows = board[board["hardware"] == hardware]
    keep = [rows[(rows["set"] == s) & (rows["tier"] == headline_tier(rows.loc[rows["set"] == s, "tier"]))]
            for s in rows["set"].drop_duplicates()]
    return pd.concat(keep)


def _link(path: Path, readme_dir: Path) -> str:
    return Path(os.path.relpath(path, readme_dir)).as_posix()


def render_section(board: pd.DataFrame, results_dir: Path, readme_dir: Path) -> str:
    """The markdown between the markers (see module doc); links relative to ``readme_dir``."""
    gpus = gpus_by_latest_run(board)
    if not gpus:
        return f"\nNo GPU run is stored yet. Regenerate with `{REGENERATE}`.\n"
    lines = [
        "", "Score: the mean over workloads of the speedup vs pt-reference (the starter kit's first rule; the "
        "final contest's: `python -m harness score`); ×copy floor: median "
        "latency over a device copy of the state bytes (1.00× is the physical limit). Regenerate with "
        f"`{REGENERATE}`; every tier and GPU is in `{_link(Path(results_dir) / LEADERBOARD_FILE, readme_dir)}`.", ""]
    for hardware in gpus:
        lines += gpu_block(board, hardware, Path(results_dir) / PLOTS_DIR, readme_dir)
    return "\n".join(lines)


def gpu_block(board: pd.DataFrame, hardware: str, plots_dir: Path, readme_dir: Path) -> list[str]:
    """One GPU's lines: its name with its latest run's date and commit, its table, its plots."""
    rows = headline_rows(board, hardware)
    latest = rows.sort_values("date").iloc[-1]
    commit = latest["git_commit"] if isinstance(latest["git_commit"], str) and latest["git_commit"] else "unknown"
    lines = [f"**{hardware}**, latest run {latest['date'][:16].replace('T', ' ')} UTC, commit `{commit}`.",
             "", TABLE_HEADER, *table_rows(rows), ""]
    tier = headline_tier(rows["tier"])
    for title, path in ((f"Latency vs batch size ({tier} tier)", latency_plot_path(plots_dir, hardware, tier)),
                        ("Timing tiers at batch size 1", tiers_plot_path(plots_dir, hardware))):
        if path.exists():
            lines += [f"![{title}, {hardware}]({_link(path, readme_dir)})", ""]
    return lines


# ------------------------------------------------------------------ README


def replace_section(text: str, section: str, readme: Path) -> str:
    """``text`` with everything between the markers replaced by ``section``.

    Raises:
        MarkerError: a marker is missing, or the end comes before the start.
    """
    for marker in (START_MARKER, END_MARKER):
        if marker not in text:
            raise MarkerError(readme, marker)
    start = text.index(START_MARKER) + len(START_MARKER)
    end = text.index(END_MARKER, start) if END_MARKER in text[start:] else -1
    if end < 0:
        raise MarkerError(readme, f"{END_MARKER} after {START_MARKER}")
    return text[:start] + section + text[end:]


def update_readme(readme: Path, results_dir: Path = RESULTS_DIR) -> None:
    """Rewrite the results section of ``readme`` in place.

    Raises:
        MarkerError: see :func:`replace_section`.
        FileNotFoundError: no leaderboard yet.
    """
    board = pd.read_csv(Path(results_dir) / LEADERBOARD_FILE, dtype={"git_commit": str})
    section = render_section(board, Path(results_dir).resolve(), readme.resolve().parent)
    readme.write_text(replace_section(readme.read_text(), section, readme))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate README.md's results section.")
    parser.add_argument("--readme", type=Path, default=REPO_ROOT / "README.md")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (results/)")
    args = parser.parse_args(argv)
    board_file = args.results / LEADERBOARD_FILE
    if not args.readme.is_file():
        print(f"error: {args.readme} does not exist", file=sys.stderr)
        return 2
    if not board_file.is_file():
        print(f"error: {board_file} does not exist; run python -m harness.records.leaderboard", file=sys.stderr)
        return 2
    try:
        update_readme(args.readme, args.results)
    except MarkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, KeyError) as exc:
        print(f"error: {board_file}: not a leaderboard as harness.records.leaderboard writes it "
              f"({type(exc).__name__}: {exc}); run python -m harness.records.leaderboard", file=sys.stderr)
        return 2
    print(f"updated the results section of {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
