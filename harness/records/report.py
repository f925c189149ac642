"""Per-run summary: a flat table of the traces (CSV) and the printed table."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from harness.judge.timing import TIERS


def trace_rows(traces: list[dict]) -> pd.DataFrame:
    """One row per trace: status, errors and, per tier, µs / p10 / p90 /
    iterations / multiple of the copy floor / GB/s / speedup vs pt-reference."""
    rows = []
    for t in traces:
        ev = t["evaluation"]
        corr = ev.get("correctness") or {}
        per_output = (corr.get("extra") or {}).get("per_output", {})
        perf = ev.get("performance") or {}
        row = {
            "solution": t["solution"], "workload": t["workload"]["uuid"],
            "batch_size": t["workload"]["axes"].get("batch_size"), "status": ev["status"],
            "hardware": ev["environment"]["hardware"], "timestamp": ev["timestamp"],
            "headline_tier": perf.get("headline_tier"),
            "latency_us": perf.get("latency_ms", 0.0) * 1e3 if perf.get("latency_ms") else None,
        }
        for name, err in per_output.items():
            row[f"{name}_max_abs_err"] = err["max_abs"]
            row[f"{name}_max_rel_err"] = err["max_rel"]
            row[f"{name}_rel_l2_err"] = err["rel_l2"]
        for tier in TIERS:
            entry = (perf.get("tiers") or {}).get(tier)
            if not entry:
                continue
            if not entry.get("available"):
                row[f"{tier}_unavailable"] = entry.get("reason")
                continue
            for key in ("value_us", "p10_us", "p90_us", "iters", "x_copy_floor", "achieved_gb_per_s",
                        "speedup_vs_reference", "span_median_us", "kernels_per_call"):
                if key in entry:
                    row[f"{tier}_{key}"] = entry[key]
        row["log"] = (ev.get("log") or "").strip().splitlines()[-1][:200] if ev.get("log") else ""
        rows.append(row)
    return pd.DataFrame(rows)


def write_summary(traces: list[dict], path: Path) -> pd.DataFrame:
    """Write the per-trace table to ``path`` (CSV) and return it."""
    frame = trace_rows(traces)
    frame.to_csv(path, index=False, float_format="%.6g")
    return frame


def _fmt(value, spec: str) -> str:
    return "" if value is None or pd.isna(value) else format(value, spec)


def print_table(frame: pd.DataFrame, console=None) -> None:
    """Print one row per (solution, workload) with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="gdn_decode_qk4_v8_d128_k_last", show_lines=False)
    for col in ("solution", "B", "status", "out max abs", "state max abs", "tier", "µs", "×floor", "speedup"):
        table.add_column(col, justify="left" if col in ("solution", "status", "tier") else "right")
    for _, r in frame.iterrows():
        # a SKIPPED/failed row has no headline tier: NaN in a frame where other rows have one
        tier = r.get("headline_tier") if isinstance(r.get("headline_tier"), str) else None
        style = "green" if r["status"] == "PASSED" else ("yellow" if r["status"] == "SKIPPED" else "red")
        table.add_row(
            r["solution"], str(r["batch_size"]), f"[{style}]{r['status']}[/{style}]",
            _fmt(r.get("output_max_abs_err"), ".2e"), _fmt(r.get("new_state_max_abs_err"), ".2e"),
            tier or "", _fmt(r.get("latency_us"), ".2f"),
            _fmt(r.get(f"{tier}_x_copy_floor") if tier else None, ".2f"),
            _fmt(r.get(f"{tier}_speedup_vs_reference") if tier else None, ".1f"))
    console.print(table)
