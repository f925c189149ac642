"""cuda-v4 entry point: the latency-tuned CUDA kernel in ``kernel.cu``.

The kernel's block shape is a template parameter, "rows per warp" (each block
has 8 warps, so it covers ``8 * rows`` V rows); :data:`ROWS_PER_WARP_TABLE`
picks it from the batch size. ``tune.py`` in this folder measures every shape
on a GPU and prints a replacement table.

The kernel is compiled once per machine (at import when a GPU is visible,
else at the first ``run``/:func:`load`) and cached on disk by
:mod:`harness.cuda_build`. ``run`` does no allocation, synchronization or
tensor creation: a table lookup, then one call.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
_REPO_ROOT = _HERE.parents[1]
if str(_REPO_ROOT) not in sys.path:  # the harness loads this file by path
    sys.path.insert(0, str(_REPO_ROOT))

from harness.cuda_build import load_cuda_solution  # noqa: E402

_HEAD_K = 128
_DEFAULT_SCALE = 1.0 / math.sqrt(_HEAD_K)

#: Block shapes compiled into kernel.cu (rows of V per warp).
ROWS_PER_WARP_CHOICES = (1, 2, 4, 8, 16)

#: ``(largest batch, rows per warp)`` pairs, first match wins; ``None`` matches
#: any batch. Initial guess, to be replaced by tune.py's measurements: small
#: batches are latency-bound and want the most warps in flight (1 row/warp);
#: large ones want fatter warps that amortize the q/k/gate work.
#: kernel.cu's default_rows_per_warp (its contest entry point) mirrors this.
ROWS_PER_WARP_TABLE: tuple[tuple[int | None, int], ...] = (
    # Measured on an NVIDIA H100 80GB HBM3 by tune.py (cold L2, median of 100
    # CUDA-event timings), 2026-11-22; results/tuning/cuda_tune.json.
    # Mirrored by default_rows_per_warp() in kernel.cu.
    (1, 1), (2, 2), (4, 4), (8, 2), (16, 4), (32, 8), (64, 4), (128, 8), (256, 4), (None, 8),
)

_module = None  # the loaded tvm-ffi module
_kernel = None  # its gdn_decode_rows


def load():
    """Build (once per machine, then from the disk cache) and load the kernel.

    Returns:
        The exported ``gdn_decode_rows(q, k, v, state, A_log, a, dt_bias, b,
        scale, output, new_state, rows_per_warp)`` function. (The module also
        exports ``gdn_decode`` without the last argument: the contest entry.)

    Raises:
        harness.cuda_build.UnsupportedGpuError: no GPU of compute capability >= 9.0.
        harness.cuda_build.CompileError: nvcc or tvm-ffi missing, or the build failed.
    """
    global _module, _kernel
    if _kernel is None:
        _module = load_cuda_solution(_HERE)
        _kernel = _module.gdn_decode_rows
    return _kernel


def load_module():
    """The whole tvm-ffi module (both exported functions); see :func:`load`."""
    load()
    return _module


def rows_per_warp(batch: int) -> int:
    """Block shape for a batch size, from :data:`ROWS_PER_WARP_TABLE`."""
    for largest, rows in ROWS_PER_WARP_TABLE:
        if largest is None or batch <= largest:
            return rows
    return ROWS_PER_WARP_TABLE[-1][1]


def resolve_scale(scale) -> float:
    """The definition's convention: 0 or None means ``1/sqrt(128)``."""
    if scale is None or scale == 0:
        return _DEFAULT_SCALE
    return float(scale)


def run_with_rows(inputs: dict, rows: int) -> dict:
    """:func:`run` with an explicit block shape (one of :data:`ROWS_PER_WARP_CHOICES`).

    Raises:
        ValueError: ``rows`` is not a compiled shape (raised by the kernel).
    """
    kernel = _kernel or load()
    output, new_state = inputs["output"], inputs["new_state"]
    kernel(inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["A_log"],
           inputs["a"], inputs["dt_bias"], inputs["b"], resolve_scale(inputs.get("scale")),
           output, new_state, rows)
    return {"output": output, "new_state": new_state}


def run(inputs: dict) -> dict:
    """One GDN decode step into the destinations ``output`` and ``new_state``.

    Args:
        inputs: the contract's dict (docs/solutions.md): q, k ``[B,1,4,128]``
            bf16; v ``[B,1,8,128]`` bf16; state ``[B,8,128,128]`` f32; A_log,
            dt_bias ``[8]`` f32; a, b ``[B,1,8]`` bf16; scale float/None;
            output ``[B,1,8,128]`` bf16 and new_state ``[B,8,128,128]`` f32,
            all contiguous CUDA tensors.

    Returns:
        ``{"output": output, "new_state": new_state}`` (the same tensors).
    """
    return run_with_rows(inputs, rows_per_warp(inputs["q"].shape[0]))


# Build/load at import when a GPU is visible, so that a build failure or an
# unsupported GPU surfaces while the harness loads the solution (not inside a
# checked or timed call). On a CPU-only machine importing stays side-effect free.
if torch.cuda.is_available():
    load()
