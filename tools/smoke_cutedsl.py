"""GPU smoke test of the cutedsl-bf16 kernel: compile and check (< 3 minutes).

Run from the repository root on a CUDA machine:

    python -m tools.smoke_cutedsl

1. Compiles every (state dtype, tile height, rows per stage) variant,
   printing the full traceback of any failure (send that log back).
2. Checks both state modes at B = 1, 4, 64 against the vectorized reference
   (:mod:`tools.vectorized`) on the fp32 state: fp32 mode with atol = rtol =
   1e-2, bf16 mode with the harness's derived tolerance
   (``harness.facts.STATE_DTYPE_TOLERANCES``); out of place with NaN-poisoned
   destinations, in place (``new_state is state``), and ``scale = 0`` (the
   default) as well as an explicit scale.

The solution is imported through the harness's loader (a private copy of its
folder, as the judge runs it). Timing every variant (and FlashInfer's
kernels) is the tuner's job (``python -m tools.tune``).

Exit status 1 if anything failed to compile or check.
"""

from __future__ import annotations

import sys
import time
import traceback

import torch

from harness.facts import Tolerance
from harness.judge.check import tensor_errors
from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR
from tools.tune.measure import state_tolerance
from tools.vectorized import gdn_decode

BATCHES = (1, 4, 64)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
H, HV, K, V = 4, 8, 128, 128
FAILURES: list[str] = []


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


def check_case(solution, dtype_name: str, batch: int, inplace: bool, scale: float, tol: Tolerance) -> None:
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


def compile_all(build) -> None:
    """Compile every variant the checks and timings use, with tracebacks on failure."""
    for dtype_name, dtype in DTYPES.items():
        for config in build.valid_configs(V, K, dtype):
            key = build.KernelKey(dtype, H, HV, K, V, config, build.target_arch())
            start = time.perf_counter()
            try:
                build.compile_kernel(key)
                print(f"  compiled {dtype_name:8s} {config.name:16s} in {time.perf_counter() - start:5.2f} s")
            except Exception:
                print(f"  COMPILE FAILED {key}")
                traceback.print_exc()
                FAILURES.append(f"compile {key}")


def main() -> int:
    import cutlass

    solution = load_solution(load_meta(SOLUTIONS_DIR / "cutedsl-bf16"))
    build = solution.build
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 reference matmuls in true fp32
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  cutlass-dsl {cutlass.__version__}  "
          f"arch {build.target_arch()}")
    print("== compile")
    compile_all(build)
    print("== correctness (vs the vectorized reference, tools.vectorized, on the fp32 state)")
    for dtype_name in DTYPES:
        for batch in BATCHES:
            check_case(solution, dtype_name, batch, inplace=False, scale=0.0, tol=state_tolerance(dtype_name))
            check_case(solution, dtype_name, batch, inplace=True, scale=0.05, tol=state_tolerance(dtype_name))
    print("== " + ("ALL OK" if not FAILURES else "FAILURES:\n  " + "\n  ".join(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
