"""Can a solution keep a timed call's inputs in L2 through the judge's flush? A probe of the cold-L2
promise (docs/judging.md, "The timed call", step 3) against the GPU's persisting L2:

    python -m tools.l2_persist_probe --out DIR [--batches 1,8] [--repeats 3]

Why ask: since Ampere a process may set part of the L2 aside for *persisting* lines
(``cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)``) and mark a stream's accesses to an address
window as persisting (``cuStreamSetAttribute(..., ACCESS_POLICY_WINDOW)``). Normal accesses do not
evict persisting lines, so a memset of 256 MB may leave them in L2. The timing core writes each
call's inputs into one of up to 8 buffer sets, zeroes 256 MB (2 x L2 in the cupti tier since 5d4fc77)
and then calls the solution, which knows every set's address from its earlier calls. If its kernels read the sets through a persisting
window, and the core's fresh inputs land in those resident lines, the next call on that set reads
them from L2: warm-L2 timing under a cold-L2 label. Both are plain CUDA calls any solution can make
(here through ``ctypes`` and the driver API).

How, in the core's order, one process, 8 state sets of the sweep workload's size laid out in one
allocation: each call writes fresh values into its set from pinned host memory on a stream of the
judge's, zeroes 256 MB there (harness.judge.timing.L2Flusher), synchronizes, then copies the set's
state to a destination on a stream of the solution's (torch ``copy_``, a read of the whole state);
CUPTI times the copy (the harness's recorder, median of 100 calls). Modes:

* ``plain``: no window;
* ``persisting``: the set-aside at the device's maximum and a persisting window over the 8 sets on
  the solution's stream (hit ratio 1);
* ``persisting+reset``: the same, and the judge calls ``cuCtxResetPersistingL2Cache`` before its
  flush (the defence: every persisting line back to normal, so the flush evicts it).
* ``persisting-normal-miss``: ``persisting`` with misses normal, not streaming;
* ``plain-warm`` and ``persisting-warm``: ``plain`` and ``persisting`` without the flush, the L2 left as
  the inputs' writes leave it (what an L2 hit is worth, and whether the window slows hits too).
* ``plain-2xL2`` and ``persisting-2xL2``: ``plain`` and ``persisting`` with the cupti tier's flush, 2 x L2
  (FlashInfer's; 100 MB on an H100) where the others zero 256 MB.

Writes ``DIR/l2_persist_probe.json`` and prints each point's median over the repeats and its range.
Needs a CUDA GPU of compute capability 8.0 or later and cupti-python.

Prediction (written 2026-11-27, before any run; H100; low confidence in the first part): if a
normal write that hits a persisting line keeps it persisting, ``persisting`` reads the copy at
least 20% under ``plain`` at B = 1 (512 KB a set, 4 MB for all 8, inside the set-aside) and
``persisting+reset`` reads like ``plain``; if the core's writes or its flush demote the lines,
all three read within a tick.

Measured (H100, ec75ece, results/proof/20261127-H100-l2-persist): neither. The window made the copy
slower, 1.30x at B = 1 (2.495 against 1.920 µs) and 2.11x at B = 8, with or without the reset: through a
persisting window, in the core's order, the inputs are not served from L2. Second prediction (before the
run with the three modes added for it): ``plain-warm`` reads at least 20% under ``plain`` (warm inputs are
worth something); ``persisting-warm`` reads like ``persisting`` if the window slows the reads themselves, like
``plain-warm`` if the flush is what undoes it; ``persisting-normal-miss`` reads like ``persisting``.
Measured (a fresh H100, a334072): held. Warm inputs are worth 27-29% (1.408 against 1.920 µs at B = 1,
3.168 against 4.480 at B = 8); the window reads about as warm without the flush (1.600, 3.120); the flush
undoes it; normal misses read like streaming ones.
Third prediction (2026-11-27, before the run with the two -2xL2 modes, when the cupti tier's flush became
FlashInfer's 2 x L2): the smaller flush still evicts the window's lines (twice the L2 is written either way),
so ``persisting-2xL2`` reads within a tick of ``persisting`` and over ``plain-2xL2``, and ``plain-2xL2``
within a tick of ``plain`` at B = 1 (at B = 8 up to two ticks over it, the lean the idle-start probe saw).
Measured (H100, 465eef3, results/proof/20261127-H100-cupti-flush-5d4fc77/l2-persist): held. ``persisting-2xL2``
2.464 µs at B = 1 (``persisting`` 2.464) and 9.631 at B = 8 (9.504), ``plain-2xL2`` 1.920 and 4.495 (``plain``
1.952 and 4.449).
"""

from __future__ import annotations

import ctypes
import statistics
import sys
from typing import Callable

from tools.probe_cli import run_probe

MODES = ("plain", "persisting", "persisting+reset", "persisting-normal-miss", "plain-warm", "persisting-warm",
         "plain-2xL2", "persisting-2xL2")
#: Buffer sets the timing core takes in turn (harness.judge.core: up to 8).
SETS = 8
ITERS = 100
#: cuda.h: CU_LIMIT_PERSISTING_L2_CACHE_SIZE, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
#: CU_ACCESS_PROPERTY_{NORMAL, STREAMING, PERSISTING}, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE,
#: CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE.
LIMIT_PERSISTING_L2 = 0x06
STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
ACCESS_NORMAL, ACCESS_STREAMING, ACCESS_PERSISTING = 0, 1, 2
ATTRIBUTE_MAX_PERSISTING_L2 = 108
ATTRIBUTE_MAX_WINDOW = 109


class AccessPolicyWindow(ctypes.Structure):
    """cuda.h's CUaccessPolicyWindow."""

    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):
    """cuda.h's CUstreamAttrValue (CUlaunchAttributeValue: 64 bytes), the window member."""

    _fields_ = [("accessPolicyWindow", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def driver() -> ctypes.CDLL:
    """libcuda, whose calls act on the context torch made current."""
    return ctypes.CDLL("libcuda.so.1")


def checked(result: int, what: str) -> None:
    """Raises RuntimeError naming the driver call unless ``result`` is CUDA_SUCCESS."""
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


def device_attribute(cu: ctypes.CDLL, attribute: int) -> int:
    value = ctypes.c_int(0)
    checked(cu.cuDeviceGetAttribute(ctypes.byref(value), attribute, 0), "cuDeviceGetAttribute")
    return value.value


def persist(cu: ctypes.CDLL, stream: int, base: int, nbytes: int, miss: int = ACCESS_STREAMING) -> None:
    """The set-aside at the device's maximum and a persisting window over [base, base + nbytes) on ``stream``,
    misses marked ``miss`` (normal or streaming)."""
    checked(cu.cuCtxSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(device_attribute(cu, ATTRIBUTE_MAX_PERSISTING_L2))),
            "cuCtxSetLimit(PERSISTING_L2_CACHE_SIZE)")
    value = StreamAttrValue()
    value.accessPolicyWindow = AccessPolicyWindow(base, min(nbytes, device_attribute(cu, ATTRIBUTE_MAX_WINDOW)),
                                                  1.0, ACCESS_PERSISTING, miss)
    checked(cu.cuStreamSetAttribute(ctypes.c_void_p(stream), STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value)),
            "cuStreamSetAttribute(ACCESS_POLICY_WINDOW)")


def unpersist(cu: ctypes.CDLL, stream: int) -> None:
    """No window on ``stream``, no set-aside, every persisting line back to normal."""
    value = StreamAttrValue()
    value.accessPolicyWindow = AccessPolicyWindow(None, 0, 0.0, ACCESS_NORMAL, ACCESS_NORMAL)
    checked(cu.cuStreamSetAttribute(ctypes.c_void_p(stream), STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value)),
            "cuStreamSetAttribute(ACCESS_POLICY_WINDOW)")
    checked(cu.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
    checked(cu.cuCtxSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(0)), "cuCtxSetLimit(PERSISTING_L2_CACHE_SIZE)")


def state_numel(batch: int) -> int:
    """Elements of the fp32 state of the sweep workload at ``batch``: [B, HV = 8, V = 128, K = 128]."""
    return batch * 8 * 128 * 128


def time_mode(mode: str, batch: int) -> float:
    """Median CUPTI µs of the copy of one set's state, the ``mode`` way, in the core's order."""
    import torch

    from harness.judge.cupti_recorder import time_calls_with_cupti
    from harness.facts import Tier
    from harness.judge.timing import L2Flusher

    cu = driver()
    numel = state_numel(batch)
    sets = torch.empty(SETS, numel, device="cuda")
    target = torch.empty(numel, device="cuda")
    fresh = torch.randn(SETS, numel).pin_memory()
    judge, solution = torch.cuda.Stream(), torch.cuda.Stream()
    flush = L2Flusher("cuda")
    flush = flush.for_tier(Tier.CUPTI) if mode.endswith("-2xL2") else flush

    def setup(index: int | None) -> int:
        k = 0 if index is None else index % SETS
        with torch.cuda.stream(judge):
            sets[k].copy_(fresh[k], non_blocking=True)
            if mode == "persisting+reset":
                torch.cuda.synchronize()  # the solution's last kernel is done, the inputs are written
                checked(cu.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
            if not mode.endswith("-warm"):
                flush()
        return k

    def call(k: int) -> None:
        with torch.cuda.stream(solution):
            target.copy_(sets[k])
        solution.synchronize()

    persisting = mode.startswith("persisting")
    if persisting:
        miss = ACCESS_NORMAL if mode == "persisting-normal-miss" else ACCESS_STREAMING
        persist(cu, solution.cuda_stream, sets.data_ptr(), sets.numel() * sets.element_size(), miss)
    try:
        records = time_calls_with_cupti(call, setup, lambda: None, ITERS, warmup=2 * SETS)
    finally:
        if persisting:
            unpersist(cu, solution.cuda_stream)
    return statistics.median(r.kernel_sum_us for r in records)


def measure(batch: int, repeats: int) -> dict[str, list[float]]:
    """``{mode: [median µs per repeat]}`` at one batch size, in rounds over the modes."""
    from tools.tier_parity import warm

    import torch

    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    state = torch.empty(state_numel(batch), device="cuda")
    target = torch.empty_like(state)
    for _ in range(repeats):
        for mode in MODES:
            warm(lambda: target.copy_(state), (), 0.3)
            times[mode].append(time_mode(mode, batch))
    return times


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "l2_persist_probe", measure, "mode", str,
                     timer=f"harness.judge.cupti_recorder, median of {ITERS} copies of one set's state, "
                           f"{SETS} sets in turn, fresh inputs and a flush on the judge's stream before each (256 MB; "
                           "2 x L2 in the -2xL2 modes)",
                     modes=list(MODES), sets=SETS, iters=ITERS)


if __name__ == "__main__":
    sys.exit(main())
