"""How close the default launch model lands on a GPU that has a tuned table, pretending it has none.

Usage (on the CPU; cuda-v4's default build needs nvcc)::

    python -m tools.tune.model_check [--algo NAME[,NAME]|all] [--latency-us L] [--markdown]
    python -m tools.tune.model_check --predict BYTES_PER_S|GPU [--batches B,B,...] [--latency-us L]

For every tuned solution, GPU table and state dtype: per batch size of that
GPU's tuning report, the config of the table and the config the default
model (docs/tuning.md) picks at the GPU's bandwidth, and, where the report
timed both, their µs and the slowdown default / tuned. The model's own code
is the solution's (its ``model_config``, or cuda-v4's C++ through its
module), so this checks what a GPU without a table runs.

The report of a table: its ``report`` field, with the GPU's bandwidth in
``properties``, or :data:`KNOWN_BANDWIDTH` for a report that predates them.

``--latency-us`` evaluates the model as if its ``L`` were that (to re-fit
``L``: exact, as the model reads ``L`` only in ``bandwidth x L``);
``--markdown`` prints only the summary table (docs/tuning.md's); ``--predict``
prints the batch ranges of each config the model gives a GPU without a table
of that peak bandwidth (bytes/s, or a GPU of :data:`PRESETS`: ``b200``).

``--fit GPU[,GPU]`` prints, per solution and state dtype, a ladder fitted to those GPUs' tuning
reports together (:func:`fit_octaves`: one config per octave of ``rho``), to write into the
solution by hand.

``--batches`` (with ``--predict``) prints, per batch size instead, the config,
the bytes a call moves (``harness.judge.figures.bytes_moved``), their time at
that bandwidth (the floor) and a predicted µs, floor + ``t0`` (:func:`predict_latency`):
``t0``, the part of a call that does not scale with the bandwidth, is each
tuned GPU's µs of the same config at that batch size less its own floor. A
prediction on paper: docs/tuning.md ("The contest's GPU on paper") says how
far to trust it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.data.dataset import OUR_DEFINITION
from harness.data.definition import TORCH_DTYPES, load_definition
from harness.data.workloads import InputSpec, Workload
from harness.judge.figures import bytes_moved
from harness.judge.solutions import load_meta, load_solution
from harness.paths import REPO_ROOT, SOLUTIONS_DIR
from harness.records.store import read_stored, stored_file
from tools.tune import ADAPTERS
from tools.tune.cli import batches
from tools.tune.measure import lookup_launch_config

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
#: Peak DRAM bandwidth (bytes/s) of GPUs whose reports predate ``properties``. H100 SXM: 2 x memory
#: clock x bus width, as the solutions compute it from the device (2619 MHz, 5120 bits). H200 (SXM):
#: NVIDIA's H200 datasheet, 4.8 TB/s; its device's clock and bus width were not recorded, so the
#: solutions' own figure for it may differ by a few percent (docs/tuning.md: no choice moves).
KNOWN_BANDWIDTH = {H100: 2 * 2619e6 * 5120 / 8, H200: 4.8e12}
#: Peak DRAM bandwidth (bytes/s) that ``--predict NAME`` stands for. B200: NVIDIA's 8 TB/s (DGX B200:
#: 64 TB/s of HBM3e over 8 GPUs). The device itself may report less: a B200 on a recent driver
#: gives 7680 bits x 3996 MHz x 2 = 7.67 TB/s (pytorch/ao#4002), the figure the solutions compute;
#: docs/tuning.md shows that no choice at B = 1, 16, 64 moves between the two.
PRESETS = {"h100": KNOWN_BANDWIDTH[H100], "h200": KNOWN_BANDWIDTH[H200], "b200": 8e12}

#: The tuning reports a solution's default ladder was fitted to (``--fit``) and predicts a GPU without
#: a table from (``--predict``), where they are not its GPU table's current report. cuda-v4's H100
#: table was re-tuned with two passes over a lane's rows (results/tuning/20261126-H100-passes); the
#: H200's tune has no such variant, so a rung with two passes could not be checked out of sample there,
#: and the ladder stays the fit of the tune it was fitted to (docs/tuning.md). fla-recurrent's likewise:
#: its H100 table was re-tuned with the lanes-per-row knob (results/tuning/20261126-H100-fla-lanes), and
#: its ladder is the fit of the table before: the octave fit of the knob's H100 tune read worse against
#: the H200's tune with the knob (1.021 on average, 1.113 at B = 32) than that ladder (1.008, 1.034).
MODEL_REPORTS = {
    ("cuda-v4", H100): "results/tuning/20261126-H100-fast-gates/cuda-v4/NVIDIA-H100-80GB-HBM3.json",
    ("fla-recurrent", H100): "results/tuning/fla_recurrent_tune.json",
}

#: Where each solution defines the default model's L (seconds): solutions are standalone, so the one
#: constant is written three times (file in the solution folder, its definition's pattern).
LATENCY_DEFINITIONS = {
    "fla-recurrent": ("configs.py", r"^MEMORY_LATENCY_S = ([0-9.eE+-]+)"),
    "cuda-v4": ("kernel.cu", r"^constexpr double kMemoryLatencySeconds = ([0-9.eE+-]+);"),
    "cutedsl-bf16": ("gdn_cute_build.py", r"^MEMORY_LATENCY_S = ([0-9.eE+-]+)"),
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
        for dtype, rows in _dtype_rows(json.loads(read_stored(Path(path)))).items():  # the report, or its .gz
            for row in rows:
                at = times.setdefault(dtype, {}).setdefault(row["batch"], {})
                for name, result in row["configs"].items():
                    key = config_key(solution, name)
                    if key and result.get("correct") and result.get("us") is not None:
                        at.setdefault(key, result["us"])
    return times


def table_report(solution: str, device: str, origin_reports: list[str | None] | None) -> tuple[list[Path], float]:
    """``(report paths, bandwidth)`` of a GPU's tables: the reports they name (one a state dtype where
    different tunes chose them, :func:`tools.tune.cuda_v4.gpu_table_reports`); the bandwidth is the
    first's.

    Raises:
        LookupError: a table names no stored report, or no bandwidth of the GPU is known.
    """
    paths = []
    for report in origin_reports or [None]:
        path = REPO_ROOT / report if report and not Path(report).is_absolute() else Path(report or "")
        if stored_file(path) is None:
            raise LookupError(f"no tuning report of {solution} on {device} ({report!r})")
        paths.append(path)
    properties = json.loads(read_stored(paths[0])).get("properties") or {}  # the report, or its .gz
    bandwidth = properties.get("bandwidth_bytes_per_s") or KNOWN_BANDWIDTH.get(device)
    if not bandwidth:
        raise LookupError(f"{paths[0]} records no bandwidth of {device}, and none is known")
    return paths, bandwidth


def compare(table: list[list], times: dict[int, dict[str, float]], batches, default: Callable[[int], str]) -> list[Row]:
    """Per batch size: the tuned table's config and ``default(batch)``'s (the default model's, or a
    fitted ladder's: :func:`ladder_pick`), with their µs."""
    rows = []
    for batch in batches:
        tuned, picked = lookup_launch_config(table, batch), default(batch)
        at = times.get(batch, {})
        rows.append(Row(batch, tuned, picked, at.get(tuned), at.get(picked)))
    return rows


def summary(rows: list[Row]) -> dict:
    """``{"same": batches with the same config, "timed": batches with both µs, "geomean": geometric
    mean slowdown over them, "worst": the largest}``."""
    slow = [row.slowdown for row in rows if row.slowdown is not None]
    return {"same": sum(row.tuned == row.default for row in rows), "batches": len(rows), "timed": len(slow),
            "geomean": math.exp(sum(map(math.log, slow)) / len(slow)) if slow else None,
            "worst": max(slow) if slow else None}


def model_latency(name: str) -> float:
    """The default model's ``L`` (seconds) as solution ``name``'s source defines it.

    Raises:
        LookupError: no definition of the form :data:`LATENCY_DEFINITIONS` expects (moved or renamed).
    """
    file, pattern = LATENCY_DEFINITIONS[name]
    found = re.search(pattern, (SOLUTIONS_DIR / name / file).read_text(), re.MULTILINE)
    if found is None:
        raise LookupError(f"solutions/{name}/{file} has no line matching {pattern!r}")
    return float(found.group(1))


def bandwidth_scale(name: str, latency: float | None) -> float:
    """``latency / L`` (1 for None): the factor on the bandwidth the model of solution ``name`` is
    asked about that makes it compute as if its ``L`` were ``latency`` seconds (it reads ``L``
    only in ``bandwidth x L``)."""
    return latency / model_latency(name) if latency else 1.0


def load_adapter(name: str):
    """The adapter of solution ``name``, loaded by the harness (its default build: cuda-v4 compiles here)."""
    return ADAPTERS[name](load_solution(load_meta(SOLUTIONS_DIR / name)))


def check_solution(name: str, adapter=None, latency: float | None = None) -> dict[tuple[str, str], list[Row]]:
    """``{(device, state dtype): rows}`` for every GPU table of solution ``name``.

    Args:
        adapter: its adapter, loaded (default :func:`load_adapter`).
        latency: evaluate the model as if its ``L`` were this many seconds (default: the
            solution's own; :func:`bandwidth_scale`).
    """
    adapter = adapter or load_adapter(name)
    scale = bandwidth_scale(name, latency)
    reports = gpu_reports(name, adapter)
    results = {}
    for device, tables in adapter.gpu_tables().items():
        bandwidth, times = reports[device]
        for dtype, table in tables.items():
            batches = sorted(times.get(dtype, {})) or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
            results[device, dtype] = compare(table, times.get(dtype, {}), batches,
                                             lambda batch: adapter.model_config_name(batch, dtype, bandwidth * scale))
    return results


def gpu_reports(name: str, adapter, origins: dict[str, list[str | None]] | None = None) -> dict[str, tuple[float, Times]]:
    """Device -> ``(bandwidth, µs of the reports' configs)`` for every GPU table of solution ``name``,
    each read from the reports ``origins`` names for its device (default :func:`table_origins`)."""
    origins = table_origins(name) if origins is None else origins
    reports = {}
    for device in adapter.gpu_tables():
        paths, bandwidth = table_report(name, device, origins.get(device))
        reports[device] = bandwidth, report_times(name, paths)
    return reports


def model_reports(name: str, adapter) -> dict[str, tuple[float, Times]]:
    """:func:`gpu_reports`, with :data:`MODEL_REPORTS`'s report in place of a table's reports where it
    names one, for the state dtypes that report measured: what a solution's default ladder was fitted
    to and predicts from. The table's reports keep the other dtypes (the H100's fp32 stand-in timed no
    bf16 state, so the H100's bf16 tune stays in)."""
    reports = gpu_reports(name, adapter)
    for (solution, device), report in MODEL_REPORTS.items():
        if solution == name and device in reports:
            paths, bandwidth = table_report(name, device, [report])
            reports[device] = bandwidth, {**reports[device][1], **report_times(name, paths)}
    return reports


def predict(adapter, state_dtype: str, bandwidth: float, batches=range(1, 1025)) -> list[tuple[int, int | None, str]]:
    """``[(first batch, last batch, config name)]``: the default model's choice on a GPU without a
    table, of ``bandwidth`` bytes/s, as runs over ``batches`` (consecutive batch sizes). The last
    run's last batch is None: its rung, the model's last reached, holds for every larger batch
    (``rho`` only grows with the batch)."""
    runs: list[tuple[int, int | None, str]] = []
    for batch in batches:
        name = adapter.model_config_name(batch, state_dtype, bandwidth)
        if runs and runs[-1][2] == name:
            runs[-1] = (runs[-1][0], batch, name)
        else:
            runs.append((batch, batch, name))
    return runs[:-1] + [(runs[-1][0], None, runs[-1][2])] if runs else runs


@dataclass(frozen=True)
class LatencyPrediction:
    """One batch size on a GPU without a table: the default model's config, the bytes a call moves,
    their time at the GPU's peak bandwidth, and the config's µs predicted from the tuned GPUs'
    (:func:`predict_latency`)."""

    batch: int
    config: str
    nbytes: int
    floor_us: float  # nbytes / bandwidth: the call's bytes at the peak bandwidth, no latency
    measured: tuple[tuple[str, float, float], ...]  # (device, its bandwidth, the config's µs there)

    @property
    def fixed_terms_us(self) -> tuple[float, ...]:
        """``t0`` of each tuned GPU: its µs less its floor (the call's bytes at its peak bandwidth)."""
        return tuple(us - self.nbytes / bandwidth * 1e6 for _, bandwidth, us in self.measured)

    @property
    def fixed_us(self) -> float | None:
        """The mean ``t0`` of the tuned GPUs (None: none timed the config at this batch size)."""
        terms = self.fixed_terms_us
        return sum(terms) / len(terms) if terms else None

    @property
    def spread_us(self) -> float | None:
        """Half the range of the tuned GPUs' ``t0``: how far one ``t0`` for all misses them."""
        terms = self.fixed_terms_us
        return (max(terms) - min(terms)) / 2 if terms else None

    @property
    def predicted_us(self) -> float | None:
        """floor + ``t0``."""
        return self.floor_us + self.fixed_us if self.measured else None


#: Where a fitted ladder's rungs may start: octaves of ``rho`` (docs/tuning.md: each doubling of
#: ``rho`` may take a config with more rows per warp), from 0 (every batch below 0.5).
OCTAVES = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def state_bytes(batch: int, state_dtype: str) -> int:
    """Bytes of the state of a batch (``[B, HV, V, K]`` of ``state_dtype``): the ``S(B)`` of ``rho``."""
    definition = load_definition(OUR_DEFINITION)
    axes = definition.resolve_axes({"batch_size": batch})
    return math.prod(axes[axis] for axis in definition.inputs["state"].shape) * TORCH_DTYPES[state_dtype].itemsize


def rho(batch: int, state_dtype: str, bandwidth: float, latency: float) -> float:
    """The default model's ``rho = S(B) / (bandwidth x latency)`` (docs/tuning.md)."""
    return state_bytes(batch, state_dtype) / (bandwidth * latency)


def ladder_pick(ladder: list[tuple[float, str]], batch: int, state_dtype: str, bandwidth: float, latency: float) -> str:
    """The config a ladder (``[(smallest rho, config name)]``) gives a batch size: its last rung whose
    smallest ``rho`` is at most the batch's, as the solutions' own model picks."""
    at = rho(batch, state_dtype, bandwidth, latency)
    return [config for smallest, config in ladder if at >= smallest][-1]


def fit_octaves(reports: list[tuple[dict[int, dict[str, float]], float]], state_dtype: str,
                latency: float) -> list[tuple[float, str]]:
    """A default-model ladder fitted to one or more GPUs' reports: ``[(smallest rho, config name)]``.

    ``reports`` holds, per GPU, ``(times, bandwidth)``: batch -> config -> µs, and its bytes/s.
    Each timed batch size of each GPU falls in one octave of :data:`OCTAVES` by its
    ``rho = S(B) / (bandwidth x latency)``; per octave the config timed at all its points with
    the least summed ``log(µs / that point's best µs)`` wins; adjacent octaves with the same
    winner merge into one rung. With one GPU and one batch size per octave (B = 1, 2, 4, ... on
    an H100) the ladder picks the report's best at every timed batch size: the test of such a
    fit is another GPU.

    Raises:
        ValueError: no report has a timed batch size.
    """
    by_octave: dict[float, list[dict[str, float]]] = {}
    for times, bandwidth in reports:
        for batch, at in times.items():
            point = rho(batch, state_dtype, bandwidth, latency)
            by_octave.setdefault(max(o for o in OCTAVES if point >= o), []).append(at)
    if not by_octave:
        raise ValueError(f"no timed batch sizes of the {state_dtype} state to fit")
    ladder: list[tuple[float, str]] = []
    for octave, points in sorted(by_octave.items()):
        names = set.intersection(*(set(at) for at in points))
        cost = {name: sum(math.log(at[name] / min(at.values())) for at in points) for name in names}
        best = min(sorted(cost), key=cost.get)
        if not ladder or ladder[-1][1] != best:
            ladder.append((octave, best))
    return ladder


def format_ladder(name: str, dtype: str, devices: list[str], ladder: list[tuple[float, str]]) -> str:
    """One line: ``<solution> <dtype> fitted to <device>[ + <device>]: rho: config · ...``."""
    return f"{name} {dtype} fitted to {' + '.join(devices)}: " + " · ".join(f"{smallest:g}: {c}" for smallest, c in ladder)


def call_bytes(batch: int, state_dtype: str) -> int:
    """Bytes one call of batch size ``batch`` moves: the state read and written, the other inputs read,
    the output written (``harness.judge.figures.bytes_moved`` over our definition)."""
    definition = load_definition(OUR_DEFINITION)
    workload = Workload("", definition.resolve_axes({"batch_size": batch}),
                        {name: InputSpec("random") for name in definition.inputs}, "")
    return bytes_moved(definition, workload, state_dtype)


def predict_latency(adapter, state_dtype: str, bandwidth: float, batches, reports: dict[str, tuple[float, Times]],
                    model_bandwidth: float | None = None) -> list[LatencyPrediction]:
    """Per batch size: the default model's config on a GPU of ``bandwidth`` bytes/s and its predicted µs.

    The prediction is ``bytes / bandwidth + t0``: the call's bytes at the peak bandwidth plus a
    latency term that does not depend on the bandwidth (not the default model's ``L``). ``t0`` is
    calibrated per config and batch size on each GPU of ``reports`` (:func:`gpu_reports`) whose report
    timed that config at that batch size, as its µs less its own ``bytes / bandwidth``, and averaged
    over them; their spread says how well one ``t0`` fits them all (:attr:`LatencyPrediction.spread_us`).

    Args:
        model_bandwidth: the bandwidth the model is asked about (default ``bandwidth``; ``--latency-us``
            scales it, :func:`bandwidth_scale`).
    """
    rows = []
    for batch in batches:
        config = adapter.model_config_name(batch, state_dtype, model_bandwidth or bandwidth)
        nbytes = call_bytes(batch, state_dtype)
        measured = tuple((device, gpu_bandwidth, times[state_dtype][batch][config])
                         for device, (gpu_bandwidth, times) in reports.items()
                         if config in times.get(state_dtype, {}).get(batch, {}))
        rows.append(LatencyPrediction(batch, config, nbytes, nbytes / bandwidth * 1e6, measured))
    return rows


def format_latency_predictions(name: str, dtype: str, bandwidth: float, rows: list[LatencyPrediction]) -> str:
    """A readable block: one line per batch size of :func:`predict_latency`."""
    lines = [f"{name} {dtype} at {bandwidth / 1e9:.0f} GB/s: config, bytes a call moves, floor = bytes / bandwidth; "
             f"per tuned GPU the config's µs and t0 = µs - its floor; predicted = floor + mean t0 ± half their range"]
    for row in rows:
        measured = ", ".join(f"{device} {us:.2f} (t0 {term:.2f})"
                             for (device, _, us), term in zip(row.measured, row.fixed_terms_us)) or "none timed"
        predicted = (f"{row.predicted_us:.2f} ± {row.spread_us:.2f} µs" if row.predicted_us is not None else "-")
        lines.append(f"  B={row.batch:<4} {row.config:<16} {row.nbytes:>11,d} B  floor {row.floor_us:6.2f} µs | "
                     f"{measured} | predicted {predicted}")
    return "\n".join(lines)


def table_origins(name: str) -> dict[str, list[str | None]]:
    """Device -> the reports of the solution's table file for it: its ``report`` field (cuda-v4: the
    reports of the file's tables, :func:`tools.tune.cuda_v4.gpu_table_reports`)."""
    folder = SOLUTIONS_DIR / name
    if name == "cuda-v4":
        from tools.tune.cuda_v4 import gpu_table_reports

        return gpu_table_reports(folder)
    return {data["device"]: [data.get("report")] for data in
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


def markdown_table(results: dict[str, dict[tuple[str, str], list[Row]]]) -> str:
    """docs/tuning.md's summary: per solution, state dtype and GPU (table pretended missing), the
    batch sizes where the model picks the table's config and the default/tuned slowdown (geometric
    mean and worst, with its batch size). ``results``: solution -> :func:`check_solution`."""
    lines = ["| solution, state | GPU | same config | geometric mean | worst |", "|---|---|---|---|---|"]
    for name, by_table in results.items():
        for (device, dtype), rows in sorted(by_table.items(), key=lambda item: (item[0][1] != "float32", item[0])):
            s = summary(rows)
            worst = max((row for row in rows if row.slowdown is not None), key=lambda row: row.slowdown, default=None)
            worst_text = "-" if worst is None else f"{worst.slowdown:.3f}" + (
                f" (B = {worst.batch})" if worst.slowdown > 1.0005 else "")
            mean = f"{s['geomean']:.3f}" if s["geomean"] else "-"
            lines.append(f"| {name} {'fp32' if dtype == 'float32' else 'bf16'} | {device} | "
                         f"{s['same']}/{s['batches']} | {mean} | {worst_text} |")
    return "\n".join(lines)


def format_prediction(name: str, dtype: str, runs: list[tuple[int, int | None, str]]) -> str:
    """One line: ``<solution> <dtype>: config B first-last · ... · config B >= first`` (:func:`predict`)."""
    parts = [f"{config} B {first}-{last}" if last else f"{config} B >= {first}" for first, last, config in runs]
    return f"{name} {dtype}: " + " · ".join(parts)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not > 0")
    return value


def _bandwidth(text: str) -> float:
    """A bandwidth in bytes/s: a positive number or a name of :data:`PRESETS`."""
    if text.lower() in PRESETS:
        return PRESETS[text.lower()]
    try:
        return _positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a bandwidth > 0 (bytes/s) nor one of "
                                         f"{', '.join(PRESETS)}") from None


def parser() -> argparse.ArgumentParser:
    """The command line (see the module doc)."""
    p = argparse.ArgumentParser(prog="python -m tools.tune.model_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", default="all", help=f"all, or some of: {', '.join(ADAPTERS)}")
    p.add_argument("--latency-us", type=_positive, default=None,
                   help="evaluate the model with this L (µs) instead of the solutions' own")
    p.add_argument("--markdown", action="store_true", help="print only the summary table")
    p.add_argument("--predict", type=_bandwidth, default=None, metavar="BYTES_PER_S|GPU",
                   help="print the model's configs for a GPU without a table of this peak bandwidth "
                        f"(bytes/s, or one of: {', '.join(PRESETS)})")
    p.add_argument("--fit", default=None, metavar="GPU[,GPU]",
                   help="print a ladder fitted to these GPUs' tuning reports together (device names, e.g. "
                        f"{H100!r}) per solution and state dtype")
    p.add_argument("--batches", type=batches, default=None, metavar="B,B,...",
                   help="with --predict: per batch size, the config, bytes, floor and predicted µs")
    return p


def print_fits(names: list[str], devices: list[str], latency: float | None) -> int:
    """``--fit``: :func:`format_ladder` of each solution's and state dtype's fit to the reports of
    ``devices`` together; 2 after a message for a solution without a table of one of them."""
    for name in names:
        adapter = load_adapter(name)
        reports = model_reports(name, adapter)
        missing = [device for device in devices if device not in reports]
        if missing:
            print(f"error: {name} has no table of {', '.join(map(repr, missing))} (its tables: {', '.join(reports)})",
                  file=sys.stderr)
            return 2
        for dtype in adapter.state_dtypes():
            timed = [(reports[device][1][dtype], reports[device][0]) for device in devices if reports[device][1].get(dtype)]
            if len(timed) < len(devices):
                print(f"{name} {dtype}: not every tune of {' + '.join(devices)} measured this state dtype: nothing to fit")
                continue
            print(format_ladder(name, dtype, devices, fit_octaves(timed, dtype, latency or model_latency(name))))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the comparison for the solutions named by ``--algo`` (default all); 0, or 2 after a
    message for an unknown solution, a bad number or ``--batches`` without ``--predict``."""
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    names = list(ADAPTERS) if args.algo == "all" else [n.strip() for n in args.algo.split(",") if n.strip()]
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        p.error(f"unknown solution {', '.join(unknown)} (choose from {', '.join(ADAPTERS)})")
    latency = args.latency_us * 1e-6 if args.latency_us else None
    if args.batches and not args.predict:
        p.error("--batches needs --predict")
    if args.fit:
        return print_fits(names, [device.strip() for device in args.fit.split(",") if device.strip()], latency)
    if args.predict:
        for name in names:
            adapter = load_adapter(name)
            bandwidth = args.predict * bandwidth_scale(name, latency)
            for dtype in adapter.state_dtypes():
                if args.batches:
                    rows = predict_latency(adapter, dtype, args.predict, args.batches, model_reports(name, adapter),
                                           model_bandwidth=bandwidth)
                    print(format_latency_predictions(name, dtype, args.predict, rows))
                else:
                    print(format_prediction(name, dtype, predict(adapter, dtype, bandwidth)))
        return 0
    results = {name: check_solution(name, latency=latency) for name in names}
    if args.markdown:
        print(markdown_table(results))
        return 0
    for name, by_table in results.items():
        for (device, dtype), rows in by_table.items():
            print(format_rows(name, device, dtype, rows))
    return 0

if __name__ == "__main__":
    sys.exit(main())
