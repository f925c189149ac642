"""Is part of a µs kernel's cold-L2 time the fetch of its own code? A probe of issue #33's last
gap at B = 1 between cuda-v4 and a copy of the state (results/cuda-notes.md):

    python -m tools.code_warm_probe --out DIR [--batches 1,8] [--repeats 3]

Why ask: the judge's cold L2 (a 256 MB zero before every timed call, as flashinfer-bench does)
evicts a kernel's instructions along with its data, so each call may fetch its code from DRAM.
cuda-v4's B = 1 variant is 272 instructions (4.3 KB of sm_90a code), a streaming copy a few
dozen; no single part of cuda-v4's work is its last 0.13 µs over a copy in its own geometry
(results/ablation/20261126-H100-fast-gates), which a cost that grows with the code would explain.

How: each call of a loop is the flush, then a *decoy* on a second set of buffers, then the
subject on its own cold buffers, then an end marker (a one-byte fill). torch.profiler (kineto)
records the device timeline, and the subject's figure is the last device activity before each
end marker, so neither the flush nor the decoy is counted. The decoys:

* ``none``: the subject alone after the flush (the judge's loop);
* ``same``: the subject itself on the second set first: its code is then in L2 (and the SMs'
  instruction caches), its data still cold;
* ``other``: a different kernel over as many bytes on the second set first: a copy of the second
  set's state and a touch of its small operands for cuda-v4 (so that both decoys touch the same
  pages), cuda-v4 for the copies.

``other`` minus ``same`` is what a warm copy of the subject's own code saves, the decoy's traffic
being alike. Subjects: cuda-v4 as its launch table picks, torch ``copy_`` and the copy floor's
Triton streaming copies (:mod:`harness.judge.stream_copy`). Writes ``DIR/code_warm_probe.json``
and prints each point's median over the repeats and its range. Needs a CUDA GPU, nvcc and tvm-ffi.

Prediction (written 2026-11-26, before any run; H100): if the code fetch is part of cuda-v4's
B = 1 excess, cuda-v4 reads at least 0.06 µs (two CUPTI ticks) less after ``same`` than after
``other`` at B = 1, and the copies at most 0.03 less. If both read within 0.03, the code fetch is
not on the path that sets the call's time, and shrinking the code is no candidate.

Measured (H100, 143bed4, results/ablation/20261126-H100-code-warm): the second case. cuda-v4 read
1.984 µs at B = 1 after every decoy (``same`` − ``other`` +0.001) and 4.512 at B = 8; every copy
read the same after each decoy within one CUPTI tick.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from tools.probe_cli import run_probe
from tools.profiler_check import END_MARKER_KERNEL, device_timeline

DECOYS = ("none", "same", "other")
CUDA_V4 = "cuda-v4"
TORCH_COPY = "torch copy_"
#: Timed calls per (subject, decoy) and repeat.
ITERS = 100
#: Seconds of back-to-back calls before each point (tools.tier_parity.warm: an idle H100 times µs
#: kernels up to 2x slow).
WARM_S = 0.3


def last_before_marker_us(events: Iterable[tuple[str, float, float]], marker: tuple[str, ...], n: int) -> list[float]:
    """Per-call µs: the duration of the last device activity before each end marker.

    ``events`` are ``(name, start_us, duration_us)`` of every kernel, memcpy and memset of a
    profiled loop in which each call ends with one activity whose name holds a ``marker``
    fragment. The activity right before a marker is the subject's (a decoy and the flush come
    before it).

    Raises:
        RuntimeError: not exactly ``n`` markers, or a marker with no activity before it.
    """
    times, last = [], None
    for name, _, duration in sorted(events, key=lambda e: e[1]):
        if any(fragment in name for fragment in marker):
            if last is None:
                raise RuntimeError(f"end marker {len(times)} has no device activity before it")
            times.append(last)
            last = None
        else:
            last = duration
    if len(times) != n:
        raise RuntimeError(f"expected {n} end markers {marker} on the device timeline, found {len(times)}")
    return times


def profiled_us(call: Callable[[], object], decoy: Callable[[], object] | None, iters: int) -> list[float]:
    """Per-call device µs of ``call`` in a loop of flush, ``decoy`` (if any), ``call``, end marker."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from harness.judge.timing import L2Flusher

    flush, marker = L2Flusher("cuda"), torch.zeros(1, dtype=torch.int8, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            flush()
            torch.cuda.synchronize()  # the decoy and the call start on an idle GPU, as the judge's do
            if decoy is not None:
                decoy()
            call()
            marker.zero_()
        torch.cuda.synchronize()
    return last_before_marker_us(device_timeline(prof), END_MARKER_KERNEL, iters)


def subject_pairs(batch: int, workdir: Path) -> dict[str, tuple[Callable, Callable, Callable]]:
    """``{subject: (call on set A, call on set B, another kernel on set B)}`` at batch ``batch``:
    two input sets of the sweep workload (the same values, buffers of their own)."""
    import torch

    from harness.judge.solutions import load_meta, load_solution
    from harness.judge.stream_copy import candidate_configs, stream_copy
    from harness.paths import SOLUTIONS_DIR
    from tools.tier_parity import solution_inputs

    module = load_solution(load_meta(SOLUTIONS_DIR / CUDA_V4), workdir)
    module.load()
    (_, a), (_, b) = solution_inputs(batch), solution_inputs(batch)
    small_b = [t for name, t in b.items() if name not in ("state", "new_state", "output") and isinstance(t, torch.Tensor)]
    targets = {id(s): torch.empty_like(s["state"]) for s in (a, b)}

    def v4(given):
        return lambda: module.run(given)

    def copy_of(given):
        return lambda: targets[id(given)].copy_(given["state"])

    def copy_and_touch(given):
        def run():
            targets[id(given)].copy_(given["state"])
            for tensor in small_b:  # the pages cuda-v4 on this set would touch
                tensor.add_(0)
        return run

    pairs = {CUDA_V4: (v4(a), v4(b), copy_and_touch(b)), TORCH_COPY: (copy_of(a), copy_of(b), v4(b))}
    for config in candidate_configs(a["state"].numel() * a["state"].element_size()):
        def streamed(given, config=config):
            return lambda: stream_copy(given["state"], targets[id(given)], config)
        pairs[config.method()] = (streamed(a), streamed(b), v4(b))
    return pairs


def measure(batch: int, repeats: int) -> dict[str, list[float]]:
    """``{"<subject> after <decoy>": [median µs per repeat]}`` at one batch size, in rounds over the points."""
    from tools.tier_parity import warm

    with tempfile.TemporaryDirectory() as workdir:
        pairs = subject_pairs(batch, Path(workdir))
        times: dict[str, list[float]] = {f"{s} after {d}": [] for s in pairs for d in DECOYS}
        for _ in range(repeats):
            for subject, (call, same, other) in pairs.items():
                for decoy_name, decoy in zip(DECOYS, (None, same, other)):
                    warm(lambda: (decoy and decoy(), call()), (), WARM_S)
                    times[f"{subject} after {decoy_name}"].append(statistics.median(profiled_us(call, decoy, ITERS)))
    return times


def main(argv: list[str] | None = None) -> int:
    return run_probe(argv, __doc__, "1,8", "code_warm_probe", measure, "point", str,
                     timer=f"torch.profiler (kineto) device durations, median of {ITERS} calls, "
                           "L2 flushed (harness L2Flusher) before each call's decoy", decoys=list(DECOYS),
                     iters=ITERS)


if __name__ == "__main__":
    sys.exit(main())
