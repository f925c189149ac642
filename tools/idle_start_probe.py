"""What separates the harness's CUPTI recorder from FlashInfer's CUPTI timer on the same buffers: how a
call starts, the flush's size, the number of calls? A probe of issue #29's last cupti offsets
(docs/timing.md, "Where the tiers stand against the timers they name"):

    python -m tools.idle_start_probe --out DIR [--batches 1,8] [--repeats 3]

Why ask: at B = 1 the harness reads some subjects one or two CUPTI ticks off FlashInfer's timer on
every run: the copy low on H100s (0.95-0.98), cuda-v4 high on H200s (1.018-1.036), which where the
buffers lie does not explain. The probe was written on the premise that the two sides start a call
differently: that FlashInfer's ``bench_gpu_time_with_cupti`` (the plain cupti timer, and the contest
tier's) launches the call right behind its flush, as an older copy of it does, where the harness's
timing core and its in-process recorder (which times the copy floor) synchronize after the flush. The
installed FlashInfer (0.7.2.post1, ``flashinfer/testing/utils.py``, read after the first runs)
synchronizes after its flush too, so both start a call on an idle GPU, and the ``idle-start`` mode,
which adds a second synchronize, is a control that must read like ``back-to-back``. What the probe
does tell apart is the flush's size and the number of calls (the modes added after the first runs).

How: each subject on one input set, in one process, timed three ways in turn, each after the
harness's clock warm-up (``tools.tier_parity.warm``):

* ``back-to-back``: ``bench_gpu_time_with_cupti(call, cold_l2_cache=True)``, median (the plain
  cupti timer of ``tools.tier_parity``; named for the premise above: its loop synchronizes after the
  flush);
* ``idle-start``: the same timer on ``synchronize(); call()`` (a second synchronize: the control);
* ``harness``: the harness's in-process recorder (:func:`harness.judge.cupti_recorder.time_calls_with_cupti`,
  its 256 MB flush, a synchronize, the call), median of the kernel sums over 100 calls (the cupti tier's
  flush until 5d4fc77, which made it 2 x L2 after these runs: the mode keeps the 256 MB it measured);
* ``harness-2xL2``: the same recorder with FlashInfer's flush size (2 x L2, 100 MB on an H100), by torch's int32 fill;
* ``flashinfer-100``: FlashInfer's timer with 10 dry runs and 100 timed calls, where by default it
  calibrates its count to 100 ms of calls (~2,500 at B = 1).
* ``flashinfer-256``: FlashInfer's timer with the harness's 256 MB flush (its deprecated
  ``l2_flush_size_mb``, which 0.7.2.post1 still honours): with ``harness-2xL2`` the other corner of
  timer x flush size.
* ``harness-int8``: the recorder with FlashInfer's own flush, byte for byte: 2 x L2 of int8 zeroed
  (``flashinfer/testing/utils.py`` 0.7.2.post1), where the harness's L2Flusher zeroes int32. Added after
  the H200's run (results/proof/20261127-H200-idle-start), where both harness modes read every B = 1
  kernel one tick above FlashInfer's timer and FlashInfer's own flush at 256 MB did not: it tells the
  recorder from the flush kernel.
* ``harness-memset``: the recorder with the timing core's flush, 2 x L2 zeroed by ``cuMemsetD32Async``
  (``flush_l2_on`` in ``harness/judge/core/gdn_core.c``), where the in-process L2Flusher launches torch's
  fill kernel: whether the core's cupti tier, which the cross-check compares, shares the recorder's tick.
* ``harness-int8-window``: ``harness-int8`` without the recorder's external correlation id: each call's
  kernels are those launched inside its host window (the recorder's own fallback, and how FlashInfer's
  timer finds them), so the push and pop around the call are gone.
* ``harness-memset8``: the recorder with ``cuMemsetD8Async`` of 2 x L2 (a byte memset: whether the driver's
  memset reads like torch's int8 fill where its 32-bit one does not).
* ``harness-int8-graph``: ``harness-int8``'s fill captured once in a CUDA graph and replayed before each call,
  as a timing core with no torch of its own could launch it (``cuGraphLaunch`` of a graph the worker captured).
``harness-memset`` and ``harness-int8-window`` were added before the H200's second run (2026-11-28), to settle
in one run which part of the recorder adds the tick if ``harness-int8`` still reads it; ``harness-memset8`` and
``harness-int8-graph`` after the H100's run of them (results/proof/20261128-H100-idle-start-modes), where the
memset read a tick over FlashInfer's timer at B = 8 and the int8 fill none: which flush could the core use.
Measured on two H100s (results/proof/20261128-H100-idle-start-modes): the int8 fill reads FlashInfer's timer to
the nanosecond at 8 of 8 points on the second, the graph-replayed one within a tick, both memsets one or two ticks
over at B = 8, the window mode like ``harness-int8``. On an H200 (results/proof/20261128-H200-idle-start-modes)
no mode read a tick at B = 1, and both memsets read B = 8 two to five ticks over.

Subjects: cuda-v4 as its launch table picks, torch ``copy_`` and the copy floor's Triton streaming
copies, on the sweep workload's inputs. Writes ``DIR/idle_start_probe.json`` and prints each point's
median over the repeats and its range. Needs a CUDA GPU, nvcc, tvm-ffi, flashinfer-python and
cupti-python.

Prediction (written 2026-11-27, before any run; H100; low confidence): if the idle start is the
offset, ``idle-start`` reads like ``harness`` within a tick and ``back-to-back`` differs from both
by a tick or more at B = 1 for the copies (lower when idle) and cuda-v4 (higher when idle, or a
tie); at B = 8 all three within a tick. If ``idle-start`` reads like ``back-to-back``, the start is
not the cause, and the harness's flush (256 MB against FlashInfer's 2 x L2) or its recorder is.

Measured (H100, b766f50, two runs, results/proof/20261127-H100-idle-start): ``idle-start`` read
``back-to-back`` to the nanosecond at every point, as it must where both synchronize (above). ``harness`` read 0.064 µs
(two ticks, 1.4%) under both at B = 8 for cuda-v4 and torch ``copy_`` and 0.02-0.05 under for the
Triton copies, on the same buffers; at B = 1 all three tied. Second prediction (before the next run,
with the two modes added for it): if the flush's size is the difference, ``harness-2xL2`` reads like
``back-to-back`` at B = 8; if the number of calls is (FlashInfer's calibrated thousands against the
recorder's 100), ``flashinfer-100`` reads like ``harness``. Measured (the same machine, c84e371, two runs):
the flush's size. With FlashInfer's flush the recorder read within 0.03 µs of ``back-to-back`` at B = 8,
and ``flashinfer-100`` within a tick of it. Third prediction (before its run): ``flashinfer-256`` reads
like ``harness`` at B = 8 (one or two ticks under ``back-to-back``); the flush-probe of 2026-11-26, the
same timer at 256 MB on another H100, saw the copy at B = 8 unmoved (results/timing-notes.md), so a tie with ``back-to-back`` would leave the recorder's lean unexplained.
Measured (a fresh H100, c1d0b9d, two runs): held in part, a tick under ``back-to-back`` for cuda-v4 and
within a tick for the copies, where ``harness`` read one to two under: the flush's size is most of it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable

from tools.probe_cli import run_probe

MODES = ("back-to-back", "idle-start", "harness", "harness-2xL2", "flashinfer-100", "flashinfer-256", "harness-int8",
         "harness-memset", "harness-int8-window", "harness-memset8", "harness-int8-graph")
#: Timed calls of the harness's recorder per point and repeat (FlashInfer's timer picks its own count).
ITERS = 100
#: Seconds of back-to-back calls before each point (tools.tier_parity.warm).
WARM_S = 0.3


def idle_first(call: Callable[[], object]) -> Callable[[], None]:
    """``call`` after the GPU has finished all queued work: the call starts on an idle GPU."""
    import torch

    def run() -> None:
        torch.cuda.synchronize()
        call()

    return run


def recorder_flush(mode: str) -> Callable[[], object]:
    """The flush before each of the recorder's calls in a ``harness*`` mode: the harness's L2Flusher
    (int32, 256 MB, or 2 x L2 in ``harness-2xL2``), FlashInfer's buffer (int8, 2 x L2: ``harness-int8*``)
    or the timing core's memset (2 x L2: ``harness-memset``); only the one the mode uses is allocated."""
    import torch

    from harness.facts import Tier
    from harness.judge.timing import L2Flusher

    nbytes = L2Flusher.size("cuda", Tier.CUPTI)
    if mode == "harness-int8-graph":
        return graph_flush(torch.empty(nbytes, dtype=torch.int8, device="cuda"))
    if mode.startswith("harness-int8"):
        return torch.empty(nbytes, dtype=torch.int8, device="cuda").zero_
    if mode.startswith("harness-memset"):
        return memset_flush(torch.empty(nbytes, dtype=torch.int8, device="cuda"), 1 if mode.endswith("8") else 4)
    flush = L2Flusher("cuda")  # torch's int32 fill of 256 MB, the harness's flush before 5d4fc77
    # harness-2xL2: the same int32 fill of 2 x L2, written out: L2Flusher.for_tier(CUPTI) is the int8 fill since
    # d485dd9 (c8a7c66 for its run in results/proof/20261128-H100-idle-start-modes, whose column says so)
    return flush.buffer[:nbytes // 4].zero_ if mode == "harness-2xL2" else flush


def memset_flush(buffer, width: int = 4) -> Callable[[], None]:
    """``buffer`` (a CUDA tensor of a multiple of ``width`` bytes) zeroed by the driver's memset of ``width``-byte
    elements on the current stream (cuda-bindings, which cupti-python needs): ``cuMemsetD32Async`` (``width`` 4)
    as the timing core zeroes its flush, or ``cuMemsetD8Async`` (1).

    Raises (when called):
        RuntimeError: the driver refused the memset (its error code in the message).
    """
    import torch
    from cuda.bindings import driver

    memset = {4: driver.cuMemsetD32Async, 1: driver.cuMemsetD8Async}[width]
    count = buffer.numel() * buffer.element_size() // width

    def flush() -> None:
        (err,) = memset(buffer.data_ptr(), 0, count, torch.cuda.current_stream().cuda_stream)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemsetD{8 * width}Async failed: {err}")

    return flush


def graph_flush(buffer) -> Callable[[], None]:
    """``buffer.zero_()`` captured once in a CUDA graph; the returned flush replays it on the current stream."""
    import torch

    buffer.zero_()  # outside the capture: torch's fill kernel loaded before it is captured
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        buffer.zero_()
    return graph.replay


def window_recording():
    """The harness's recorder without its external correlation id (``harness-int8-window``): each call is
    marked by its host timestamps only, so its kernels are found by the API records inside that window
    (``harness.judge.cupti_recorder``'s fallback attribution).

    Raises:
        CuptiUnavailable: CUPTI cannot record here.
    """
    import itertools

    from harness.judge.cupti_recorder import IterationTag, Recording, recording

    ids = itertools.count(1)

    class WindowRecording(Recording):
        def begin_call(self) -> None:
            self.open_call = (next(ids), int(self.cu.get_timestamp()))

        def end_call(self) -> None:
            (ext, t0), self.open_call = self.open_call, None
            self.tags.append(IterationTag(ext, t0, int(self.cu.get_timestamp())))

    plain = recording()
    return WindowRecording(plain.cu, plain.synchronize)


def time_mode(mode: str, call: Callable[[], object]) -> float:
    """Median µs of ``call`` timed the ``mode`` way (one of :data:`MODES`)."""
    if mode.startswith("harness"):
        from harness.judge.cupti_recorder import recording

        flush = recorder_flush(mode)  # before the recording: the graph mode captures its flush here
        with window_recording() if mode.endswith("-window") else recording() as recorder:
            records = recorder.time_calls(lambda _: call(), lambda index: None, flush, ITERS, warmup=1)
        return statistics.median(r.kernel_sum_us for r in records)
    from flashinfer.testing import bench_gpu_time_with_cupti

    from harness.judge.timing.gpu_state import MIN_FLUSH_BYTES  # the events and sync tiers' flush on an H100 or H200
    from tools.tier_parity import flashinfer_flush

    timed = idle_first(call) if mode == "idle-start" else call
    counts = {"dry_run_iters": 10, "repeat_iters": ITERS} if mode == "flashinfer-100" else {}
    flush = flashinfer_flush(MIN_FLUSH_BYTES >> 20 if mode == "flashinfer-256" else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # l2_flush_size_mb: deprecated, still honoured
        times = bench_gpu_time_with_cupti(timed, cold_l2_cache=True, **counts, **flush)
    return statistics.median(times) * 1e3  # ms -> µs


def measure(batch: int, repeats: int) -> dict[str, list[float]]:
    """``{"<subject> <mode>": [median µs per repeat]}`` at one batch size, in rounds over the points."""
    from tools.code_warm_probe import subject_pairs
    from tools.tier_parity import warm

    with tempfile.TemporaryDirectory() as workdir:
        calls = {subject: pair[0] for subject, pair in subject_pairs(batch, Path(workdir)).items()}
        times: dict[str, list[float]] = {f"{s} {m}": [] for s in calls for m in MODES}
        for _ in range(repeats):
            for subject, call in calls.items():
                for mode in MODES:
                    warm(call, (), WARM_S)
                    times[f"{subject} {mode}"].append(time_mode(mode, call))
    return times


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "idle_start_probe", measure, "point", str,
                     timer=f"{', '.join(m for m in MODES if not m.startswith('harness'))}: "
                           "flashinfer.testing.bench_gpu_time_with_cupti(cold_l2_cache=True), median; "
                           f"{', '.join(m for m in MODES if m.startswith('harness'))}: harness.judge.cupti_recorder, "
                           f"median of {ITERS} kernel sums (the module's docstring gives each mode's flush and count)",
                     modes=list(MODES), iters=ITERS)


if __name__ == "__main__":
    sys.exit(main())
