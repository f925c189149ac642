"""Does the timing core's buffer layout move a µs kernel's CUPTI time? A probe of the H200's standing cupti
offset, cuda-v4 at B = 1 (issue #29; docs/timing.md, "Where the tiers stand against the timers they name"):

    python -m tools.core_layout_probe --out DIR [--batches 1,8] [--repeats 3]

Why ask: on every H200 the cross-check reads cuda-v4 at B = 1 one or two CUPTI ticks over FlashInfer's
timer in a plain process (1.018-1.036), while the `contest` tier, FlashInfer's timer inside the judge's
worker on the worker's own PyTorch buffers, reads it within 2%. What the core's cupti tier does that neither
does: its buffers. gdn_core.c (``alloc_slot``) gave every tensor of every buffer set a ``cuMemAlloc`` of its
own, after the flush buffer's, where a PyTorch caller's small tensors share the caching allocator's 2 MB
blocks. Placement on the plain side was tried (every placement there came from PyTorch's allocator,
``tools/placement_probe.py``), the flush and the call's start were tried (``tools/idle_start_probe.py``); the
core's own layout was not.

How: for each batch size, in a process of its own (one CUPTI client), cuda-v4 (as its launch table picks) and
torch ``copy_`` of the state, each on the sweep workload's inputs in as many buffer sets as the core takes
(:func:`harness.judge.core.buffer_sets`), in turn, laid out three ways (:data:`LAYOUTS`):

* ``torch``: the sets of :func:`harness.judge.core.placement_copies`, as ``tools.tier_parity``'s plain side
  takes them (the original and PyTorch clones);
* ``core``: the core's layout until 10a990b, every tensor of every set in a ``cuMemAlloc`` of its own, in its
  order (a flush buffer of the core's size first, then per slot, inputs then outputs, one allocation per set and
  a stored input's pristine copy), the values copied in;
* ``core-pooled``: each set's tensors carved from one ``cuMemAlloc`` of the set, 512-byte aligned, in the
  call's argument order: the layout the core takes since 10a990b (``alloc_pools``);
* ``core-split``: the same, but the tensors over 1 MB (the state and new_state from B = 4 up) from a second
  allocation of the set, as PyTorch keeps them apart from the small ones (added after the runs below).

Each is timed with FlashInfer's ``bench_gpu_time_with_cupti(cold_l2_cache=True)`` (the plain cupti timer),
after the harness's clock warm-up, ``--repeats`` times in rounds over the points; each repeat keeps the median
and the window mean of its calls (:func:`harness.judge.timing.stats.window_mean`, below one CUPTI step).
Writes ``DIR/core_layout_probe.json`` and prints each point's median over the repeats and its range. Needs a
CUDA GPU, nvcc, tvm-ffi, flashinfer-python and cupti-python (cuda-bindings).

Prediction (written 2026-11-28, before any run; H200; medium confidence): if the layout is the offset,
cuda-v4 at B = 1 reads ``core`` one or two ticks (32-64 ns, window mean 25-65 ns) over ``torch``, and
``core-pooled`` within 10 ns of ``torch`` by the window mean; at B = 8 all three within a tick. The copy, two
tensors a set, moves less: within a tick at both B. If ``core`` reads like ``torch``, the layout is not the
offset, and what is left is the core's call sequence (its inputs written and destinations poisoned on a stream
of its own before the flush, the event pair around the call). Where it holds, the core's layout
would change to ``core-pooled`` (a candidate built beside this probe; landed as 10a990b): then, in
``run_local.py --algo cuda-v4,cuda-v1 --workloads sweep --tiers cupti`` alternated with main on one H200, cuda-v4 at
B = 1 reads one or two ticks under main's figure in every round, and every figure from B = 16 up within 1%.

Measured (H200, 4ba9beb, results/proof/20261128-H200-core-layout): cuda-v4 at B = 1 read ``core`` one tick over
``torch`` (window mean +18 ns) and ``core-pooled`` 3 ns under it; at B = 8 ``core`` a tick under, ``core-pooled``
within 2 ns. The copy missed: ``core`` two ticks under ``torch`` at B = 8, ``core-pooled`` a tick over at B = 1. The
A/B held on the same H200 (cuda-v4 at B = 1 one tick lower both rounds, B >= 16 within 0.9%; results/judge-check/
20261128-H200-core-pooled-ab), and the core takes the pooled layout since 10a990b. On an H100 the pooled core read
B = 1 a tick lower and B = 8 one or two ticks higher than the old (results/judge-check/20261128-H100-core-pooled-ab).

Prediction for ``core-split`` (written 2026-11-28 after those runs, before any run of it; low confidence): on an H100,
cuda-v4 at B = 8 reads ``core-split`` within a tick of ``torch`` where ``core-pooled`` reads one or two ticks over it;
at B = 1 ``core-split`` is ``core-pooled`` (every tensor under 1 MB), so the two read alike. If it holds on an H100 and
an H200, the core's pools split the same way.

Measured (H100 and H200, 6137de7, results/proof/20261128-core-split-probe): missed. On the H100 every core layout read
cuda-v4 at B = 8 under ``torch`` (window mean: ``core-pooled`` −56 ns, ``core-split`` −33), and the copy at B = 1 read
``core-pooled`` and ``core-split``, the same pattern allocated twice, 30 ns apart; on the H200 both read like ``torch``
within 6 ns at every point. A core with split pools, A/B'd anyway, bought nothing (results/judge-check/
20261128-core-split-ab); the core keeps one allocation a set.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Callable

from tools.probe_cli import run_probe

LAYOUTS = ("torch", "core", "core-pooled", "core-split")
#: PyTorch's caching allocator rounds every block to 512 bytes, as the core's pools do (the pooled layouts take
#: the core's rounding, :func:`harness.judge.core.pooled_bytes`), and serves a request of at most this many bytes
#: from its small pool (``kSmallSize``), a larger one from blocks of its own pool, apart from the small tensors
#: (the ``core-split`` layout).
TORCH_SMALL_BYTES = 1 << 20
#: Seconds of back-to-back calls before each point (tools.tier_parity.warm).
WARM_S = 0.3


def _nbytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()


class DriverMemory:
    """Device allocations made with the driver's ``cuMemAlloc`` (as gdn_core.c makes its buffers), each
    lent to PyTorch as a tensor (``__cuda_array_interface__``), all freed by :meth:`close`."""

    def __init__(self):
        from cuda.bindings import driver

        self.driver, self.pointers = driver, []

    def alloc(self, nbytes: int) -> int:
        """A fresh allocation of ``nbytes`` (at least 1), its device address.

        Raises:
            RuntimeError: the driver refused (its error code in the message).
        """
        err, pointer = self.driver.cuMemAlloc(max(1, nbytes))
        if err != self.driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemAlloc({nbytes}) failed: {err}")
        self.pointers.append(pointer)
        return int(pointer)

    @staticmethod
    def tensor_at(address: int, like):
        """A tensor of ``like``'s dtype and shape over the device bytes at ``address``, holding ``like``'s values."""
        import torch

        raw = torch.as_tensor(_ArrayAt(address, _nbytes(like)), device=like.device)
        tensor = raw.view(like.dtype).view(like.shape)
        tensor.copy_(like)
        return tensor

    def close(self) -> None:
        import torch

        torch.cuda.synchronize()
        for pointer in self.pointers:
            self.driver.cuMemFree(pointer)
        self.pointers = []


class _ArrayAt:
    """``nbytes`` of device memory at ``address`` in the CUDA array interface (bytes, one dimension)."""

    def __init__(self, address: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def core_order(definition, workload) -> list[tuple[str, bool]]:
    """``[(name, stored)]``: the tensors the core allocates for ``workload``, in gdn_core.c's order (its
    inputs, then its outputs, as :func:`harness.judge.core_tier.lay_out` lists them; ``stored``: the
    core keeps a pristine copy of it too)."""
    from harness.judge.core_tier import lay_out

    laid = lay_out(definition, workload, {}, "float32", "cpu")
    slots = [s for s in laid.inputs if s.source != "none"] + laid.outputs
    return [(s.name, s.source == "stored") for s in slots]


def core_sets(memory: DriverMemory, named: dict, order: list[tuple[str, bool]], count: int,
              flush_bytes: int) -> list[dict]:
    """``count`` sets of ``named``'s tensors laid out as gdn_core.c laid out its slots until 10a990b: its flush buffer
    (``flush_bytes``) first (``arm``), then per tensor one allocation per set and, for a stored input, its
    pristine copy (``alloc_slot``); anything not a tensor is shared."""
    memory.alloc(flush_bytes)
    sets: list[dict] = [dict(named) for _ in range(count)]
    for name, stored in order:
        like = named[name]
        for chosen in sets:
            chosen[name] = memory.tensor_at(memory.alloc(_nbytes(like)), like)
        if stored:
            memory.alloc(_nbytes(like))
    return sets


def pooled_sets(memory: DriverMemory, named: dict, count: int, apart_over: int | None = None) -> list[dict]:
    """``count`` sets of ``named``'s tensors, each set carved from one allocation of its own in ``named``'s
    order, every tensor at a multiple of the core's ``POOL_ALIGN`` (:func:`harness.judge.core.pooled_bytes`);
    with ``apart_over``, the tensors of more bytes than that from a second allocation of the set, as PyTorch
    keeps them apart from the small ones (:data:`TORCH_SMALL_BYTES`)."""
    import torch

    from harness.judge.core import pooled_bytes

    tensors = [name for name, value in named.items() if isinstance(value, torch.Tensor)]
    large = [name for name in tensors if apart_over is not None and _nbytes(named[name]) > apart_over]
    pools = []  # each allocation of a set: (offset of each tensor, bytes), the same in every set
    for group in ([n for n in tensors if n not in large], large):
        offsets, size = {}, 0
        for name in group:
            offsets[name] = size
            size += pooled_bytes(_nbytes(named[name]))
        if group:
            pools.append((offsets, size))
    sets = []
    for _ in range(count):
        chosen = dict(named)
        for offsets, size in pools:
            base = memory.alloc(size)
            chosen.update({name: memory.tensor_at(base + offset, named[name]) for name, offset in offsets.items()})
        sets.append(chosen)
    return sets


def layouts(memory: DriverMemory, definition, workload, named: dict) -> dict[str, list[dict]]:
    """``{layout: [named inputs and destinations of one set]}`` for every layout of :data:`LAYOUTS`."""
    from harness.judge.core import buffer_sets_for, placement_copies
    from harness.judge.timing import L2Flusher

    count = buffer_sets_for(named.values())
    return {"torch": placement_copies(named, count),
            "core": core_sets(memory, named, core_order(definition, workload), count, L2Flusher.size("cuda")),
            "core-pooled": pooled_sets(memory, named, count),
            "core-split": pooled_sets(memory, named, count, apart_over=TORCH_SMALL_BYTES)}


def subject_calls(batch: int, workdir: Path, memory: DriverMemory) -> dict[str, tuple[Callable, list[tuple]]]:
    """``{"<subject> <layout>": (fn, [argument tuples, one per set])}`` at batch ``batch``."""
    from harness.judge import dps
    from harness.judge.solutions import load_meta
    from harness.paths import SOLUTIONS_DIR
    from tools.tier_parity import given_inputs, sweep_workload

    definition, workload, inputs = sweep_workload(batch)
    named = given_inputs(definition, workload, inputs)
    v4 = dps.load_entry(load_meta(SOLUTIONS_DIR / "cuda-v4"), definition, workdir)
    order = dps.argument_order(definition)
    calls = {}
    for layout, sets in layouts(memory, definition, workload, named).items():
        calls[f"cuda-v4 {layout}"] = (v4, [tuple(s[name] for name in order) for s in sets])
        calls[f"torch copy_ {layout}"] = (lambda state, target: target.copy_(state),
                                          [(s["state"], s["new_state"]) for s in sets])
    return calls


def measure(batch: int, repeats: int) -> dict[str, list[float]]:
    """``{"<subject> <layout>": [median µs per repeat], "... window": [window mean µs per repeat]}`` at one
    batch size, in rounds over the points."""
    import warnings

    from tools.probe_cli import cupti_point
    from tools.tier_parity import rotating, warm

    memory = DriverMemory()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            calls = subject_calls(batch, Path(workdir), memory)
            times: dict[str, list[float]] = {f"{point}{kind}": [] for point in calls for kind in ("", " window")}
            for _ in range(repeats):
                for point, (fn, sets) in calls.items():
                    warm(fn, sets[0], WARM_S)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", DeprecationWarning)
                        median, window = cupti_point(rotating(fn, sets))
                    times[point].append(median)
                    times[f"{point} window"].append(window)
        return times
    finally:
        memory.close()


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "core_layout_probe", measure, "point", str,
                     timer="flashinfer.testing.bench_gpu_time_with_cupti(cold_l2_cache=True) over the sets in turn: "
                           "median, and the window mean (harness.judge.timing.stats.window_mean) of the same calls",
                     layouts=list(LAYOUTS))


if __name__ == "__main__":
    sys.exit(main())
