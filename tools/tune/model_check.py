"""How close the default launch model lands on a GPU that has a tuned table, pretending it has none.

Usage (on the CPU; cuda-v4's default build needs nvcc)::

    python -m tools.tune.model_check [--algo NAME[,NAME]|all]

For every tuned solution, GPU table and state dtype: per batch size of that
GPU's tuning report, the config of the table and the config the default
model (docs/tuning.md) picks at the GPU's bandwidth, and, where the report
timed both, their µs and the slowdown default / tuned. The model's own code
is the solution's (its ``model_config``, or cuda-v4's C++ through its
module), so this checks what a GPU without a table runs.

The report of a table: a new tune's (its ``report`` field, with the GPU's
bandwidth in ``properties``), or, for the H100 tables tuned before the tuner
recorded either, :data:`LEGACY_REPORTS` and :data:`KNOWN_BANDWIDTH`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.judge.solutions import load_meta, load_solution
from harness.paths import REPO_ROOT, SOLUTIONS_DIR
from tools.tune import ADAPTERS
from tools.tuning import lookup_launch_config

H100 = "NVIDIA H100 80GB HBM3"
#: Peak DRAM bandwidth (bytes/s) of GPUs whose reports predate ``properties``: 2 x memory
#: clock x bus width, as the solutions compute it from the device (H100 SXM: 2619 MHz, 5120 bits).
KNOWN_BANDWIDTH = {H100: 2 * 2619e6 * 5120 / 8}
#: Reports of the tables tuned before the tuner named one report per table (results/tuning/).
LEGACY_REPORTS = {
    ("fla-recurrent", H100): ("fla_recurrent_tune.json",),
    ("cuda-v4", H100): ("cuda_tune_scatter_small.json", "cuda_tune_scatter_large.json"),
    ("cutedsl-bf16", H100): tuple(f"cutedsl_tune{part}.json" for part in (
        "", "_mixed_bf16", "_mixed_bf16_small", "_mixed_f32", "_parts_bf16", "_parts_f32", "_regs_bf16", "_regs_f32",
        "_tile128_b64_b128")),
}

#: state dtype -> batch -> config name -> µs (correct configs only)
Times = dict[str, dict[int, dict[str, float]]]


@dataclass(frozen=True)
class Row:
    """One batch size: the tuned and the default config, and their µs where the report has them."""

    batch: int
    tuned: str
    default: str
    tuned_us: float | None
    default_us: float | None

    @property
    def slowdown(self) -> float | None:
        """default µs / tuned µs (None unless the report timed both)."""
        return self.default_us / self.tuned_us if self.default_us and self.tuned_us else None


def config_key(solution: str, name: str) -> str | None:
    """A report's config name as the adapter names it, or None for a config of another form
    (cuda-v4's first tunes name variants ``cuda-v4/<name>/rs``; those without ``/rs`` are the
    all-reduce form since removed)."""
    if solution != "cuda-v4":
        return name.removeprefix("cutedsl/")
    if name.startswith("cuda-v4/"):
        return name.removeprefix("cuda-v4/").removesuffix("/rs") if name.endswith("/rs") else None
    return name


def _dtype_rows(report: dict) -> dict[str, list[dict]]:
    """state dtype -> batch rows, in any of the tuners' report forms."""
    if "state_dtypes" in report:  # python -m tools.tune
        return {dtype: part["batches"] for dtype, part in report["state_dtypes"].items()}
    if "dtypes" in report:  # the first CuTe DSL tuner
        return {dtype: part["batches"] if isinstance(part, dict) else part for dtype, part in report["dtypes"].items()}
    return {"float32": report["batches"]}  # the first fla-recurrent and cuda-v4 tuners


def report_times(solution: str, paths) -> Times:
    """The correct configs' µs of the reports at ``paths`` (the first report timing a config wins)."""
    times: Times = {}
    for path in paths:
        for dtype, rows in _dtype_rows(json.loads(Path(path).read_text())).items():
            for row in rows:
                at = times.setdefault(dtype, {}).setdefault(row["batch"], {})
                for name, result in row["configs"].items():
                    key = config_key(solution, name)
                    if key and result.get("correct") and result.get("us") is not None:
                        at.setdefault(key, result["us"])
    return times


def table_report(solution: str, device: str, origin_report: str | None) -> tuple[list[Path], float]:
    """``(report paths, bandwidth)`` of a GPU's table.

    Raises:
        LookupError: neither a report of the new form nor a legacy entry for it.
    """
    if (solution, device) in LEGACY_REPORTS:
        paths = [REPO_ROOT / "results" / "tuning" / name for name in LEGACY_REPORTS[solution, device]]
        return [p for p in paths if p.is_file()], KNOWN_BANDWIDTH[device]
    path = REPO_ROOT / origin_report if origin_report and not Path(origin_report).is_absolute() else Path(origin_report or "")
    if not path.is_file():
        raise LookupError(f"no tuning report of {solution} on {device} ({origin_report!r})")
    properties = json.loads(path.read_text()).get("properties") or {}
    bandwidth = properties.get("bandwidth_bytes_per_s") or KNOWN_BANDWIDTH.get(device)
    if not bandwidth:
        raise LookupError(f"{path} records no bandwidth of {device}, and none is known")
    return [path], bandwidth


def compare(adapter, table: list[list], state_dtype: str, bandwidth: float, times: dict[int, dict[str, float]],
            batches) -> list[Row]:
    """Per batch size: the tuned table's config and the default model's, with their µs."""
    rows = []
    for batch in batches:
        tuned, default = lookup_launch_config(table, batch), adapter.model_config_name(batch, state_dtype, bandwidth)
        at = times.get(batch, {})
        rows.append(Row(batch, tuned, default, at.get(tuned), at.get(default)))
    return rows


def summary(rows: list[Row]) -> dict:
    """``{"same": batches with the same config, "timed": batches with both µs, "geomean": geometric
    mean slowdown over them, "worst": the largest}``."""
    slow = [row.slowdown for row in rows if row.slowdown is not None]
    return {"same": sum(row.tuned == row.default for row in rows), "batches": len(rows), "timed": len(slow),
            "geomean": math.exp(sum(map(math.log, slow)) / len(slow)) if slow else None,
            "worst": max(slow) if slow else None}


def check_solution(name: str, adapter=None) -> dict[tuple[str, str], list[Row]]:
    """``{(device, state dtype): rows}`` for every GPU table of solution ``name`` (its default build:
    cuda-v4 compiles kernel.cu here)."""
    adapter = adapter or ADAPTERS[name](load_solution(load_meta(SOLUTIONS_DIR / name)))
    origins = table_origins(name)
    results = {}
    for device, tables in adapter.gpu_tables().items():
        paths, bandwidth = table_report(name, device, origins.get(device))
        times = report_times(name, paths)
        for dtype, table in tables.items():
            batches = sorted(times.get(dtype, {})) or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
            results[device, dtype] = compare(adapter, table, dtype, bandwidth, times.get(dtype, {}), batches)
    return results


def table_origins(name: str) -> dict[str, str]:
    """Device -> the ``report`` field of each of the solution's table files."""
    folder = SOLUTIONS_DIR / name
    if name == "cuda-v4":
        from tools.tune.cuda_v4 import gpu_table_origins

        return {device: origin.get("report") for device, origin in gpu_table_origins(folder).items()}
    return {data["device"]: data.get("report") for data in
            (json.loads(p.read_text()) for p in sorted((folder / "launch_tables").glob("*.json")))}


def _us(value) -> str:
    return f"{value:.2f}" if value is not None else "-"


def format_rows(name: str, device: str, dtype: str, rows: list[Row]) -> str:
    """A readable block: one line per batch size, then the summary."""
    lines = [f"{name} on {device}, {dtype} state: tuned table vs default model (table pretended missing)"]
    for row in rows:
        mark = "=" if row.tuned == row.default else " "
        slow = f"{row.slowdown:.3f}x" if row.slowdown is not None else "-"
        lines.append(f"  B={row.batch:<4} {mark} tuned {row.tuned:<22} {_us(row.tuned_us):>7} µs | "
                     f"default {row.default:<22} {_us(row.default_us):>7} µs | {slow}")
    s = summary(rows)
    mean = f"{s['geomean']:.3f}x" if s["geomean"] else "-"
    worst = f"{s['worst']:.3f}x" if s["worst"] else "-"
    lines.append(f"  same config at {s['same']}/{s['batches']} batch sizes; default/tuned over the "
                 f"{s['timed']} timed: geometric mean {mean}, worst {worst}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the comparison for the solutions named by ``--algo`` (default all); 0."""
    p = argparse.ArgumentParser(prog="python -m tools.tune.model_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", default="all", help=f"all, or some of: {', '.join(ADAPTERS)}")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    names = list(ADAPTERS) if args.algo == "all" else [n.strip() for n in args.algo.split(",") if n.strip()]
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        p.error(f"unknown solution {', '.join(unknown)} (choose from {', '.join(ADAPTERS)})")
    for name in names:
        for (device, dtype), rows in check_solution(name).items():
            print(format_rows(name, device, dtype, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
