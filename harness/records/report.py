"""Per-run summary: a flat table of the traces and floors (CSV) and the printed table."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from harness.facts import CONTEST_TIER, FLASHINFER_SOLUTIONS, TIERS
from harness.records.best_floor import BestFloor, best_floors
from harness.records.trace import (FloorMeasurement, TierFigure, Trace, is_floor_label, label_state_dtype,
                                   variant_label)

#: Tier figures copied into the table, as ``<tier>_<field>`` columns. ``host_call_us`` and
#: ``host_probe_us`` (the events and sync tiers' diagnostics: a call's host time, the host's speed) sit
#: beside their figure because a sync figure of a Python launch moves with the host's speed, twice the
#: time while a vCPU runs slow (docs/timing.md; results/proof/20261127-H100-host-path-6470d35): a
#: reader comparing two runs' sync columns needs both.
TIER_FIELDS = ("value_us", "p10_us", "p90_us", "iters", "x_copy_floor", "achieved_gb_per_s",
               "speedup_vs_reference", "span_median_us", "kernels_per_call", "host_call_us", "host_probe_us")
#: ``log`` of a floor's row.
FLOOR_LOG = "physical limit, not checked"


def _tier_columns(row: dict, tiers: dict[str, TierFigure]) -> None:
    """Per tier: ``<tier>_unavailable`` (the reason) or the ``TIER_FIELDS`` that have a value."""
    for tier in TIERS:
        figure = tiers.get(tier)
        if figure is None:
            continue
        if not figure.available:
            row[f"{tier}_unavailable"] = figure.reason
            continue
        for key in TIER_FIELDS:
            value = getattr(figure, key)
            if value is not None:
                row[f"{tier}_{key}"] = value


def floor_row(floor: FloorMeasurement) -> dict:
    """A floor as a table row: solution ``copy-floor`` (``copy-floor[<dtype>-state]``
    for another state dtype), status PASSED meaning only that it was measured. For a
    :class:`~harness.records.best_floor.BestFloor`, ``<tier>_method`` names the copy each
    tier's figure comes from and the log every copy measured."""
    tier = floor.headline_tier()
    row = {"solution": floor.label, "workload": floor.workload, "batch_size": floor.batch_size,
           "status": "PASSED", "hardware": floor.environment.hardware, "device": floor.environment.device,
           "timestamp": floor.timestamp,
           "headline_tier": tier, "latency_us": floor.tiers[tier].value_us if tier else None}
    _tier_columns(row, floor.tiers)
    methods = floor.tier_methods if isinstance(floor, BestFloor) else {t: floor.method for t in floor.tiers}
    for name, method in methods.items():
        row[f"{name}_method"] = method
    measured = floor.methods if isinstance(floor, BestFloor) else [floor.method]
    row["log"] = f"{FLOOR_LOG}; copies measured: {', '.join(measured)}"
    return row


def trace_row(trace: Trace) -> dict:
    """A trace as a table row (see :func:`trace_rows`)."""
    ev = trace.evaluation
    perf = ev.performance
    row = {
        "solution": trace.solution, "workload": trace.workload.uuid, "batch_size": trace.workload.batch_size,
        "status": ev.status.value, "hardware": ev.environment.hardware, "device": ev.environment.device,
        "timestamp": ev.timestamp,
        "headline_tier": perf.headline_tier if perf else None,
        "latency_us": perf.latency_ms * 1e3 if perf and perf.latency_ms else None,
    }
    extra = ev.correctness.extra if ev.correctness else None
    for name, err in (extra.per_output.items() if extra else ()):
        row[f"{name}_max_abs_err"] = err.max_abs
        row[f"{name}_max_rel_err"] = err.max_rel
        row[f"{name}_rel_l2_err"] = err.rel_l2
    if extra and extra.inputs_modified:  # accepted under the contest's rules, shown wherever the row goes
        row["inputs_modified"] = ",".join(extra.inputs_modified)
    if perf:
        _tier_columns(row, perf.tiers)
    row["log"] = ev.log.strip().splitlines()[-1][:200] if ev.log.strip() else ""
    return row


def trace_rows(traces: list[Trace], floors: list[FloorMeasurement] = ()) -> pd.DataFrame:
    """One row per floor (first) and per trace: solution, workload, batch
    size, status, errors and, per tier, µs / p10 / p90 / iterations / multiple
    of the copy floor / GB/s / speedup vs pt-reference. The floors are the best of
    the copies measured, one row per (workload, state dtype, hardware, device)
    (:func:`harness.records.best_floor.best_floors`), whatever number of copies ``floors`` holds."""
    return pd.DataFrame([floor_row(f) for f in best_floors(list(floors))] + [trace_row(t) for t in traces])


def write_summary(traces: list[Trace], path: Path, floors: list[FloorMeasurement] = ()) -> pd.DataFrame:
    """Write the table of :func:`trace_rows` to ``path`` (CSV) and return it.
    (A run folder's ``summary.csv`` is written by :class:`harness.records.store.RunWriter`.)"""
    frame = trace_rows(traces, floors)
    frame.to_csv(path, index=False, float_format="%.6g")
    return frame


def escape(text: str) -> str:
    """``text`` as rich shows it literally: a label's ``[bfloat16-state]`` is not a style tag."""
    from rich.markup import escape as rich_escape

    return rich_escape(str(text))


def _fmt(value, spec: str) -> str:
    return "" if value is None or pd.isna(value) else format(value, spec)


def print_table(frame: pd.DataFrame, console=None) -> None:
    """Print one row per (solution, workload) with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="gdn_decode_qk4_v8_d128_k_last", show_lines=False)
    for col in ("solution", "workload", "B", "status", "out max abs", "state max abs", "tier", "µs", "×floor",
                "speedup"):
        table.add_column(col, justify="left" if col in ("solution", "workload", "status", "tier") else "right")
    for _, r in frame.iterrows():
        # a SKIPPED/failed row has no headline tier: NaN in a frame where other rows have one
        tier = r.get("headline_tier") if isinstance(r.get("headline_tier"), str) else None
        style = "green" if r["status"] == "PASSED" else ("yellow" if r["status"] == "SKIPPED" else "red")
        table.add_row(
            escape(r["solution"]), str(r["workload"])[:8], str(r["batch_size"]), f"[{style}]{r['status']}[/{style}]",
            _fmt(r.get("output_max_abs_err"), ".2e"), _fmt(r.get("new_state_max_abs_err"), ".2e"),
            tier or "", _fmt(r.get("latency_us"), ".2f"),
            _fmt(r.get(f"{tier}_x_copy_floor") if tier else None, ".2f"),
            _fmt(r.get(f"{tier}_speedup_vs_reference") if tier else None, ".1f"))
    console.print(table)


def _geomean(values) -> float | None:
    values = [v for v in values if v is not None and v == v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _first_failure(rows: pd.DataFrame) -> str:
    """``STATUS: first line of the log`` of the first row that did not pass (nor was skipped alone)."""
    bad = rows[rows["status"] != "PASSED"]
    if bad.empty:
        return ""
    first = bad.iloc[0]
    log = first.get("log") if isinstance(first.get("log"), str) else ""
    counts = ", ".join(f"{n} {s}" for s, n in bad["status"].value_counts().items())
    return f"{counts}: {log.splitlines()[0] if log else ''}"


def _inputs_modified(rows: pd.DataFrame) -> str:
    """The inputs a solution's calls changed on any of ``rows`` (comma list, '' if none)."""
    if "inputs_modified" not in rows:
        return ""
    names = {n for cell in rows["inputs_modified"] if isinstance(cell, str) for n in cell.split(",") if n}
    return ",".join(sorted(names))


def _device(row) -> str:
    """A row's device (``cuda:1``), '' where the run did not record one (runs before the field)."""
    device = row.get("device")
    return device if isinstance(device, str) else ""


def solution_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per solution label (a non-fp32 state dtype is a label of its own) of a run's table
    (:func:`trace_rows`), copy floors left out.

    Columns: ``solution``, ``passed`` (``passed/total``), ``tier`` (the headline tier), ``median_us``
    and ``geomean_us`` over the passed workloads, ``x_floor`` (median × copy floor), ``score`` (the
    starter kit's first rule, not the final contest's, which ``python -m harness score`` computes:
    mean over the passed workloads of pt-reference's latency over this one's; None without
    pt-reference in the run) and ``score_tier`` (``contest`` where the run has that tier, else
    the headline tier), ``vs_flashinfer`` (geomean over shared passed
    workloads of FlashInfer's latency over this one's, same state dtype and device: > 1 is faster),
    ``below_floor`` (workloads whose figure is under the copy floor: on a CPU, wall-clock noise; on a
    GPU, a kernel faster than the copies measured),
    ``problem`` (status counts and the first failure's reason), ``skipped_only``, ``inputs_modified``
    (the inputs its calls changed on any workload, accepted by ``--rules contest``; '' if none).
    """
    rows = frame[~frame["solution"].astype(str).map(is_floor_label)]
    latency = {}  # (label, workload, device) -> µs of passed rows: ratios only within one GPU (--gpus)
    for _, r in rows[rows["status"] == "PASSED"].iterrows():
        latency[(r["solution"], r["workload"], _device(r))] = r.get("latency_us")
    out = []
    for label, mine in rows.groupby("solution", sort=False):
        passed = mine[mine["status"] == "PASSED"]
        tier = next((t for t in passed["headline_tier"] if isinstance(t, str)), None)
        floors = passed[f"{tier}_x_copy_floor"].dropna() if tier and f"{tier}_x_copy_floor" in passed else pd.Series()
        score_tier = CONTEST_TIER if passed.get(f"{CONTEST_TIER}_speedup_vs_reference", pd.Series()).notna().any() \
            else tier  # the contest's own timer where the run has it: the score it predicts is the contest's
        speedups = (passed[f"{score_tier}_speedup_vs_reference"].dropna()
                    if score_tier and f"{score_tier}_speedup_vs_reference" in passed else pd.Series())
        state_dtype = label_state_dtype(label)
        flashinfer = (variant_label(FLASHINFER_SOLUTIONS[state_dtype], state_dtype)
                      if state_dtype in FLASHINFER_SOLUTIONS else None)
        keys = [(r["workload"], _device(r)) for _, r in passed.iterrows()] if flashinfer != label else []
        ratios = [latency[(flashinfer, *key)] / latency[(label, *key)] for key in keys
                  if (flashinfer, *key) in latency and latency[(label, *key)]]
        out.append({
            "solution": label, "passed": f"{len(passed)}/{len(mine)}", "tier": tier,
            "median_us": passed["latency_us"].median() if len(passed) else None,
            "geomean_us": _geomean(passed["latency_us"]),
            "x_floor": floors.median() if len(floors) else None,
            "score": speedups.mean() if len(speedups) else None, "score_tier": score_tier,
            "vs_flashinfer": _geomean(ratios),
            "below_floor": int((floors < 1.0).sum()),
            "problem": _first_failure(mine),
            "skipped_only": set(mine["status"]) <= {"PASSED", "SKIPPED"},
            "inputs_modified": _inputs_modified(mine),
        })
    return pd.DataFrame(out)


#: The summary's score column: pt-reference's rule, named so, as the final contest's is another
#: (fi-baseline µs / solution µs: ``python -m harness score``, docs/interop.md).
SCORE_HEADER = "score vs pt-ref"


def print_summary(summary: pd.DataFrame, console=None) -> None:
    """The run's answer in one screen: one row per solution (see :func:`solution_summary`)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="gdn_decode_qk4_v8_d128_k_last: one row per solution (per workload: --verbose, summary.csv)")
    for col in ("solution", "passed", "tier", "median µs", "geomean µs", "×floor", SCORE_HEADER, "vs FlashInfer",
                "problem"):
        table.add_column(col, justify="left" if col in ("solution", "passed", "tier", "problem") else "right",
                         overflow="fold" if col == "problem" else "ellipsis")
    for _, r in summary.iterrows():
        done, total = map(int, r["passed"].split("/"))
        style = "green" if done == total else ("yellow" if r["skipped_only"] else "red")
        x_floor = _fmt(r["x_floor"], ".2f")
        tier = r["tier"] if isinstance(r["tier"], str) else ""
        if r["below_floor"]:  # on the host's clock a copy cannot be beaten; on the GPU's a kernel can beat torch's
            x_floor += f" [yellow]({r['below_floor']} < 1{': noise' if tier == 'wallclock' else ''})[/yellow]"
        score = _fmt(r["score"], ".1f")
        if score and isinstance(r["score_tier"], str) and r["score_tier"] != tier:
            score += f" ({r['score_tier']})"  # read from another tier than the row's figures
        problem = escape((r["problem"] or "")[:120])
        if r.get("inputs_modified"):  # accepted (--rules contest), never silently
            problem = (problem + "; " if problem else "") + \
                f"[yellow]modifies its input {escape(r['inputs_modified'])} (accepted: --rules contest)[/yellow]"
        table.add_row(escape(r["solution"]), f"[{style}]{r['passed']}[/{style}]", tier, _fmt(r["median_us"], ".2f"),
                      _fmt(r["geomean_us"], ".2f"), x_floor, score, _fmt(r["vs_flashinfer"], ".2f"), problem)
    console.print(table)
