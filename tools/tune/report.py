"""A tune's record: one JSON file per (solution, GPU), and its console form.

``<out>/<solution>/<device slug>.json`` holds the device name exactly as the
harness records it (:func:`harness.records.environment.hardware_name`), the
commit, the command line, the UTC date, the timing tier and settings, the
``--only`` pattern, the build's ``--defines`` macros, the GPU's properties the
default launch model reads, the per-batch measurements and the chosen table,
also in the form the solution's table file holds it (``native``). A run writes
into a new folder and never over a file (the table file it writes into the
solution folder is :mod:`tools.tune.cli`'s).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import torch

from harness.paths import RESULTS_DIR
from harness.records.environment import git_commit, hardware_name, libs
from harness.records.plots import slug
from harness.run_lock import writing_into
from tools.tune.inputs import DESCRIPTION as INPUTS_DESCRIPTION

#: Where runs go unless ``--out`` says otherwise: a new folder per run (tracked
#: tuning files beside it are never rewritten).
TUNING_DIR = RESULTS_DIR / "tuning"


def default_out_dir(now: datetime | None = None) -> Path:
    """``results/tuning/<UTC time>/`` (``20261124T101500Z``, the stamp of a run folder)."""
    return TUNING_DIR / (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def report_path(out_dir: Path, solution: str, device) -> Path:
    """``<out_dir>/<solution>/<device slug>.json``."""
    return Path(out_dir) / solution / f"{slug(hardware_name(str(device)))}.json"


def timing_record(timer) -> dict:
    """The tier that produced the numbers and the timer's settings (``"tier"``
    is the timer's own, e.g. ``cupti`` or ``events``, unknown for a bare callable;
    with ``events`` and ``cupti_calls`` > 0, CUPTI failed part way through the
    process's tunes: :class:`tools.tune.measure.KernelTimer`)."""
    config = getattr(timer, "config", None)
    flush = getattr(timer, "flush", None)
    return {"tier": getattr(timer, "tier", "unknown"), "why_not_cupti": getattr(timer, "why_not_cupti", None),
            "cupti_calls": getattr(timer, "cupti_calls", None),
            "iters": getattr(config, "iters", None), "warmup": getattr(config, "warmup", None),
            "warm_s": getattr(config, "warm_s", None), "flush_mb": getattr(flush, "nbytes", 0) // 2**20 or None,
            "statistic": "median µs, cold L2"}


def device_properties(device) -> dict:
    """What the solutions' default launch model reads of a GPU (docs/tuning.md): SM count, L2
    bytes and peak DRAM bandwidth (bytes/s: 2 x memory clock x bus width, double data rate)."""
    props = torch.cuda.get_device_properties(device)
    return {"sm_count": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
            "bandwidth_bytes_per_s": 2.0 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8}


def build_report(solution: str, device, command: str, timer, only: str, dtypes: dict[str, dict],
                 defines: tuple[str, ...] = ()) -> dict:
    """The JSON object of one solution's tune (``dtypes``: :func:`tools.tune.driver.tune_solution`'s result;
    ``defines``: the macros of a candidate build, ``[]`` for the shipped one)."""
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    return {"solution": solution, "device": hardware_name(str(device)),
            "capability": list(torch.cuda.get_device_capability(device)) if cuda else None,
            "properties": device_properties(device) if cuda else None,
            "commit": git_commit(), "command": command,
            "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "libs": libs(),
            "timing": timing_record(timer), "only": only, "defines": list(defines),
            "inputs": INPUTS_DESCRIPTION, "state_dtypes": dtypes}


def write_report(path: Path, report: dict) -> Path:
    """Write ``report`` as JSON at ``path`` (a new file).

    Raises:
        FileExistsError: ``path`` exists (a tune never rewrites a file).
    """
    with writing_into([path]):  # never while a run's vault watches results/ (harness/run_lock.py)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x") as handle:
            json.dump(report, handle, indent=2)
    return path


def _us(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def _cell(row: dict, name: str | None) -> str:
    result = row["configs"].get(name) if name else None
    if result is None:
        return f"{name or '-'} -"
    if not result["correct"]:
        return f"{name} WRONG" if "error" not in result else f"{name} FAILED"
    rounds = result.get("us_rounds") or []
    spread = f" [{_us(min(rounds))}-{_us(max(rounds))}]" if len(rounds) > 1 else ""
    return f"{name} {_us(result['us'])}{spread} ({result['us'] / row['copy_floor_us']:.3f}x)"


def format_report(report: dict) -> str:
    """Per state dtype one line per batch size (torch's copy of the state, the config in use,
    the fastest correct one, the baselines; µs and × that copy), the configs
    that failed, then the chosen table in the solution's own form."""
    timing = report["timing"]
    built = "".join(f" -D{macro}" for macro in report.get("defines") or ())  # older reports have none
    rounds = max((row.get("rounds", 1) for part in report["state_dtypes"].values() for row in part["batches"]),
                 default=1)  # older reports have none
    over = f"; the median of {rounds} rounds [their range]" if rounds > 1 else ""
    lines = [f"{report['solution']}{built} on {report['device']}  ({timing['tier']} tier, median of "
             f"{timing['iters']} cold-L2 calls{over}, µs; x: over torch's copy_ of the state, which a run's "
             "copy floor, the best of several copies, can undercut)"]
    for dtype, part in report["state_dtypes"].items():
        lines.append(f"== {dtype} state")
        for row in part["batches"]:
            baselines = ", ".join(f"{name} {_us(b.get('us'))}" for name, b in row["baselines"].items())
            entry = "ok" if row["entry_check"].get("correct") else "WRONG"
            lines.append(f"B={row['batch']:<4} copy_ {_us(row['copy_floor_us'])} | in use {_cell(row, row['in_use'])}"
                         f" (run: {entry}) | best {_cell(row, row['best'])} | {baselines}")
        bad = [f"B={row['batch']} {name}" for row in part["batches"]
               for name, result in row["configs"].items() if not result["correct"]]
        lines.append("all configurations correct" if not bad else "INCORRECT or FAILED: " + ", ".join(bad))
        lines.append(part["native"] or "no table: no batch size had a correct configuration")
    return "\n".join(lines)
