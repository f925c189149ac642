"""Measure one solution's search space per batch size and choose its table.

The same for every family (what differs is the adapter's,
:mod:`tools.tune.protocol`): per state dtype and batch size, the workload's
inputs (:mod:`tools.tune.inputs`), the expected outputs of the vectorized fp32
reference (:mod:`tools.vectorized`), then every config checked once on
NaN-poisoned destinations with the harness's tolerance for the state dtype
and timed by ``timer`` (the harness's CUPTI tier, else CUDA events:
:class:`tools.tune.measure.KernelTimer`). Beside them: the copy floor
(``new_state.copy_(state)``, the same state bytes moved with no math), the
baselines, and a check of the solution's own ``run`` (its table in use). The
table is one config per batch size by :func:`tools.tune.measure.steady_choice`,
compressed (:func:`tools.tune.measure.compress_table`).
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from typing import Callable, Sequence

from harness.facts import FLASHINFER_SOLUTIONS
from harness.judge.core import placement_copies
from harness.judge.solutions import load_meta
from harness.paths import SOLUTIONS_DIR
from tools.tune.inputs import tune_inputs
from tools.tune.protocol import Adapter
from tools.tune.measure import (
    check_and_time,
    check_call,
    compress_table,
    failure_row,
    fastest_correct,
    load_baseline,
    state_tolerance,
    steady_choice,
)
from tools.vectorized import reference_outputs

#: Timed beside every solution, per state dtype: fla-core's public kernel (fp32
#: only) and FlashInfer's kernel for that state dtype, where they import.
COMMON_BASELINES = {dtype: ("fla-upstream", fi) for dtype, fi in FLASHINFER_SOLUTIONS.items()}

#: ``timer(calls) -> median µs`` of zero-argument calls taken in turn (one per placement set).
Timer = Callable[[Sequence[Callable[[], object]]], float]


def unavailable_reason(adapter: Adapter) -> str | None:
    """Why the solution cannot be tuned here (its packages missing), or None."""
    missing = load_meta(SOLUTIONS_DIR / adapter.name).missing_packages()
    return f"missing packages: {', '.join(missing)}" if missing else None


def baseline_names(adapter: Adapter, state_dtype: str) -> tuple[str, ...]:
    """The adapter's own baselines, then the common ones, each once."""
    return tuple(dict.fromkeys((*adapter.baselines, *COMMON_BASELINES.get(state_dtype, ()))))


def measured_configs(space: dict[str, object], only: str, in_use: str) -> dict[str, object]:
    """The configs of ``space`` whose name matches the regular expression ``only``
    (all when empty), plus the one in use (always measured: the table to beat)."""
    return {name: config for name, config in space.items() if name == in_use or re.search(only, name)}


def measure_config(adapter: Adapter, config, sets: list[dict], expected: tuple, timer: Timer,
                   state_dtype: str) -> tuple[dict, list | None]:
    """``({"correct", "mismatches", "max_abs_err_*", "us"}, calls)`` of one config, checked on
    ``sets[0]`` and timed over all of them in turn (``calls``: one per set, for later rounds), or
    ``({"correct": False, "error"}, None)`` when it does not compile or raises."""
    try:
        calls = [adapter.call(config, inputs) for inputs in sets]
    except Exception as exc:  # one variant that does not compile must not end the tune
        return failure_row(exc), None
    return check_and_time(calls, sets[0], expected, timer, state_tolerance(state_dtype)), calls


def time_baselines(baselines: dict[str, tuple], sets: list[dict], timer: Timer) -> tuple[dict[str, dict], dict]:
    """``({name: {"us": µs} | {"unavailable": reason}}, {name: calls})`` for loaded baselines
    (``{name: load_baseline(...)}``), each timed over ``sets`` in turn; one that raises is
    recorded, not fatal."""
    times, timed = {}, {}
    for name, (make_call, reason) in baselines.items():
        if make_call is None:
            times[name] = {"unavailable": reason}
            continue
        try:
            timed[name] = [make_call(inputs) for inputs in sets]
            times[name] = {"us": timer(timed[name])}
        except Exception as exc:
            timed.pop(name, None)
            times[name] = {"unavailable": failure_row(exc)["error"]}
    return times, timed


def time_in_rounds(figures: list[tuple[dict, list]], timer: Timer, rounds: int) -> None:
    """Time every ``(row, calls)`` of ``figures`` (``row`` holding ``"us"`` from the first pass; a
    config that computed wrong results is left out) ``rounds - 1`` times more, all of them once a
    round in turn, so that a drift of the machine during the tune falls on every config alike.
    Each row's ``"us"`` becomes the median of its rounds and ``"us_rounds"`` keeps them; a call
    that raises in a later round is timed no more and its row gets ``"round_error"``.

    Why: a single tune's best at B = 256 on an H100 (r16/nc/l16/w2/p2, 90.47 µs), which the table
    took for every B >= 129, read 0.4-0.5 % slower at B = 256 and 512 than the previous table's
    variant in an alternating A/B on another machine (results/tuning/20261126-H100-passes-one-row):
    near-tied variants are ordered by one tune's moment."""
    timed = [(row, calls) for row, calls in figures if row.get("us") is not None and row.get("correct", True)]
    for row, _ in timed:
        row["us_rounds"] = [row["us"]]
    for _ in range(rounds - 1):
        for row, calls in timed:
            if "round_error" in row:
                continue
            try:
                row["us_rounds"].append(timer(calls))
            except Exception as exc:
                row["round_error"] = failure_row(exc)["error"]
    for row, _ in timed:
        row["us"] = statistics.median(row["us_rounds"])


def measure_batch(adapter: Adapter, state_dtype: str, batch: int, timer: Timer, device, only: str = "",
                  baselines: dict[str, tuple] | None = None, rounds: int = 1) -> dict:
    """One batch size's row: the workload, copy floor (µs), every measured
    config (with ``x_floor``), the config in use, the check of ``run``, the
    baselines and the fastest correct config. Every figure is over the same
    :func:`harness.judge.core.placement_copies` of the inputs in turn, the copy floor's too, and
    the median of ``rounds`` rounds (:func:`time_in_rounds`; a config that raised in a later
    round is a failure, not a pick)."""
    inputs, workload = tune_inputs(batch, state_dtype, device)
    expected = reference_outputs(inputs)
    sets = placement_copies(inputs)
    floor_calls = [lambda s=s: s["new_state"].copy_(s["state"]) for s in sets]
    floor = {"us": timer(floor_calls)}
    space, in_use = adapter.configs(state_dtype), adapter.in_use(inputs)
    configs, config_calls = {}, {}
    for name, config in measured_configs(space, only, in_use).items():
        configs[name], config_calls[name] = measure_config(adapter, config, sets, expected, timer, state_dtype)
    baseline_rows, baseline_calls = time_baselines(baselines or {}, sets, timer)
    if rounds > 1:
        time_in_rounds([(floor, floor_calls), *((configs[n], c) for n, c in config_calls.items() if c),
                        *((baseline_rows[n], c) for n, c in baseline_calls.items())], timer, rounds)
        configs.update({name: {"correct": False, "error": row["round_error"]}
                        for name, row in configs.items() if "round_error" in row})
    for row in configs.values():
        if row.get("us") is not None:
            row["x_floor"] = row["us"] / floor["us"]
    try:
        entry = check_call(lambda: adapter.run(inputs), inputs, expected, state_tolerance(state_dtype))
    except Exception as exc:
        entry = failure_row(exc)
    return {"batch": batch, "workload": workload, "placement_sets": len(sets), "rounds": rounds,
            "copy_floor_us": floor["us"], "copy_floor_us_rounds": floor.get("us_rounds", [floor["us"]]),
            "in_use": in_use, "in_use_in_space": in_use in space, "entry_check": entry, "configs": configs,
            "baselines": baseline_rows, "best": fastest_correct(configs)}


def correct_times(configs: dict[str, dict]) -> dict[str, float]:
    """Name -> µs of the correct, timed configs of one row."""
    return {name: r["us"] for name, r in configs.items() if r.get("correct") and r.get("us") is not None}


def chosen_table(rows: list[dict]) -> list[list]:
    """``[[largest batch | None, config name]]``: one config per batch size by
    :func:`tools.tune.measure.steady_choice` over the correct configs, neighbours with
    the same choice merged (batch sizes without a correct config are left out)."""
    times = [(row["batch"], correct_times(row["configs"])) for row in rows]
    return compress_table(steady_choice([(batch, t) for batch, t in times if t]))


def tune_dtype(adapter: Adapter, state_dtype: str, batches: list[int], timer: Timer, device,
               only: str = "", rounds: int = 1) -> dict:
    """Every batch size of one state dtype, then its table.

    Returns:
        ``{"batches": [row], "table": [[limit, name]], "native": str | None,
        "no_correct_config": [batch]}``; ``native`` is the table in the
        solution's own form (None when no batch size had a correct config).
    """
    baselines = {name: load_baseline(SOLUTIONS_DIR / name, state_dtype)
                 for name in baseline_names(adapter, state_dtype)}
    rows = []
    for batch in batches:
        start = time.monotonic()
        rows.append(measure_batch(adapter, state_dtype, batch, timer, device, only, baselines, rounds))
        print(f"{adapter.name} {state_dtype} B={batch}: {len(rows[-1]['configs'])} configs in "
              f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    table = chosen_table(rows)
    return {"batches": rows, "table": table, "native": adapter.format_table(table, state_dtype) if table else None,
            "no_correct_config": [row["batch"] for row in rows if not correct_times(row["configs"])]}


def tune_solution(adapter: Adapter, batches: list[int], timer: Timer, device, only: str = "",
                  dtypes: tuple[str, ...] | None = None, rounds: int = 1) -> dict[str, dict]:
    """:func:`tune_dtype` for each of the solution's state dtypes (those in
    ``dtypes`` only, when given), each figure the median of ``rounds`` rounds; ``adapter`` is
    loaded (:meth:`Adapter.load`)."""
    wanted = [d for d in adapter.state_dtypes() if dtypes is None or d in dtypes]
    return {dtype: tune_dtype(adapter, dtype, batches, timer, device, only, rounds) for dtype in wanted}
