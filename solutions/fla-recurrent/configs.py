"""Launch-config table of the fla-recurrent kernel, keyed by batch size.

The kernel has no loop, so its speed depends only on how the [B, HV, V, K]
state is cut into programs (``bv`` V rows of one head per program) and on how
many warps share one program. Small batches want many small programs to fill
the SMs (latency bound); large batches want programs that keep enough bytes
in flight per SM (bandwidth bound). The table is looked up, never autotuned,
on the hot path; ``python -m tools.tune --algo fla-recurrent`` measures every
valid config and prints it.
"""

from __future__ import annotations

from typing import NamedTuple

HEAD_K = 128  # K: state columns, contiguous in memory (k-last)
HEAD_V = 128  # V: state rows


class LaunchConfig(NamedTuple):
    """One launch configuration of ``kernel.gdn_decode_kernel``.

    bv: V rows per program (power of two dividing 128).
    num_warps: warps per program.
    (num_stages is not a knob: the kernel has no loop to pipeline.)
    """

    bv: int
    num_warps: int


#: ``(largest batch, config)`` pairs, first match wins; ``None`` matches any batch.
LAUNCH_TABLE: tuple[tuple[int | None, LaunchConfig], ...] = (
    # Small batches: the most, smallest programs (B * 8 * 32 one-warp
    # programs); from B = 16 on, 8 rows per one-warp program (fla's own shape).
    (8, LaunchConfig(bv=4, num_warps=1)),
    (None, LaunchConfig(bv=8, num_warps=1)),
)
LAUNCH_TABLE_SOURCE = ("tune.py (now tools/tune_fla_recurrent.py) on an NVIDIA H100 80GB HBM3, CUPTI tier, "
                       "cold L2, median of 100, 2026-11-23: results/tuning/fla_recurrent_tune.json")

# Above this many fp32 tile elements per thread the [bv, 128] tile no longer
# fits in registers and the compiler spills to local memory.
MAX_TILE_ELEMS_PER_THREAD = 128


def is_valid(cfg: LaunchConfig, head_v: int = HEAD_V, head_k: int = HEAD_K) -> bool:
    """Whether ``cfg`` tiles the state exactly and keeps the tile in registers."""
    power_of_two = cfg.bv > 0 and cfg.bv & (cfg.bv - 1) == 0
    if not power_of_two or head_v % cfg.bv != 0:
        return False
    elems_per_thread = cfg.bv * head_k // (32 * cfg.num_warps)
    return 1 <= elems_per_thread <= MAX_TILE_ELEMS_PER_THREAD


def pick(batch: int) -> LaunchConfig:
    """Config for batch size ``batch``: the first :data:`LAUNCH_TABLE` entry
    whose limit covers it (None covers every batch)."""
    return next(cfg for largest, cfg in LAUNCH_TABLE if largest is None or batch <= largest)


def _check_table() -> None:
    """Fail at import, not at launch, if someone pastes an invalid entry."""
    for largest, cfg in LAUNCH_TABLE:
        if not is_valid(cfg):
            raise ValueError(f"configs.LAUNCH_TABLE entry for B <= {largest}: {cfg} is not a valid launch config")


_check_table()
