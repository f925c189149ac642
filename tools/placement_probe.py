"""Does where the state lies in GPU memory move a µs copy's CUPTI time? A probe of the B <= 8 offset
between the harness and FlashInfer's CUPTI timer in a plain process (issue #29, docs/timing.md):

    python -m tools.placement_probe --out DIR [--batches 1,8] [--repeats 3]

For each batch size, in a process of its own (one CUPTI client): the state of the sweep workload
and a destination of the same size, placed as views into one pool at each offset of
:data:`OFFSETS_KIB` (from the pool's start, which the caching allocator aligns to 2 MB), copied
with torch ``copy_`` and timed with FlashInfer's ``bench_gpu_time_with_cupti(cold_l2_cache=True)``
(median), ``--repeats`` times in rounds over the offsets. Writes ``DIR/placement_probe.json``
(each row's ``placement``: the offset in KiB, or one of the two subjects below; the reports
before 2026-11-26 named it ``offset_kib``) and prints each subject's median and range. Needs a
CUDA GPU, flashinfer-python and cupti-python.

The prediction it tests (written 2026-11-26, before any run): if placement is the offset, the
B = 8 figure spans at least 3% across these offsets and its fastest offsets read what the
harness reads (4.45-4.51 µs on an H100, where FlashInfer's timer reads 4.64 µs in a plain process).
Measured: refuted on both GPUs, B = 8 spans 1.7% on the H200 and 2.2% on the H100 (4.42-4.51 µs;
results/proof/20261126-H200-probes, results/proof/20261126-H100-probes).

Yet tier_parity's plain process reads 4.64 µs for the same copy at B = 8 on the H100, in every
repeat. Two subjects beside the pool's offsets take its copy apart (added 2026-11-26):
``separate``, its buffers (the materialized state and ``torch.empty_like`` of it, two allocations
of the caching allocator) under the same timer, and ``separate+warm``, the same after
tier_parity's 0.2 s clock warm-up (:func:`tools.tier_parity.warm`). Prediction, written before
the run: ``separate`` reads tier_parity's 4.64 µs at B = 8 (the buffers, not the warm-up, are the
offset), and the pool's offsets stay at 4.42-4.51. Measured on an H100: held, ``separate`` 4.672 µs
with or without the warm-up, the pool 4.448-4.576 (results/proof/20261126-H100-placement-parity);
on an H200 the seven placements span 8% at B = 8, ``separate`` the fastest
(results/proof/20261126-H200-probes-2).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from tools.probe_cli import run_probe

#: Where the state starts in the pool (KiB); the destination starts one state size plus the same
#: offset after it. 0 and 2048: 2 MB-aligned, as the core's cuMemAlloc and torch's large blocks are.
OFFSETS_KIB = (0, 4, 64, 1024, 2048)
#: tier_parity's own copy: the materialized state and a destination of its own allocation, timed as
#: it is, then the same after tier_parity's clock warm-up.
SEPARATE, SEPARATE_WARM = "separate", "separate+warm"


def pool_elements(count: int) -> int:
    """float32 elements of the pool that holds a state of ``count`` elements and its destination at
    every offset of :data:`OFFSETS_KIB`."""
    return 2 * count + 2 * max(OFFSETS_KIB) * 256


def placement(count: int, offset_kib: int) -> tuple[slice, slice]:
    """The pool's elements of the state and of its destination at ``offset_kib``: apart, in the pool."""
    start = offset_kib * 256  # float32 elements in a KiB
    return slice(start, start + count), slice(count + 2 * start, 2 * count + 2 * start)


def copy_times_us(batch: int, repeats: int) -> dict[int | str, list[float]]:
    """``{offset KiB or SEPARATE / SEPARATE_WARM: [µs per repeat]}`` of the copy of batch ``batch``'s
    state at each offset of the pool, and in tier_parity's own two buffers."""
    import torch
    from flashinfer.testing import bench_gpu_time_with_cupti

    from harness.judge.timing import TimingConfig
    from tools.tier_parity import COPY, subject_call, warm

    with tempfile.TemporaryDirectory() as workdir:  # tier_parity's copy: its call, its state and its destination
        copy, apart = subject_call(COPY, batch, Path(workdir))
    state = apart[0]
    count = state.numel()
    pool = torch.empty(pool_elements(count), dtype=torch.float32, device="cuda")
    found: dict[int | str, list[float]] = {offset: [] for offset in (*OFFSETS_KIB, SEPARATE, SEPARATE_WARM)}

    def time_us(args) -> float:
        return statistics.median(bench_gpu_time_with_cupti(copy, input_args=args, cold_l2_cache=True)) * 1e3

    for _ in range(repeats):
        for offset in OFFSETS_KIB:
            at_source, at_target = placement(count, offset)
            source, target = pool[at_source].view_as(state), pool[at_target].view_as(state)
            source.copy_(state)
            found[offset].append(time_us((source, target)))
        found[SEPARATE].append(time_us(apart))
        warm(copy, apart, TimingConfig().warm_s)
        found[SEPARATE_WARM].append(time_us(apart))
    return found


def label(subject: int | str) -> str:
    """How a subject reads in the printed rows."""
    return f"offset {subject:>5} KiB:" if isinstance(subject, int) else f"{subject:>16}:"


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "placement_probe", copy_times_us, "placement", label,
                     offsets_kib=list(OFFSETS_KIB), others=[SEPARATE, SEPARATE_WARM])


if __name__ == "__main__":
    sys.exit(main())
