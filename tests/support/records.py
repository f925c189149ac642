"""Synthetic records: traces, copy floors and run folders written by the store's own writer."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.records.store import RunWriter
from harness.records.trace import (Correctness, CorrectnessExtra, Environment, Evaluation, FloorMeasurement,
                                   Performance, TierFigure, Trace, WorkloadRecord)

H100 = "NVIDIA H100 80GB HBM3"
B200 = "NVIDIA B200"
STAMP = "2026-01-01T00:00:00+00:00"


def tier_figures(us: dict[str, float | None]) -> dict[str, TierFigure]:
    """µs per tier (None: tier unavailable) as TierFigure objects."""
    return {t: (TierFigure(tier=t, available=True, value_us=v, median_us=v) if v is not None
                else TierFigure(tier=t, available=False, reason="not here")) for t, v in us.items()}


def make_trace(solution: str, workload: str, us: dict[str, float | None], batch: int = 1,
               status: str = "PASSED", hardware: str = H100) -> Trace:
    """A Trace with the given µs per tier; PASSED and INCORRECT_NUMERICAL
    carry (zero) errors, only PASSED carries performance."""
    correctness = performance = None
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        correctness = Correctness(extra=CorrectnessExtra(per_output={}, trials=1, atol=0.01, rtol=0.01))
    if status == "PASSED":
        headline = next((t for t in ("cupti", "events", "wallclock", "sync") if us.get(t) is not None), None)
        performance = Performance(latency_ms=us[headline] / 1e3 if headline else 0.0, headline_tier=headline,
                                  tiers=tier_figures(us))
    evaluation = Evaluation(status=status, environment=Environment(hardware=hardware), timestamp=STAMP,
                            correctness=correctness, performance=performance)
    return Trace(definition="gdn_decode_qk4_v8_d128_k_last", solution=solution, evaluation=evaluation,
                 workload=WorkloadRecord(uuid=workload, axes={"batch_size": batch}, inputs={}))


def make_floor(workload: str, us: dict[str, float | None], batch: int = 1, hardware: str = H100,
               state_dtype: str = "float32") -> FloorMeasurement:
    """The copy floor of ``workload`` with the given µs per tier."""
    return FloorMeasurement(workload=workload, batch_size=batch, state_dtype=state_dtype, nbytes=1 << 20,
                            tiers=tier_figures(us), environment=Environment(hardware=hardware), timestamp=STAMP)


def write_run(results: Path, name: str, records: list[Trace | FloorMeasurement], set_name: str = "contest-v1",
              hardware: str = H100, started: str = STAMP, commit: str = "abc123") -> Path:
    """``results/runs/<name>/`` written by the store's RunWriter: run.json,
    traces.jsonl (the Trace records) and floors.jsonl (the FloorMeasurement ones)."""
    traces = [r.model_copy(deep=True) for r in records if isinstance(r, Trace)]
    floors = [r.model_copy(deep=True) for r in records if isinstance(r, FloorMeasurement)]
    for t in traces:
        t.evaluation.environment.hardware = hardware
    for f in floors:
        f.environment.hardware = hardware
    writer = RunWriter(results / "runs" / name)
    writer.write_run({"algo": "all", "workloads": set_name, "environment": {"hardware": hardware, "libs": {}},
                      "git_commit": commit, "started": started}, floors, traces)
    return writer.run_dir


def row(board: pd.DataFrame, solution: str, **where) -> pd.Series:
    """The one leaderboard row of ``solution`` matching ``where``."""
    sel = board["solution"] == solution
    for column, value in where.items():
        sel &= board[column] == value
    assert sel.sum() == 1, board[sel]
    return board[sel].iloc[0]
