"""Launch-config table of the fla-recurrent kernel, keyed by batch size.

The kernel has no loop, so its speed depends only on how the [B, HV, V, K]
state is cut into programs (``bv`` V rows of one head per program) and on how
many warps share one program. Small batches want many small programs to fill
the 132 SMs of an H100 (latency bound); large batches want fewer, fatter
programs (bandwidth bound). The table is looked up, never autotuned, on the
hot path.

The entries are *initial guesses*; ``tune.py`` measures every valid config
per batch size on the GPU and prints a replacement ``TABLE`` to paste here.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

HEAD_K = 128  # K: state columns, contiguous in memory (k-last)
HEAD_V = 128  # V: state rows


class LaunchConfig(NamedTuple):
    """One launch configuration of ``kernel.gdn_decode_kernel``.

    bv: V rows per program (power of two dividing 128).
    num_warps: warps per program.
    num_stages: Triton pipelining depth (no loop in the kernel, so expected
        to be irrelevant; kept so tune.py can confirm that).
    """

    bv: int
    num_warps: int
    num_stages: int


# Largest batch size an entry serves -> config. A batch size B uses the entry
# with the smallest key >= B; batches above the last key use the last entry.
TABLE: dict[int, LaunchConfig] = {
    # Measured on an NVIDIA H100 80GB HBM3 by tune.py (cold L2, median of 100
    # CUDA-event timings per config, 63 configs per batch size), 2026-11-22;
    # results/tuning/fla_recurrent_tune.json. Differences between the top
    # configs are within a few percent at B >= 32, where any config is at the copy floor.
    1: LaunchConfig(bv=8, num_warps=8, num_stages=3),
    2: LaunchConfig(bv=4, num_warps=1, num_stages=2),
    4: LaunchConfig(bv=4, num_warps=1, num_stages=1),
    8: LaunchConfig(bv=8, num_warps=8, num_stages=1),
    16: LaunchConfig(bv=32, num_warps=8, num_stages=3),
    32: LaunchConfig(bv=8, num_warps=1, num_stages=2),
    64: LaunchConfig(bv=8, num_warps=1, num_stages=3),
    128: LaunchConfig(bv=8, num_warps=1, num_stages=1),
    256: LaunchConfig(bv=8, num_warps=1, num_stages=1),
    512: LaunchConfig(bv=8, num_warps=1, num_stages=1),
}

# Above this many fp32 tile elements per thread the [bv, 128] tile no longer
# fits in registers and the compiler spills to local memory.
MAX_TILE_ELEMS_PER_THREAD = 128

_KEYS = sorted(TABLE)


def is_valid(cfg: LaunchConfig, head_v: int = HEAD_V, head_k: int = HEAD_K) -> bool:
    """Whether ``cfg`` tiles the state exactly and keeps the tile in registers."""
    power_of_two = cfg.bv > 0 and cfg.bv & (cfg.bv - 1) == 0
    if not power_of_two or head_v % cfg.bv != 0:
        return False
    elems_per_thread = cfg.bv * head_k // (32 * cfg.num_warps)
    return 1 <= elems_per_thread <= MAX_TILE_ELEMS_PER_THREAD


def pick(batch: int) -> LaunchConfig:
    """Config for batch size ``batch`` (a bisect over the sorted table keys)."""
    i = bisect.bisect_left(_KEYS, batch)
    return TABLE[_KEYS[min(i, len(_KEYS) - 1)]]


def _check_table() -> None:
    """Fail at import, not at launch, if someone pastes an invalid entry."""
    for batch, cfg in TABLE.items():
        if not is_valid(cfg):
            raise ValueError(f"configs.TABLE[{batch}] = {cfg} is not a valid launch config")


_check_table()
