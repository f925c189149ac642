"""Probe: how long may the GPU idle before a tier needs the full clock warm-up again?

The timing tiers warm the GPU for ``warm_s`` (0.2 s) only after the process has
kept it idle for :data:`harness.judge.timing.IDLE_S`, and otherwise top it up
for ``keep_warm_s`` (0.03 s) (docs/timing.md). This probe measures what that
rule rests on. For each idle gap it warms fully, sleeps for the gap, then times
the first :data:`CALLS` calls of a µs kernel (a B = 1 state copy, 512 KB, cold
L2, CUDA events): once with no warm-up at all and once after the 0.03 s top-up.
A median that stays at the warm figure after a gap says the clock was still up.

Usage (GPU): ``python scripts/clock_idle_probe.py OUT_DIR`` -> prints a table and
writes ``OUT_DIR/clock_idle_probe.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.judge.timing import L2Flusher, TimingConfig, warm_gpu_clocks  # noqa: E402

GAPS_S = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
CALLS = 20
ROUNDS = 2


def first_calls_us(copy, flush) -> list[float]:
    """Event µs of the first :data:`CALLS` flush + copy calls, each bracketed on its own."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(CALLS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(CALLS)]
    for start, end in zip(starts, ends):
        flush()
        start.record()
        copy()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


def after_gap(gap_s: float, top_up_s: float, copy, flush) -> list[float]:
    """Warm fully, idle ``gap_s``, warm ``top_up_s``, then time the first calls."""
    config = TimingConfig()
    warm_gpu_clocks(lambda args: copy(), lambda index=None: None, flush, config.warm_s)
    time.sleep(gap_s)
    if top_up_s:
        warm_gpu_clocks(lambda args: copy(), lambda index=None: None, flush, top_up_s)
    return first_calls_us(copy, flush)


def main(out_dir: str) -> None:
    device = torch.device("cuda")
    state = torch.randn(1, 8, 128, 128, device=device)
    target = torch.empty_like(state)
    flush = L2Flusher(device)
    copy = lambda: target.copy_(state)  # noqa: E731
    keep = TimingConfig().keep_warm_s
    rows = []
    for round_ in range(ROUNDS):
        for gap in GAPS_S:
            for top_up in (0.0, keep):
                samples = after_gap(gap, top_up, copy, flush)
                rows.append({"round": round_, "gap_s": gap, "top_up_s": top_up, "first_us": samples[0],
                             "median_us": statistics.median(samples), "samples_us": samples})
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    path = Path(out_dir) / "clock_idle_probe.json"
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "calls": CALLS, "rows": rows}, indent=1))
    print(f"{'gap s':>6} {'top-up s':>8} {'first µs':>9} {'median µs':>10}  (round 0 / round 1)")
    for gap in GAPS_S:
        for top_up in (0.0, keep):
            picked = [r for r in rows if r["gap_s"] == gap and r["top_up_s"] == top_up]
            print(f"{gap:>6} {top_up:>8} " + " / ".join(f"{r['first_us']:.2f} {r['median_us']:.2f}" for r in picked))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
