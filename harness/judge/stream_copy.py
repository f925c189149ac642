"""A Triton streaming copy (and fill) of the state bytes: a candidate for the copy floor.

torch's ``copy_`` is not the fastest copy of a few MB on a Hopper GPU: a Triton kernel
with one load and one streaming store per element, its block size and warps chosen per
batch size, beat it by 9-16 % on the H100 at B = 1-4 and 16-32 (B = 1: 1.82 vs 2.02 µs,
B = 32: 11.68 vs 13.97 µs) and by 7-10 % on the H200, while torch's copy stayed
best from B = 128 up (issue #19). The floor is the physical limit, so it takes the best
of both (:mod:`harness.judge.floor`). Only the judge's own process runs these kernels.

Both kernels touch every element once and nothing twice, so they tell the caches so:
the load is ``.cg`` (cached in L2 only) and the store ``.cs`` (streaming: likely never
read again). A solution's state is no more reused than this copy's, so the hints take
nothing a decode kernel could not take too. (``.cg`` with ``evict_first`` as well is no
valid PTX: ptxas refuses the pair, which the first H100 run of this module showed and
``tests/judge/test_floor.py`` now checks by compiling for Hopper and Blackwell on the CPU.)

Importing this module imports Triton; :mod:`harness.judge.floor` imports it only on a
CUDA run, where Triton is installed (an optional extra: without it the floor is torch's
copy alone, and the run's floors say so by their methods).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

#: Up to this many state bytes (B <= 4 of the fp32 state, 512 KiB per batch row) a copy is
#: too small to fill an H100's or H200's 132 SMs with large blocks: 1024- and 2048-element
#: blocks (8 and 16 elements per thread at 4 warps) give 64-512 programs for the fp32 state
#: of B = 1-4, about one per SM or more, so every SM streams.
SMALL_STATE_BYTES = 2 << 20
#: Up to this many (B <= 64 of the fp32 state) blocks of 4096 and 8192 elements (32 elements
#: per thread at 4 and 8 warps) still give at least 64 programs just above 2 MiB, and put
#: more bytes in flight per thread, which a larger copy needs to cover the memory latency.
MEDIUM_STATE_BYTES = 32 << 20


@dataclass(frozen=True)
class CopyConfig:
    """One launch configuration: ``block`` elements per program, ``num_warps`` warps."""

    block: int
    num_warps: int

    def method(self, verb: str = "copy") -> str:
        """The floor's ``method`` name, e.g. ``triton streaming copy BLOCK=4096 w4``."""
        return f"triton streaming {verb} BLOCK={self.block} w{self.num_warps}"


def candidate_configs(nbytes: int) -> tuple[CopyConfig, ...]:
    """The configurations tried for a state of ``nbytes`` bytes (the tensor's own bytes, not read
    plus written), by the rule of :data:`SMALL_STATE_BYTES` and :data:`MEDIUM_STATE_BYTES`.

    Small copies (<= 2 MiB) need many programs to keep every SM busy; medium ones (<= 32 MiB)
    larger blocks with more bytes in flight per thread; above that torch's copy was the fastest
    on the H100 and H200 (issue #19), so one large-block configuration only, to keep the
    floor's time small. Two candidates per size class bound the floor's extra cost: each is
    one more timed tier (the headline one) per workload (harness/judge/floor.py). The size
    classes follow issue #19's measurements (where the streaming copy won); the configurations
    in them are chosen by the reasoning above, not tuned on a GPU: a tuning run may replace them.

    Raises:
        ValueError: ``nbytes`` is not positive.
    """
    if nbytes <= 0:
        raise ValueError(f"a copy of {nbytes} bytes has no configuration")
    if nbytes <= SMALL_STATE_BYTES:
        return CopyConfig(1024, 4), CopyConfig(2048, 4)
    if nbytes <= MEDIUM_STATE_BYTES:
        return CopyConfig(4096, 4), CopyConfig(8192, 8)
    return (CopyConfig(8192, 8),)


@triton.jit
def _stream_copy_kernel(src, dst, numel, BLOCK: tl.constexpr):
    # 64-bit offsets: int32 ones would wrap for a state above 2^31 elements; the cost is nil
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    values = tl.load(src + offsets, mask=mask, cache_modifier=".cg")
    tl.store(dst + offsets, values, mask=mask, cache_modifier=".cs")


@triton.jit
def _stream_fill_kernel(dst, numel, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    zeros = tl.zeros((BLOCK,), dtype=dst.dtype.element_ty)
    tl.store(dst + offsets, zeros, mask=offsets < numel, cache_modifier=".cs")


def _flat(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """``tensor`` as a 1-D view of its storage order (raises ValueError if it is not contiguous)."""
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (the kernel walks its storage in order)")
    return tensor.view(-1)


def stream_copy(src: torch.Tensor, dst: torch.Tensor, config: CopyConfig) -> torch.Tensor:
    """Copy ``src`` into ``dst`` (any shape, e.g. the state ``[B, 8, 128, 128]``; any dtype,
    both the same) with one streaming load and store per element. Returns ``dst``.

    Raises:
        ValueError: shapes, dtypes or devices differ, or a tensor is not contiguous.
    """
    if src.shape != dst.shape or src.dtype != dst.dtype or src.device != dst.device:
        raise ValueError(f"copy of {src.dtype}{list(src.shape)} on {src.device} into "
                         f"{dst.dtype}{list(dst.shape)} on {dst.device}")
    source, target = _flat(src, "src"), _flat(dst, "dst")
    if target.numel():
        grid = (triton.cdiv(target.numel(), config.block),)
        _stream_copy_kernel[grid](source, target, target.numel(), BLOCK=config.block, num_warps=config.num_warps)
    return dst


def stream_fill_zero(dst: torch.Tensor, config: CopyConfig) -> torch.Tensor:
    """Write zeros over ``dst`` (any shape and dtype) with one streaming store per element:
    the floor of a workload without a state input. Returns ``dst``.

    Raises:
        ValueError: ``dst`` is not contiguous.
    """
    target = _flat(dst, "dst")
    if target.numel():
        grid = (triton.cdiv(target.numel(), config.block),)
        _stream_fill_kernel[grid](target, target.numel(), BLOCK=config.block, num_warps=config.num_warps)
    return dst
