"""Does where the state lies in GPU memory move a µs copy's CUPTI time? A probe of the B <= 8 offset
between the harness and FlashInfer's CUPTI timer in a plain process (issue #29, docs/timing.md):

    python -m tools.placement_probe --out DIR [--batches 1,8] [--repeats 3]

For each batch size, in a process of its own (one CUPTI client): the state of the sweep workload
and a destination of the same size, placed as views into one pool at each offset of
:data:`OFFSETS_KIB` (from the pool's start, which the caching allocator aligns to 2 MB), copied
with torch ``copy_`` and timed with FlashInfer's ``bench_gpu_time_with_cupti(cold_l2_cache=True)``
(median), ``--repeats`` times in rounds over the offsets. Writes ``DIR/placement_probe.json``
and prints each offset's median and range. Needs a CUDA GPU, flashinfer-python and cupti-python.

The prediction it tests (written 2026-11-26, before any run): if placement is the offset, the
B = 8 figure spans at least 3% across these offsets and its fastest offsets read what the
harness reads (4.45-4.51 µs on an H100, where FlashInfer's timer reads 4.64 µs in a plain process).
Measured: refuted on both GPUs, B = 8 spans 1.7% on the H200 and 2.2% on the H100 (4.42-4.51 µs;
results/proof/20261126-H200-probes, results/proof/20261126-H100-probes).
"""

from __future__ import annotations

import statistics
import sys

from tools.probe_cli import run_probe

#: Where the state starts in the pool (KiB); the destination starts one state size plus the same
#: offset after it. 0 and 2048: 2 MB-aligned, as the core's cuMemAlloc and torch's large blocks are.
OFFSETS_KIB = (0, 4, 64, 1024, 2048)


def pool_elements(count: int) -> int:
    """float32 elements of the pool that holds a state of ``count`` elements and its destination at
    every offset of :data:`OFFSETS_KIB`."""
    return 2 * count + 2 * max(OFFSETS_KIB) * 256


def placement(count: int, offset_kib: int) -> tuple[slice, slice]:
    """The pool's elements of the state and of its destination at ``offset_kib``: apart, in the pool."""
    start = offset_kib * 256  # float32 elements in a KiB
    return slice(start, start + count), slice(count + 2 * start, 2 * count + 2 * start)


def copy_times_us(batch: int, repeats: int) -> dict[int, list[float]]:
    """``{offset KiB: [µs per repeat]}`` of the copy of batch ``batch``'s state at each offset."""
    import torch
    from flashinfer.testing import bench_gpu_time_with_cupti

    from tools.tier_parity import sweep_workload

    state = sweep_workload(batch)[2]["state"]  # the state tier_parity's copy copies
    count = state.numel()
    pool = torch.empty(pool_elements(count), dtype=torch.float32, device="cuda")
    found: dict[int, list[float]] = {offset: [] for offset in OFFSETS_KIB}
    for _ in range(repeats):
        for offset in OFFSETS_KIB:
            at_source, at_target = placement(count, offset)
            source, target = pool[at_source].view_as(state), pool[at_target].view_as(state)
            source.copy_(state)
            times = bench_gpu_time_with_cupti(lambda s, t: t.copy_(s), input_args=(source, target), cold_l2_cache=True)
            found[offset].append(statistics.median(times) * 1e3)
    return found


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "placement_probe", copy_times_us, "offset_kib",
                     lambda offset: f"offset {offset:>5} KiB:", offsets_kib=list(OFFSETS_KIB))


if __name__ == "__main__":
    sys.exit(main())
