"""The annotation pass: copy-floor multiples and speedups vs pt-reference on traces.

:func:`annotate` is pure: it takes every trace and floor of a run and returns
new traces (deep copies), never touching its inputs, and its result does not
depend on the order of either list. Per tier of each PASSED trace it sets
(every time, so stale values from an earlier pass are replaced or cleared):

* ``copy_floor_us``: the floor of the same workload, the same state dtype
  (from the label: ``name[bfloat16-state]`` is bfloat16, a plain name float32)
  and the same tier: the fastest copy's ``value_us`` in that tier
  (:func:`harness.records.best_floor.floor_times`); ``x_copy_floor = value_us / copy_floor_us``;
* ``speedup_vs_reference``: the reference solution's ``value_us`` on the same
  workload and tier (its plain label: the fp32 reference) / ``value_us``;

and from the headline tier ``performance.reference_latency_ms`` (the
reference's ms) and ``performance.speedup_factor`` (0 for both when the
reference has no number in that tier).

Where several reference traces (or floors of one copy method) share a key, e.g.
runs merged from several machines, their median is used, so that no arrival
order matters.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from harness.facts import REFERENCE_SOLUTION
from harness.records.best_floor import floor_times
from harness.records.trace import EvaluationStatus, FloorMeasurement, Trace


def reference_times(traces: list[Trace], reference_solution: str = REFERENCE_SOLUTION) -> dict[tuple[str, str], float]:
    """(workload uuid, tier) -> the reference solution's µs (PASSED traces; median over duplicates)."""
    samples = defaultdict(list)
    for trace in traces:
        perf = trace.evaluation.performance
        if trace.solution != reference_solution or not trace.is_successful() or perf is None:
            continue
        for tier, figure in perf.tiers.items():
            if figure.timed:
                samples[(trace.workload.uuid, tier)].append(figure.value_us)
    return {key: statistics.median(values) for key, values in samples.items()}


def annotate(traces: list[Trace], floors: list[FloorMeasurement],
             reference_solution: str = REFERENCE_SOLUTION, references: list[Trace] = ()) -> list[Trace]:
    """New traces, in the input order, with the floor multiples and speedups
    filled in (see module doc). Traces that did not pass come back as copies, unchanged.

    ``references``: the reference solution's traces from other runs on the same GPU
    (:func:`harness.records.store.stored_references`), used for a (workload, tier) that
    this run's own reference did not time, so that flashinfer-bench's ``speedup_factor``
    is filled whenever some run on this GPU holds the reference."""
    floor_us = floor_times(floors)
    reference_us = {**reference_times(list(references), reference_solution),
                    **reference_times(traces, reference_solution)}  # this run's own reference first
    out = []
    for trace in traces:
        trace = trace.model_copy(deep=True)
        perf = trace.evaluation.performance
        if trace.evaluation.status == EvaluationStatus.PASSED and perf is not None:
            uuid, dtype = trace.workload.uuid, trace.state_dtype
            for tier, figure in perf.tiers.items():
                floor = floor_us.get((uuid, dtype, tier)) if figure.timed else None
                reference = reference_us.get((uuid, tier)) if figure.timed else None
                figure.copy_floor_us = floor
                figure.x_copy_floor = figure.value_us / floor if floor else None
                figure.speedup_vs_reference = reference / figure.value_us if reference else None
            headline = perf.headline()
            if headline is not None and headline.speedup_vs_reference is not None:
                perf.reference_latency_ms = reference_us[(uuid, perf.headline_tier)] / 1e3
                perf.speedup_factor = headline.speedup_vs_reference
            else:
                perf.reference_latency_ms, perf.speedup_factor = 0.0, 0.0
        out.append(trace)
    return out
