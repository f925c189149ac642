"""Probe: why the copy floor reads lower in harness runs than in tuning runs.

At B = 256 on an H100 the harness's copy-floor trace read 90.1 µs in the
side-by-side runs and the tuners' ``new_state.copy_(state)`` 90.8-90.9 µs
(results/cuda-notes.md). The two differ in two ways, crossed here:

* timing settings: the harness's :class:`TimingConfig` (10 warm-up calls,
  0.2 s clock warm-up) or the tuners' (5 warm-up calls, 0.05 s);
* tensors: the workload's state (materialized from the sweep set, as the
  harness does) or :func:`tools.tuning.random_inputs`' state.

Each of the 4 combinations is timed (CUPTI tier, cold L2, median) in 3
alternating rounds at B = 128 and 256, in one process, with one L2 flusher.
Usage (GPU): ``python scripts/copy_floor_probe.py OUT_DIR`` -> prints a
table and writes ``OUT_DIR/copy_floor_probe.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.data.dataset import open_dataset  # noqa: E402
from harness.judge.timing import L2Flusher, TimingConfig, TimingStats, measure  # noqa: E402
from tools.tuning import random_inputs, tuner_timing  # noqa: E402
from harness.data.workloads import materialize_inputs  # noqa: E402

BATCHES = (128, 256)
ROUNDS = 3


def states(batch: int, dataset) -> dict[str, torch.Tensor]:
    """The two state tensors of one batch size: the sweep workload's and a random one."""
    workload = next(w for w in dataset.workloads if w.batch_size == batch)
    stored = materialize_inputs(workload, dataset.definition, dataset.files, "cuda", 0)["state"]
    return {"workload": stored, "random": random_inputs(batch, "cuda", seed=batch)["state"]}


def copy_us(state: torch.Tensor, flush, config: TimingConfig) -> float:
    """Median CUPTI µs of ``dst.copy_(state)`` into a fresh destination."""
    target = torch.empty_like(state)
    stats = measure("cupti", lambda s: target.copy_(s), lambda index=None: state, flush, "cuda", config)
    if not isinstance(stats, TimingStats):
        raise RuntimeError(f"CUPTI unavailable: {stats.reason}")
    return stats.median_us


def main(out_dir: str) -> int:
    dataset = open_dataset("sweep", show_progress=False)
    flush = L2Flusher("cuda")
    settings = {"harness": TimingConfig(), "tuner": tuner_timing()}
    samples: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for batch in BATCHES:
            for tensors, state in states(batch, dataset).items():
                for setting, config in settings.items():
                    key = f"B={batch} {setting} timing, {tensors} state"
                    samples.setdefault(key, []).append(copy_us(state, flush, config))
    for key, values in samples.items():
        print(f"{key:45s} median {statistics.median(values):8.2f} µs  rounds {' '.join(f'{v:.2f}' for v in values)}")
    path = Path(out_dir) / "copy_floor_probe.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "samples_us": samples}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
