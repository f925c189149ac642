"""An independent cross-check of the CUPTI recorder (:mod:`harness.judge.cupti_recorder`): the same loop's
per-call kernel times from ``torch.profiler`` (kineto's own CUPTI client), for
``tools/timing_proof.py`` and a GPU smoke test (``python -m tools.profiler_check``).

Kept out of the harness: no verdict or figure uses it, and it needs the timers (the L2 flush)
that the recorder serves.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Iterable

from harness.judge.cupti_recorder import cupti_status, time_calls_with_cupti
from harness.judge.timing import L2Flusher

#: Name fragments (demangled, mangled) of the L2 flush's kernel: ``L2Flusher``
#: zeroes an *int32* buffer (at::native FillFunctor<int>; a solution's own
#: fills are float ones). The cross-check starts each call at this kernel ...
FLUSH_KERNEL = ("FillFunctor<int>", "FillFunctorIiE")
#: ... and of the end marker it launches after each call: a fill of an int8
#: tensor (FillFunctor<signed char>), which no GDN solution launches.
END_MARKER_KERNEL = ("FillFunctor<signed char>", "FillFunctorIaE")


def split_at_delimiters_us(kernels: Iterable[tuple[str, float, float]], start: tuple[str, ...],
                           end: tuple[str, ...], n: int) -> list[float]:
    """Per-call device µs from a profiled loop's device timeline.

    ``kernels`` are ``(name, start_us, duration_us)`` of every kernel, memcpy
    and memset of a loop in which each call is preceded by one kernel whose
    name contains a ``start`` fragment (the L2 flush) and followed by one
    whose name contains an ``end`` fragment (the end marker). Call i's time
    is the sum of the durations between the i-th start and the next end, so
    the next iteration's setup (input clones) is never counted.

    Raises:
        RuntimeError: not exactly ``n`` start delimiters, or a call with no device time.
    """
    totals: list[float] = []
    inside = False
    for name, _, duration in sorted(kernels, key=lambda k: k[1]):
        if any(fragment in name for fragment in start):
            totals.append(0.0)
            inside = True
        elif any(fragment in name for fragment in end):
            inside = False
        elif inside:
            totals[-1] += duration
    if len(totals) != n:
        raise RuntimeError(f"expected {n} flush kernels {start} on the device timeline, found {len(totals)}")
    bad = [i for i, t in enumerate(totals) if t <= 0]
    if bad:
        raise RuntimeError(f"torch.profiler recorded no device time for calls {bad[:10]}")
    return totals


def independent_kernel_times_us(fn: Callable[[Any], Any], setup: Callable[[], Any], flush: Callable[[], None],
                                iters: int, warmup: int = 1) -> list[float]:
    """Per-call kernel µs (kernels + memcpy + memset durations summed) from
    ``torch.profiler``, for cross-checking :func:`time_calls_with_cupti`.

    Same loop (setup, flush, synchronize, call), plus an end-marker kernel
    (a fill of a one-byte int8 tensor) after each call. Calls are told apart
    on kineto's device timeline alone, between a flush kernel and the next
    end marker, not through torch's op tree: kernels launched outside torch
    (a tvm-ffi or CuTe DSL launch) are not attached to torch ops, but they
    are on the timeline. Independent in *code path* (kineto's own CUPTI
    client and buffer handling), not in hardware source: kineto also reads
    CUPTI's GPU timestamps. Agreement within a few percent shows our
    correlation and arithmetic are right, not that CUPTI is.

    Raises:
        RuntimeError: no CUDA device, or the timeline does not split into ``iters`` calls.
    """
    import torch  # noqa: PLC0415
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise RuntimeError("independent_kernel_times_us needs a CUDA device")
    marker = torch.zeros(1, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        args = setup(None)
        flush()
        fn(args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for index in range(iters):
            args = setup(index)
            flush()
            torch.cuda.synchronize()
            fn(args)
            marker.zero_()
        torch.cuda.synchronize()
    return split_at_delimiters_us(device_timeline(prof), FLUSH_KERNEL, END_MARKER_KERNEL, iters)


def device_timeline(prof) -> list[tuple[str, float, float]]:
    """``(name, start_us, duration_us)`` of every kernel, memcpy and memset a finished
    ``torch.profiler.profile`` recorded on the device (kineto's own records, user annotations left out)."""
    from torch.autograd import DeviceType  # noqa: PLC0415

    return [(e.name(), e.start_ns() / 1e3, e.duration_ns() / 1e3) for e in prof.profiler.kineto_results.events()
            if e.device_type() == DeviceType.CUDA and not e.is_user_annotation()]


def main(iters: int = 20) -> None:
    """GPU smoke test (``python -m tools.profiler_check``): time a 512 KB zero + copy
    with CUPTI, cross-check with torch.profiler, then CUPTI again (coexistence)."""
    import torch  # noqa: PLC0415

    ok, reason = cupti_status()
    print("cupti_status:", (ok, reason))
    if not ok:
        raise SystemExit(f"CUPTI unavailable: {reason}")
    src = torch.randn(128 * 1024, device="cuda")  # 512 KB of fp32
    flush = L2Flusher("cuda")

    def setup(index=None):
        return torch.empty_like(src), src

    def fn(args):
        dst, s = args
        dst.zero_()  # a fill kernel
        dst.copy_(s)  # a device-to-device memcpy

    recs = time_calls_with_cupti(fn, setup, flush, iters=iters, warmup=3)
    for r in recs[:3]:
        print(r)
    cupti_med = statistics.median(r.kernel_sum_us for r in recs)
    prof_med = statistics.median(independent_kernel_times_us(fn, setup, flush, iters=iters))
    print(f"median kernel sum: cupti {cupti_med:.3f} us, torch.profiler {prof_med:.3f} us, "
          f"ratio {cupti_med / prof_med:.3f} (want 0.95..1.05)")
    again = time_calls_with_cupti(fn, setup, flush, iters=5, warmup=1)
    print("after torch.profiler:", again[0])
    print("kernels per call:", sorted({r.n_kernels for r in recs + again}),
          "| attribution:", sorted({r.attribution for r in recs + again}),
          "| flush excluded:", all(r.kernel_sum_us < 50 for r in recs + again))


if __name__ == "__main__":
    main()
