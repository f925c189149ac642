"""GPU smoke test of the cutedsl-bf16 kernel: compile, check, time (< 3 minutes).

Run from the repository root on a CUDA machine:

    python solutions/cutedsl-bf16/smoke_gpu.py

1. Compiles every (state dtype, tile height) variant, printing the full
   traceback of any failure (send that log back).
2. Checks both state modes at B = 1, 4, 64 against ``harness.reference.
   gdn_decode`` on the fp32 state: fp32 mode with atol = rtol = 1e-2, bf16
   mode with the derived ``[tolerance.bfloat16]`` of solution.toml; out of
   place with NaN-poisoned destinations, in place (``new_state is state``),
   and ``scale = 0`` (the default) as well as an explicit scale.
3. Times the kernel (heuristic tile and every other tile height) against a
   plain device copy of the state bytes (the memory-traffic floor), with
   CUDA events, L2 flushed by zeroing 256 MB before every call, median of 50.
   FlashInfer's kernels are timed too when flashinfer imports.

Exit status 1 if anything failed to compile or check.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import tomllib
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(REPO)]

import gdn_cute_build as build  # noqa: E402
import main as solution  # noqa: E402
from harness.check import tensor_errors  # noqa: E402
from harness.reference import gdn_decode  # noqa: E402
from harness.solutions import Tolerance  # noqa: E402

BATCHES = (1, 4, 64)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
H, HV, K, V = 4, 8, 128, 128
ITERS = 50
FAILURES: list[str] = []


def tolerances() -> dict[str, Tolerance]:
    """fp32: the definition's 1e-2; bf16: solution.toml's derived tolerance."""
    table = tomllib.loads((HERE / "solution.toml").read_text())["tolerance"]["bfloat16"]
    return {"float32": Tolerance(1e-2, 1e-2), "bfloat16": Tolerance(table["atol"], table["rtol"])}


def make_inputs(batch: int, state_dtype: torch.dtype, seed: int, scale: float) -> tuple[dict, torch.Tensor]:
    """Random inputs on the GPU (state ~ N(0, 0.4^2), like the bank's magnitudes)
    plus the fp32 state the reference starts from."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, std=1.0):
        return torch.randn(*shape, generator=gen, device="cuda") * std

    state32 = randn(batch, HV, V, K, std=0.4)
    inputs = {
        "q": randn(batch, 1, H, K).bfloat16(), "k": randn(batch, 1, H, K).bfloat16(),
        "v": randn(batch, 1, HV, V).bfloat16(), "state": state32.to(state_dtype),
        "A_log": torch.log(1 + 15 * torch.rand(HV, generator=gen, device="cuda")),
        "a": randn(batch, 1, HV).bfloat16(), "dt_bias": randn(HV, std=0.5) - 3.0,
        "b": randn(batch, 1, HV).bfloat16(), "scale": scale,
        "output": torch.full((batch, 1, HV, V), float("nan"), dtype=torch.bfloat16, device="cuda"),
        "new_state": torch.full((batch, HV, V, K), float("nan"), dtype=state_dtype, device="cuda"),
    }
    return inputs, state32


def check_case(dtype_name: str, batch: int, inplace: bool, scale: float, tol: Tolerance) -> None:
    """One correctness case; prints errors, records a failure."""
    label = f"{dtype_name:8s} B={batch:<3d} {'in-place ' if inplace else 'out-place'} scale={scale:<7.4g}"
    try:
        inputs, state32 = make_inputs(batch, DTYPES[dtype_name], seed=batch * 7 + inplace, scale=scale)
        ref_out, ref_state = gdn_decode(inputs["q"], inputs["k"], inputs["v"], state32, inputs["A_log"], inputs["a"],
                                        inputs["dt_bias"], inputs["b"], scale)
        if inplace:
            inputs["new_state"] = inputs["state"]
        result = solution.run(inputs)
        torch.cuda.synchronize()
        ok = True
        for name, ref in (("output", ref_out), ("new_state", ref_state)):
            err = tensor_errors(result[name], ref, tol)
            ok &= err.failed == 0
            print(f"  {label} {name:9s} max_abs={err.max_abs:.3e} max_rel={err.max_rel:.3e} "
                  f"rel_l2={err.rel_l2:.2e} failed={err.failed}/{err.numel}")
        if not ok:
            FAILURES.append(f"check {label}")
    except Exception:
        traceback.print_exc()
        FAILURES.append(f"check {label} raised")


class L2Flush:
    """Zero a 256 MB buffer: evicts H100's 50 MB L2 before each timed call."""

    def __init__(self):
        self.buffer = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buffer.zero_()


def median_us(fn, flush: L2Flush) -> float:
    """Median over ITERS of CUDA-event time of ``fn()``, cold L2 each time."""
    for _ in range(3):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
    for start, end in zip(starts, ends):
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def time_cutedsl(dtype_name: str, batch: int, flush: L2Flush) -> None:
    """Kernel time for the heuristic tile and every other tile, vs a state copy."""
    dtype = DTYPES[dtype_name]
    inputs, _ = make_inputs(batch, dtype, seed=1, scale=0.0)
    copy_us = median_us(lambda: inputs["new_state"].copy_(inputs["state"]), flush)
    chosen = solution.kernel_key(inputs).tile_v
    cells = []
    for tile in build.valid_tiles(V, K, dtype):
        try:
            fn = build.compile_kernel(solution.kernel_key(inputs, tile_v=tile))
            args = (inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["new_state"], inputs["A_log"],
                    inputs["a"], inputs["dt_bias"], inputs["b"], inputs["output"], 1.0 / math.sqrt(K))
            us = median_us(lambda: fn(*args), flush)
            cells.append(f"tile{tile}{'*' if tile == chosen else ''}={us:6.2f}")
        except Exception:
            traceback.print_exc()
            FAILURES.append(f"time {dtype_name} B={batch} tile {tile}")
    state_mb = inputs["state"].numel() * inputs["state"].element_size() / 1e6
    print(f"  {dtype_name:8s} B={batch:<3d} state {state_mb:7.2f} MB  copy={copy_us:6.2f} us  " + "  ".join(cells))


def time_flashinfer(batch: int, flush: L2Flush) -> None:
    """FlashInfer's fp32 and bf16-state kernels through our fi-* solutions, if importable."""
    from harness.solutions import load_meta, load_module

    for name, dtype in (("fi-baseline", torch.float32), ("fi-bf16state", torch.bfloat16)):
        try:
            module = load_module(load_meta(REPO / "solutions" / name))
            inputs, _ = make_inputs(batch, dtype, seed=1, scale=0.0)
            inputs["new_state"] = inputs["state"]  # both are in place
            print(f"  {name:12s} B={batch:<3d} {median_us(lambda: module.run(inputs), flush):6.2f} us")
        except Exception as exc:  # flashinfer missing or failing: report, not fatal
            print(f"  {name:12s} B={batch:<3d} unavailable: {type(exc).__name__}: {str(exc)[:200]}")


def compile_all() -> None:
    """Compile every variant the checks and timings use, with tracebacks on failure."""
    for dtype_name, dtype in DTYPES.items():
        for tile in build.valid_tiles(V, K, dtype):
            key = build.KernelKey(dtype, H, HV, K, V, tile, build.rows_per_stage(tile, K, dtype), build.target_arch())
            start = time.perf_counter()
            try:
                build.compile_kernel(key)
                print(f"  compiled {dtype_name:8s} tile_v={tile:<3d} in {time.perf_counter() - start:5.2f} s")
            except Exception:
                print(f"  COMPILE FAILED {key}")
                traceback.print_exc()
                FAILURES.append(f"compile {key}")


def main() -> int:
    import cutlass

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 reference matmuls in true fp32
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  cutlass-dsl {cutlass.__version__}  "
          f"arch {build.target_arch()}")
    print("== compile")
    compile_all()
    print("== correctness (vs harness.reference.gdn_decode on the fp32 state)")
    tols = tolerances()
    for dtype_name in DTYPES:
        for batch in BATCHES:
            check_case(dtype_name, batch, inplace=False, scale=0.0, tol=tols[dtype_name])
            check_case(dtype_name, batch, inplace=True, scale=0.05, tol=tols[dtype_name])
    print(f"== timing (CUDA events, L2 flushed, median of {ITERS}; * = heuristic tile)")
    flush = L2Flush()
    for batch in BATCHES:
        for dtype_name in DTYPES:
            time_cutedsl(dtype_name, batch, flush)
        time_flashinfer(batch, flush)
    print("== " + ("ALL OK" if not FAILURES else "FAILURES:\n  " + "\n  ".join(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
