"""Why does FlashInfer's events timer read 0.45-0.94 µs more than the harness's events loops at
B <= 8? A probe that steps from one loop to the other (issue #29, docs/timing.md):

    python -m tools.events_loop_probe --out DIR [--batches 1,8] [--repeats 3]

For each batch size, in a process of its own: torch ``copy_`` of the sweep workload's state (the
copy the floor and tools.tier_parity time), timed by each loop of :data:`LOOPS`, after a short
clock warm-up, ``--repeats`` times in rounds over the loops; each figure is the median of the
loop's calls (µs). The loops, from FlashInfer's to the harness's:

* ``flashinfer``: ``flashinfer.testing.bench_gpu_time_with_cuda_event(fn, cold_l2_cache=True)``,
  as tools.tier_parity calls it (its own counts: as many calls as fill 100 ms, ~3,000 here);
* ``flashinfer-100``: the same with ``dry_run_iters=10, repeat_iters=100``, the harness's counts;
* ``hand-100``: FlashInfer's loop written out (zero a 2 x L2 int8 buffer, start event, call, end
  event, no synchronization inside), 100 calls;
* ``hand-100-harness-flush``: the same with the harness's flush (its ``L2Flusher``: a 256 MB int32
  buffer);
* ``hand-chunked``: ``hand-100`` with a synchronization after the stop rule's chunks (20 calls,
  then 10 at a time, as ``bench_events`` times them), run to 100 calls;
* ``hand-20``: ``hand-100`` cut to the stop rule's first chunk, the 20 calls after which
  ``bench_events`` often stops;
* ``harness``: the floor's loop itself (``harness.judge.timing.events.bench_events``, default
  TimingConfig, its stop rule).

Writes ``DIR/events_loop_probe.json`` and prints each loop's median over the repeats and range.
Needs a CUDA GPU and flashinfer-python.

Known before it runs (results/proof/20261126-H200-probes): the flush's size is not the cause
(FlashInfer's loop with a 256 MB flush read the same), and the gap is there on both GPUs for the
copy and for cuda-v4. The prediction it tests (written 2026-11-26, before any run, with low
confidence): the gap is the call count. FlashInfer's ~3,000 calls without a synchronization fill
the launch queue, the harness's ~100 do not; so ``flashinfer-100`` and ``hand-100`` read within
0.1 µs of ``harness``, and ``flashinfer`` 0.4 µs or more above them at B = 1.

Measured (H100, c73de30, results/proof/20261126-H100-probes): held at B = 8 (``flashinfer-100``
7.18 against ``harness`` 7.20 µs; ``flashinfer`` 7.65), half at B = 1: the count takes 0.58 of
FlashInfer's 0.98 µs over the harness, and ``flashinfer-100`` / ``hand-100`` still read 0.37-0.40
above it (4.83 / 4.80 against 4.43), with either flush.

The next prediction (2026-11-26, before the run that added ``hand-chunked`` and ``hand-20``): what
is left at B = 1 is how many calls wait queued, not how many are timed. ``bench_events`` never
queues more than 20 calls, ``hand-100`` queues all 100: so ``hand-chunked`` and ``hand-20`` read
within 0.1 µs of ``harness`` at B = 1, and ``hand-100`` stays 0.3 µs or more above them.
Measured on two H100s (results/proof/20261126-H100-events-chunks): held for ``hand-chunked``
(0.02-0.05 µs over), for ``hand-20`` in one run of two. On an H200
(results/proof/20261126-H200-probes-2): ``hand-20`` held (4.224 against 4.224), ``hand-chunked``
missed by 0.08 (0.18 over); the order of the loops, by how many calls wait queued, was the same.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from tools.probe_cli import run_probe

LOOPS = ("flashinfer", "flashinfer-100", "hand-100", "hand-100-harness-flush", "hand-chunked", "hand-20", "harness")
#: Calls of the hand-written loops and of ``flashinfer-100`` (the harness's TimingConfig.iters).
CALLS = 100
#: Seconds of back-to-back calls before each timing (tools.tier_parity.warm).
WARM_S = 0.2


def hand_loop(call, zero, chunks: tuple[int, ...]) -> list[float]:
    """FlashInfer's events loop written out: per call ``zero()`` (the L2 flush), start event,
    ``call()``, end event; a synchronization after each chunk of ``chunks`` calls (FlashInfer's
    loop is one chunk). µs per call."""
    import torch

    samples: list[float] = []
    torch.cuda.synchronize()
    for calls in chunks:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for start, end in zip(starts, ends):
            zero()
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        samples += [start.elapsed_time(end) * 1e3 for start, end in zip(starts, ends)]
    return samples


def stop_rule_chunks(calls: int) -> tuple[int, ...]:
    """The chunks ``stop_rule.until_stable`` times ``calls`` calls in when it never stops early."""
    from harness.judge.timing.stop_rule import STOP_CHECK_EVERY, STOP_MIN_SAMPLES

    first = min(STOP_MIN_SAMPLES, calls)
    rest = calls - first
    return (first,) + (STOP_CHECK_EVERY,) * (rest // STOP_CHECK_EVERY) + ((rest % STOP_CHECK_EVERY,) if rest % STOP_CHECK_EVERY else ())


def loop_timers(state, target) -> dict:
    """``{loop: () -> median µs}`` for the copy of ``state`` into ``target``."""
    import torch
    from flashinfer.testing import bench_gpu_time_with_cuda_event

    from harness.judge.timing import L2Flusher
    from harness.judge.timing.events import bench_events
    from harness.judge.timing.settings import TimingConfig

    def call():
        target.copy_(state)

    flashinfer_buffer = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.int8,
                                    device="cuda")
    harness_flush = L2Flusher("cuda")
    return {
        "flashinfer": lambda: statistics.median(bench_gpu_time_with_cuda_event(call, cold_l2_cache=True)) * 1e3,
        "flashinfer-100": lambda: statistics.median(bench_gpu_time_with_cuda_event(
            call, dry_run_iters=10, repeat_iters=CALLS, cold_l2_cache=True)) * 1e3,
        "hand-100": lambda: statistics.median(hand_loop(call, flashinfer_buffer.zero_, (CALLS,))),
        "hand-100-harness-flush": lambda: statistics.median(hand_loop(call, harness_flush, (CALLS,))),
        "hand-chunked": lambda: statistics.median(hand_loop(call, flashinfer_buffer.zero_, stop_rule_chunks(CALLS))),
        "hand-20": lambda: statistics.median(hand_loop(call, flashinfer_buffer.zero_, stop_rule_chunks(20))),
        "harness": lambda: bench_events(lambda given: target.copy_(given), lambda index=None: state, harness_flush,
                                        TimingConfig()).median_us,
    }


def probe_batch(batch: int, repeats: int) -> dict[str, list[float]]:
    """``{loop: [median µs per repeat]}`` for the copy of batch ``batch``'s state."""
    from tools.tier_parity import COPY, subject_call, warm

    with tempfile.TemporaryDirectory() as workdir:
        fn, (state, target) = subject_call(COPY, batch, Path(workdir))
        timers = loop_timers(state, target)
        found: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        for _ in range(repeats):
            for loop in LOOPS:
                warm(fn, (state, target), WARM_S)
                found[loop].append(timers[loop]())
    return found


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "events_loop_probe", probe_batch, "loop", lambda loop: f"{loop:<24}",
                     loops=list(LOOPS), calls=CALLS)


if __name__ == "__main__":
    sys.exit(main())
