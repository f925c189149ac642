"""cuda-v4 entry point: the latency-tuned CUDA kernel in ``kernel.cu``.

The kernel's variants (:class:`LaunchConfig`) differ in "rows per warp", warps
per block (8, the latency design, or 4, 2, 1; a block covers ``warps * rows`` V
rows), the cache policy of the state traffic (:data:`CACHE_POLICIES`), the lanes
that share one row (32, 16 or 8), the passes over a lane's rows and, for a bf16
state, whether the second pass's rows are staged in shared memory. The contest
entry ``gdn_decode`` that :func:`run` calls picks all of them from the batch
size and the state's dtype in C++, so the harness
times what a packed submission runs: from the current GPU's launch table
(``launch_table.<device slug>.cuh``, one per GPU, listed by
``launch_tables.cuh``), chosen by the device's name, or, on a GPU without a
table, from the default model in kernel.cu (bytes in flight:
docs/tuning.md). :func:`launch_source` says which.
``python -m tools.tune --algo cuda-v4`` measures every variant on a GPU and
writes that GPU's table file.

The harness compiles ``kernel.cu`` (``sources`` in solution.toml) into
``kernel.so`` beside this file when it loads the solution; this module loads
that library with tvm-ffi (at import when a GPU is visible, else at the first
``run``/:func:`load`). ``run`` does no allocation, synchronization or tensor
creation: one call, whose table lookup is in C++.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import torch

#: The compiled kernel.cu, put beside this file by the harness's build.
LIBRARY = Path(__file__).with_name("kernel.so")
_HEAD_K = 128
_DEFAULT_SCALE = 1.0 / math.sqrt(_HEAD_K)

#: Block shapes compiled into kernel.cu (rows of V per warp).
ROWS_PER_WARP_CHOICES = (1, 2, 4, 8, 16)
#: Warps per block compiled into kernel.cu.
WARPS_PER_BLOCK_CHOICES = (8, 4, 2, 1)
#: Lanes per V row compiled into kernel.cu (a warp has 32 lanes).
LANES_PER_ROW_CHOICES = (32, 16, 8)
#: Cache policies of the state loads/stores compiled into kernel.cu; the
#: kernel takes the index (its ``CachePolicy`` enum). kernel.cu's header
#: gives the instructions of each.
CACHE_POLICIES = ("stream", "nc", "plain", "noalloc")
#: Passes over a lane's rows compiled into kernel.cu (2 only where a lane holds 2 or more rows).
PASSES_CHOICES = (1, 2)
#: kernel.cu's kMinRowsPerLaneForTwoPasses: two passes need this many rows a lane, one a pass.
MIN_ROWS_PER_LANE_FOR_TWO_PASSES = 2
#: Staged or not (kernel.cu's STAGED): a bf16 state's two-pass variants compile both.
STAGED_CHOICES = (False, True)
#: The state dtype whose two-pass variants can stage rows (kernel.cu's kCanStage).
STAGED_STATE_DTYPE = "bfloat16"


class LaunchConfig(NamedTuple):
    """One variant of the kernel.

    rows_per_warp: V rows per warp (a block covers ``warps_per_block`` x as many).
    cache_policy: one of :data:`CACHE_POLICIES`: ``stream`` (ld/st.global.cs,
        evict-first), ``nc`` (ld.global.nc, st.global), ``plain`` (ld.global,
        st.global) or ``noalloc`` (ld.global.nc.L1::no_allocate, st.global).
    lanes_per_row: lanes that share one V row (32: one float4 per lane and
        row; 16 or 8: a warp works on 2 or 4 rows at once and each lane holds
        2 or 4 float4 of each of its rows, so each reduction has fewer
        butterfly steps). ``rows_per_warp`` must be a multiple of
        ``32 / lanes_per_row``.
    warps_per_block: 8 (many warps per block: the most warps in flight per
        SM at small B) or 4, 2, 1 (a finished warp's slot is refilled without
        waiting for the rest of its block: long grids at large B).
    passes: 1, or 2 where a lane holds 2 or more rows (``rows_per_warp /
        (32 / lanes_per_row)``): the first half of a lane's rows is reduced,
        updated and stored before the second half's sums are taken (kernel.cu's
        "Passes").
    staged: with two passes and a bf16 state only: the second pass's rows are
        copied by cp.async into shared memory, not loaded into registers
        (kernel.cu's "Staged rows"; 12.29 against 13.47 µs at B = 64 on an H100,
        results/tuning/20261127-H100-bf16-staged-one-machine).
    """

    rows_per_warp: int
    cache_policy: str
    lanes_per_row: int = 32
    warps_per_block: int = 8
    passes: int = 1
    staged: bool = False

    def is_compiled(self, state_dtype: str = "float32") -> bool:
        """Whether kernel.cu can instantiate this variant for a state of ``state_dtype`` (it raises
        ValueError otherwise). A build instantiates all of them only with -DGDN_V4_ALL_VARIANTS
        (the tuner's; the bf16 state's with -DGDN_V4_BF16_ALL_VARIANTS too); the harness's build
        has just those of the launch tables and of the default model."""
        return (self.rows_per_warp in ROWS_PER_WARP_CHOICES and self.lanes_per_row in LANES_PER_ROW_CHOICES
                and self.rows_per_warp % (32 // self.lanes_per_row) == 0 and self.cache_policy in CACHE_POLICIES
                and self.warps_per_block in WARPS_PER_BLOCK_CHOICES
                and (self.passes == 1 or (self.passes == 2 and self.rows_per_lane() >= MIN_ROWS_PER_LANE_FOR_TWO_PASSES))
                and (not self.staged or (self.passes == 2 and state_dtype == STAGED_STATE_DTYPE)))

    def rows_per_lane(self) -> int:
        """Rows each lane holds: ``rows_per_warp`` over the rows a warp works on at once (``32 / lanes_per_row``)."""
        return self.rows_per_warp // (32 // self.lanes_per_row)


_POLICY_INDEX = {name: index for index, name in enumerate(CACHE_POLICIES)}
_module = None  # the loaded tvm-ffi module
_kernel = None  # its gdn_decode_config
_default = None  # its gdn_decode: the launch table (or the default model) picks the variant


def load():
    """Load the compiled kernel (once per process).

    Returns:
        The exported ``gdn_decode_config(q, k, v, state, A_log, a, dt_bias, b,
        scale, output, new_state, rows_per_warp, cache_policy, lanes_per_row,
        warps_per_block, passes, staged)`` function. (The module also exports ``gdn_decode``
        without the last six arguments, the contest entry that :func:`run`
        calls, and the launch-table queries behind :func:`launch_config`,
        :func:`launch_source`, :func:`launch_config_for` and :func:`table_devices`.)

    Raises:
        FileNotFoundError: no ``kernel.so`` beside this file (the folder was
            imported without the harness's build of its ``sources``).
    """
    global _module, _kernel, _default
    if _kernel is None:
        if not LIBRARY.is_file():
            raise FileNotFoundError(f"{LIBRARY} is missing: the harness compiles kernel.cu into it when it loads "
                                    "this solution (harness.judge.solutions.load_solution)")
        import tvm_ffi

        _module = tvm_ffi.load_module(str(LIBRARY))
        _kernel, _default = _module.gdn_decode_config, _module.gdn_decode
    return _kernel


def load_module():
    """The whole tvm-ffi module (every exported function); see :func:`load`."""
    load()
    return _module


def _config(shape) -> LaunchConfig:
    rows, policy, lanes, warps, passes, staged = shape
    return LaunchConfig(int(rows), CACHE_POLICIES[int(policy)], int(lanes), int(warps), int(passes), bool(staged))


#: Bits per state element, by state dtype name (the kernel takes fp32 and bf16 states).
STATE_BITS = {"float32": 32, "bfloat16": 16}


def launch_config(batch: int, state_dtype: str = "float32") -> LaunchConfig:
    """The variant :func:`run` launches for a batch size and state dtype on the current CUDA
    device, as the compiled module chooses it (that GPU's launch table of the dtype; for a bf16
    state without one, its fp32 table at ceil(B / 2); else the default model).

    Raises:
        RuntimeError: no CUDA device (the choice depends on the device).
        KeyError: a state dtype not in :data:`STATE_BITS`.
    """
    return _config(load_module().gdn_decode_launch_config(batch, STATE_BITS[state_dtype]))


def launch_source(state_dtype: str = "float32") -> str:
    """Where the current device's launch configurations for a state dtype come from:
    ``"table <device name>"``, ``"bf16 table <device name>"``, ``"table <device name> at ceil(B / 2)"``
    or ``"default model (<bandwidth> GB/s)"``."""
    return str(load_module().gdn_decode_launch_source(STATE_BITS[state_dtype]))


def launch_config_for(device: str, bandwidth: float, batch: int, state_dtype: str = "float32") -> LaunchConfig:
    """The variant a GPU named ``device`` (as ``torch.cuda.get_device_name`` gives it) with
    ``bandwidth`` bytes/s of peak DRAM bandwidth gets for ``batch`` states of ``state_dtype``: as
    :func:`launch_config` chooses. Host code: needs no GPU."""
    return _config(load_module().gdn_decode_config_for(device, float(bandwidth), batch, STATE_BITS[state_dtype]))


def table_devices() -> tuple[str, ...]:
    """The device names of the launch tables compiled into the module."""
    return tuple(str(load_module().gdn_decode_table_devices()).splitlines())


def resolve_scale(scale) -> float:
    """The definition's convention: 0 or None means ``1/sqrt(128)``."""
    if scale is None or scale == 0:
        return _DEFAULT_SCALE
    return float(scale)


def run_with_config(inputs: dict, config: LaunchConfig) -> dict:
    """:func:`run` with an explicit launch configuration (``python -m tools.tune`` measures them all).

    Raises:
        ValueError: a variant kernel.cu does not compile for the state's dtype
            (``not config.is_compiled(state_dtype)``; raised by the kernel).
        KeyError: ``config.cache_policy`` is not in :data:`CACHE_POLICIES`.
    """
    kernel = _kernel or load()
    output, new_state = inputs["output"], inputs["new_state"]
    kernel(inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["A_log"],
           inputs["a"], inputs["dt_bias"], inputs["b"], resolve_scale(inputs.get("scale")),
           output, new_state, config.rows_per_warp, _POLICY_INDEX[config.cache_policy], config.lanes_per_row,
           config.warps_per_block, config.passes, int(config.staged))
    return {"output": output, "new_state": new_state}


def run(inputs: dict) -> dict:
    """One GDN decode step into the destinations ``output`` and ``new_state``.

    Args:
        inputs: the contract's dict (docs/solutions.md): q, k ``[B,1,4,128]``
            bf16; v ``[B,1,8,128]`` bf16; state ``[B,8,128,128]`` f32 (or bf16:
            the bf16-state mode, fp32 arithmetic); A_log, dt_bias ``[8]`` f32;
            a, b ``[B,1,8]`` bf16; scale float/None; output ``[B,1,8,128]`` bf16
            and new_state ``[B,8,128,128]`` of the state's dtype, all contiguous
            CUDA tensors.

    Returns:
        ``{"output": output, "new_state": new_state}`` (the same tensors).
    """
    if _default is None:
        load()
    output, new_state = inputs["output"], inputs["new_state"]
    _default(inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["A_log"], inputs["a"],
             inputs["dt_bias"], inputs["b"], resolve_scale(inputs.get("scale")), output, new_state)
    return {"output": output, "new_state": new_state}


# Load at import when a GPU is visible, so that a missing or unloadable library
# surfaces while the harness loads the solution (not inside a checked or timed
# call). On a CPU-only machine importing stays side-effect free.
if torch.cuda.is_available():
    load()
