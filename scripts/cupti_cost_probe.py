#!/usr/bin/env python3
"""Where the CUPTI tier's wall time goes (issue #17): a fast row's CUPTI tier took ~3.3 ms a
timed call on the H100 against ~1 ms for the events tier (results/speed/20261124-H100).

    python scripts/cupti_cost_probe.py OUT_DIR

In this process (no worker), for a contest-v1 workload at B = 1 and a sweep workload at B = 64,
with the inputs a worker makes (``build_inputs`` per call) and a one-kernel ``run`` (a copy
into ``new_state``): the wall seconds of the events tier and of the cupti tier with its API
records kept all along and only around each call (``cupti.API_WINDOW``), twice each, at a
fixed 100 calls; the activity records CUPTI delivered per call; and a cProfile of the cupti
tier as the harness runs it (top functions by own time). Writes ``OUT_DIR/cupti_cost_probe.txt``; prints it.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.data.dataset import open_dataset  # noqa: E402
from harness.data.workloads import build_inputs, stored_tensors  # noqa: E402
from harness.judge import cupti  # noqa: E402
from harness.judge.timing import L2Flusher, TimingConfig, measure  # noqa: E402


def probe(dataset_name: str, index: int, out: list[str]) -> None:
    dataset = open_dataset(dataset_name, show_progress=False)
    workload = dataset.workloads[index]
    stored = {n: t.cuda() for n, t in stored_tensors(workload, dataset.definition, dataset.files).items()}
    flush = L2Flusher("cuda")

    def setup(i):
        inputs = build_inputs(workload, dataset.definition, stored, "cuda", 1000 + (i or 0))
        inputs["new_state"] = torch.empty_like(inputs["state"])
        return inputs

    def run(inputs):
        inputs["new_state"].copy_(inputs["state"])

    config = TimingConfig(max_noise=0.0)  # the fixed 100 calls: comparable tiers
    delivered = []
    original = cupti._Sink.buffer_completed

    def counting(self, activities):
        activities = list(activities)
        delivered.append(len(activities))
        return original(self, activities)

    cupti._Sink.buffer_completed = counting
    out.append(f"## {dataset_name}[{index}] B = {workload.batch_size}")
    started = time.perf_counter()
    stats = measure("events", run, setup, flush, "cuda", config)
    out.append(f"events: {time.perf_counter() - started:.3f} s wall, {stats.iters} calls, {stats.value_us:.3f} µs")
    for window in (False, True, False, True):  # API records all along, then only around the call; twice
        cupti.API_WINDOW = window
        delivered.clear()
        started = time.perf_counter()
        stats = measure("cupti", run, setup, flush, "cuda", config)
        out.append(f"cupti, API_WINDOW={window}: {time.perf_counter() - started:.3f} s wall, {stats.iters} calls, "
                   f"{stats.value_us:.3f} µs, {sum(delivered)} records (~{sum(delivered) / stats.iters:.0f} a call)")
    profiler = cProfile.Profile()
    profiler.enable()
    measure("cupti", run, setup, flush, "cuda", config)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    out.append(text.getvalue())
    cupti._Sink.buffer_completed = original


def main() -> int:
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[str] = [f"{torch.cuda.get_device_name()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    probe("contest-v1", 0, lines)
    probe("contest-v2", len(open_dataset("contest-v2", show_progress=False).workloads) - 1, lines)
    text = "\n".join(lines)
    (out_dir / "cupti_cost_probe.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
