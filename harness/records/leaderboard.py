"""Leaderboard over every stored run: ``results/leaderboard.csv``.

    python -m harness.records.leaderboard [--results results/]

One row per (hardware, solution, workload set, tier), from the latest run
(by its start time) that measured that solution on that hardware, set and
tier. All latencies are in µs.

Columns (``COLUMNS``):

* ``passed`` / ``total``: workloads with status PASSED / workloads in the run.
* ``median_us``, ``geomean_us``: median and geometric mean of the tier's
  latency over the passed workloads.
* ``score``: the starter kit's first rule (its FAQ until PR #27), the arithmetic
  mean over workloads of the per-workload speedup ``pt-reference µs / solution
  µs``; not the final contest's (fi-baseline µs / solution µs:
  :mod:`harness.records.score`, docs/interop.md). A workload the solution did not pass counts 0; workloads
  with no reference time are left out. The reference times come from the
  same run when it has them, else from the latest run with pt-reference on
  the same hardware, set and tier (``reference_run`` names it).
* ``vs_flashinfer``: geometric mean over workloads both passed of
  ``fi-baseline µs / solution µs``, found the same way as the reference.
* ``x_copy_floor``: median over passed workloads of ``solution µs / copy-floor
  µs``, the floor measured in the same run (the fastest of the device copies of
  the definition's fp32 state bytes in that tier, from the run's ``floors.jsonl``;
  :mod:`harness.records.best_floor`). State-dtype variants are
  divided by the same fp32 floor, so that the column says how far below the
  fp32 limit a smaller state gets.
* ``state_dtype``: ``float32`` or, for a variant labelled
  ``name[<dtype>-state]``, that dtype. Such variants are rows of their own and
  never serve as a baseline.

Numbers are only ever compared within one hardware, set and tier: a speedup
across GPUs or across timing tiers would mean nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from harness.facts import COPY_FLOOR, FLASHINFER_SOLUTION, REFERENCE_SOLUTION, TIERS
from harness.paths import RESULTS_DIR
from harness.records.report import trace_rows
from harness.records.store import StoredRun, load_run, run_dirs
from harness.records.trace import is_floor_label, label_state_dtype
from harness.run_lock import writing_into

LEADERBOARD_FILE = "leaderboard.csv"
#: What identifies a leaderboard row.
ROW_KEY = ["hardware", "set", "tier", "solution"]
COLUMNS = ROW_KEY[:3] + ["solution", "state_dtype", "passed", "total", "median_us", "geomean_us", "score",
                         "vs_flashinfer", "x_copy_floor", "run", "reference_run", "date", "git_commit"]
#: ``state_dtype(label)``: kept under this name for the plots and tools.
state_dtype = label_state_dtype


# ------------------------------------------------------------------ loading


def run_meta(run: StoredRun) -> dict:
    """Set name, start time, commit and hardware of a run, from ``run.json``
    where it exists, else from the traces and the folder name."""
    meta = run.meta
    stamps = [t.evaluation.timestamp for t in run.traces] + [f.timestamp for f in run.floors]
    return {
        "run": run.name,
        "set": Path(str(meta.get("workloads") or "unknown")).name,  # a dataset path -> its folder name
        "started": pd.Timestamp(meta.get("started") or min(stamps, default="1970-01-01T00:00:00+00:00")),
        "git_commit": meta.get("git_commit") or "",
        "hardware": run.hardware,
    }


def measurements_of_run(run_dir: Path) -> pd.DataFrame:
    """Long format of one run: one row per (solution or floor, workload, tier)
    with ``value_us`` (NaN where the tier has no number or the workload
    failed). The floors are rows labelled ``copy-floor`` (``copy-floor[<dtype>-state]``
    for another state dtype). Tiers that nothing in the run measured are dropped."""
    run = load_run(run_dir)
    if not run.traces and not run.floors:
        return pd.DataFrame()
    wide = trace_rows(run.traces, run.floors)
    parts = []
    for tier in TIERS:
        column = f"{tier}_value_us"
        if column not in wide or wide[column].notna().sum() == 0:
            continue
        part = wide[["solution", "workload", "batch_size", "status"]].copy()
        part["tier"] = tier
        part["value_us"] = wide[column].where(wide["status"] == "PASSED").astype(float)
        parts.append(part)
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    frame["state_dtype"] = frame["solution"].map(state_dtype)
    return frame.assign(**run_meta(run))


def load_measurements(results_dir: Path = RESULTS_DIR) -> pd.DataFrame:
    """Every stored run under ``<results_dir>/runs/`` (read by
    :func:`harness.records.store.load_run`), long format
    (see :func:`measurements_of_run`), with the run's name, set, start time,
    commit and hardware on every row."""
    frames = [measurements_of_run(p) for p in run_dirs(results_dir)]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---------------------------------------------------------------- selection


def latest_runs(measurements: pd.DataFrame) -> pd.DataFrame:
    """The run chosen for each (hardware, set, tier, solution): the latest by
    start time. A run where the solution was only skipped (e.g. a GPU-only
    solution in a CPU run) does not count, so it cannot hide a real one."""
    ran = measurements.groupby(["run", "solution"])["status"].transform(lambda s: (s != "SKIPPED").any())
    keys = measurements.loc[ran, ROW_KEY + ["run", "started"]].drop_duplicates()
    return keys.sort_values(["started", "run"]).groupby(ROW_KEY, sort=False).tail(1)


def baseline_times(measurements: pd.DataFrame, baseline: str, hardware: str, set_name: str, tier: str,
                   run: str) -> tuple[pd.Series, str | None]:
    """µs per workload uuid of ``baseline`` on the same hardware, set and tier:
    from ``run`` if it measured the baseline, else from the latest run that did.
    Returns the times and the run they come from (None: no such run)."""
    m = measurements
    rows = m[(m["solution"] == baseline) & (m["hardware"] == hardware) & (m["set"] == set_name)
             & (m["tier"] == tier) & m["value_us"].notna()]
    if rows.empty:
        return pd.Series(dtype=float), None
    chosen = run if (rows["run"] == run).any() else rows.sort_values(["started", "run"])["run"].iloc[-1]
    return rows[rows["run"] == chosen].groupby("workload")["value_us"].median(), chosen


# ------------------------------------------------------------- row formulas


def geomean(values) -> float:
    """Geometric mean of positive values (NaN when there are none)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.log(values).mean())) if values.size else float("nan")


def contest_score(times: pd.Series, reference: pd.Series) -> float:
    """Arithmetic mean over workloads of ``reference µs / solution µs``.

    ``times``: the solution's µs per workload uuid, NaN where it did not pass
    (or left no trace); such a workload counts 0. Workloads without a
    reference time are left out (see module doc)."""
    scored = times[times.index.isin(reference.index)]
    if scored.empty:
        return float("nan")
    speedups = reference.reindex(scored.index) / scored
    return float(speedups.fillna(0.0).mean())


def ratio_geomean(times: pd.Series, baseline: pd.Series) -> float:
    """Geometric mean of ``baseline µs / solution µs`` over workloads both timed."""
    return geomean(baseline.reindex(times.index) / times)


def copy_floor_multiple(times: pd.Series, floors: pd.Series) -> float:
    """Median of ``solution µs / copy-floor µs`` over workloads both timed."""
    ratios = (times / floors.reindex(times.index)).dropna()
    return float(ratios.median()) if len(ratios) else float("nan")


def leaderboard_row(measurements: pd.DataFrame, key: pd.Series) -> dict:
    """One leaderboard row for the run ``key`` names (see module doc)."""
    m = measurements
    in_run = m[(m["run"] == key["run"]) & (m["tier"] == key["tier"])]
    solution = in_run[in_run["solution"] == key["solution"]]
    # every workload of the run, so one the solution left no trace for still counts
    workloads = pd.Index(sorted(in_run["workload"].unique()))
    times = solution.groupby("workload")["value_us"].median().reindex(workloads)
    floors = in_run[in_run["solution"] == COPY_FLOOR].groupby("workload")["value_us"].median()
    lookup = (key["hardware"], key["set"], key["tier"], key["run"])
    reference, reference_run = baseline_times(m, REFERENCE_SOLUTION, *lookup)
    flashinfer, _ = baseline_times(m, FLASHINFER_SOLUTION, *lookup)
    timed = times.dropna()
    first = solution.iloc[0]
    return {
        "hardware": key["hardware"], "set": key["set"], "tier": key["tier"], "solution": key["solution"],
        "state_dtype": first["state_dtype"], "passed": int((solution["status"] == "PASSED").sum()),
        "total": len(workloads), "median_us": float(timed.median()) if len(timed) else float("nan"),
        "geomean_us": geomean(timed), "score": contest_score(times, reference),
        "vs_flashinfer": ratio_geomean(times, flashinfer), "x_copy_floor": copy_floor_multiple(times, floors),
        "run": key["run"], "reference_run": reference_run or "", "date": first["started"].isoformat(),
        "git_commit": first["git_commit"],
    }


def _tier_order(tiers: pd.Series) -> pd.Series:
    return tiers.map({t: i for i, t in enumerate(TIERS)})


def build_leaderboard(results_dir: Path = RESULTS_DIR) -> pd.DataFrame:
    """The leaderboard of every run under ``results_dir`` (see module doc):
    sorted by hardware, set, tier, fp32 before other state dtypes, best score first."""
    m = load_measurements(results_dir)
    if m.empty:
        return pd.DataFrame(columns=COLUMNS)
    keys = latest_runs(m[~m["solution"].map(is_floor_label)])
    board = pd.DataFrame([leaderboard_row(m, key) for _, key in keys.iterrows()], columns=COLUMNS)
    board["_tier"] = _tier_order(board["tier"])
    board["_fp32"] = board["state_dtype"] != "float32"
    board = board.sort_values(["hardware", "set", "_tier", "_fp32", "score", "median_us"],
                              ascending=[True, True, True, True, False, True], na_position="last")
    return board.drop(columns=["_tier", "_fp32"]).reset_index(drop=True)


def write_leaderboard(results_dir: Path = RESULTS_DIR) -> Path:
    """Build the leaderboard and write it to ``<results_dir>/leaderboard.csv``."""
    path = Path(results_dir) / LEADERBOARD_FILE
    with writing_into([path]):  # never while a run's vault watches results/ (harness/run_lock.py)
        path.parent.mkdir(parents=True, exist_ok=True)
        build_leaderboard(results_dir).to_csv(path, index=False, float_format="%.6g")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build results/leaderboard.csv from every stored run.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (results/)")
    args = parser.parse_args(argv)
    if not (Path(args.results) / "runs").is_dir():
        parser.error(f"--results {args.results}: no runs/ folder in it (a results folder holds runs/<run id>/)")
    path = Path(args.results) / LEADERBOARD_FILE
    if build_leaderboard(args.results).empty and path.is_file() and len(pd.read_csv(path)):
        print(f"error: no run under {args.results}/runs could be read (the notes above say why); {path} is left "
              "as it was", file=sys.stderr)
        return 2
    path = write_leaderboard(args.results)
    rows = len(pd.read_csv(path))
    print(f"leaderboard: {path} ({rows} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
