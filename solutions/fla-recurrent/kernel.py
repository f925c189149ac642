"""Triton kernel of the GDN decode step on a k-last state (fla-recurrent).

Design (lineage: flash-linear-attention's fused_recurrent, rewritten for the
single-token, k-last case):

* grid ``(V // BV, B * HV)``: one program per (block of BV state rows, batch,
  v-head). Programs never share state, so ``new_state`` may alias ``state``.
* The [BV, K] fp32 state tile is read once from HBM with K (the contiguous
  axis) as the fastest axis, so loads and stores are vectorized along K, and
  it is written once. Nothing else touches the state.
* The gates g and beta are computed in the kernel from A_log/a/dt_bias/b:
  a handful of scalar loads per program instead of extra launches.
* The tile is addressed as ``[BV, K // KL, KL]``: K column ``c * KL + j`` of
  row ``r`` is element ``(r, c, j)``. Triton lays a block out with the
  contiguous (last) axis across the lanes first, 4 fp32 (16 bytes) a lane,
  and Triton 3.6 (the pinned ``gpu`` extra's) gives the next lanes to the
  first of the two strided axes (its order is ``[2, 0, 1]``), here the rows:
  ``KL / 4`` lanes share one row and each lane keeps the ``K // KL`` pieces
  of it, so with ``KL = 32`` a lane adds 4 pieces itself and 3 shuffle steps
  remain of a row sum, where ``KL = 128`` (one row across all 32 lanes, the
  layout a ``[BV, K]`` block gets) takes 5 (cuda-v4's "lanes per row", for
  the same reason). ``KL`` is a launch knob
  (``configs.LaunchConfig.lanes_per_row`` = ``KL / 4``). The axis order is
  Triton's choice: with the pieces axis first (``[K // KL, BV, KL]``) 3.6 puts
  the lanes on the pieces and every step costs more shuffles (187 against 85
  in ``bv8/w1``'s PTX), and Triton 3.9 does the reverse of 3.6
  (results/fla-notes.md).
* Both row reductions are taken on the *loaded* tile (S0) instead of on the
  decayed and then updated tile, using
      u   = (g*S0) k            = g * (S0 k)
      S1  = g*S0 + d ⊗ k,        d = beta * (v - u)
      S1 q = g * (S0 q) + d * (k . q)
  so the two reductions are independent (no reduction waits for another)
  and the tile is rewritten by one fused multiply-add before the store.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _softplus(x):
    """log(1 + e^x) in a form that cannot overflow: max(x, 0) + log(1 + e^-|x|).

    Equals torch's softplus (threshold 20) to fp32 rounding for every x.
    """
    return tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def gdn_decode_kernel(
    q_ptr,          # [B, 1, HQ, K] bf16
    k_ptr,          # [B, 1, HQ, K] bf16
    v_ptr,          # [B, 1, HV, V] bf16
    state_ptr,      # [B, HV, V, K] f32, k-last
    A_log_ptr,      # [HV] f32
    a_ptr,          # [B, 1, HV] bf16
    dt_bias_ptr,    # [HV] f32
    b_ptr,          # [B, 1, HV] bf16
    out_ptr,        # [B, 1, HV, V] bf16 (destination)
    new_state_ptr,  # [B, HV, V, K] f32 (destination; may alias state_ptr)
    scale,          # f32 scalar, already resolved (never 0)
    HQ: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BV: tl.constexpr,
    KL: tl.constexpr,  # K columns of a row one piece covers (4 per lane); divides K
):
    """One decode step for BV rows of one (batch, v-head) state tile.

    All inputs are contiguous, so every offset is computed from the
    constexpr sizes; (batch, v-head) is flattened as ``bh = b * HV + hv``,
    which is also the flat index of a/b and the row index of v/out. The
    tile and q/k are ``[BV, K // KL, KL]`` / ``[1, K // KL, KL]`` blocks
    (module doc); a row sum adds a lane's pieces (axis 1), then the lanes (the last axis).
    """
    i_vb = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // HV
    i_hv = i_bh % HV
    i_hq = i_hv // (HV // HQ)  # GVA: q/k head hv // (HV // HQ) serves v head hv

    offs_k = tl.arange(0, K // KL)[None, :, None] * KL + tl.arange(0, KL)[None, None, :]  # [1, K // KL, KL]
    offs_v = i_vb * BV + tl.arange(0, BV)                                                 # [BV]

    # Gates of this head, fp32.
    x = tl.load(a_ptr + i_bh).to(tl.float32) + tl.load(dt_bias_ptr + i_hv)
    g = tl.exp(-tl.exp(tl.load(A_log_ptr + i_hv)) * _softplus(x))
    beta = tl.sigmoid(tl.load(b_ptr + i_bh).to(tl.float32))

    qk_row = (i_b * HQ + i_hq) * K
    q = tl.load(q_ptr + qk_row + offs_k).to(tl.float32)
    k = tl.load(k_ptr + qk_row + offs_k).to(tl.float32)
    v = tl.load(v_ptr + i_bh * V + offs_v).to(tl.float32)

    # int64: B * HV * V * K overflows int32 beyond B = 16384.
    tile = i_bh.to(tl.int64) * (V * K) + offs_v[:, None, None] * K + offs_k   # [BV, K // KL, KL]
    s = tl.load(state_ptr + tile)                                             # f32, K fastest

    s_k = tl.sum(tl.sum(s * k, axis=1), axis=1)     # [BV]  S0 k
    s_q = tl.sum(tl.sum(s * q, axis=1), axis=1)     # [BV]  S0 q
    k_q = tl.sum(tl.sum(tl.sum(k * q, axis=0), axis=0), axis=0)  # scalar k . q
    delta = beta * (v - g * s_k)                    # [BV]
    o = scale * (g * s_q + delta * k_q)             # [BV]  S1 q * scale

    tl.store(out_ptr + i_bh * V + offs_v, o.to(out_ptr.dtype.element_ty))
    tl.store(new_state_ptr + tile, g * s + delta[:, None, None] * k)


def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: torch.Tensor,
           A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor, b: torch.Tensor,
           scale: float, output: torch.Tensor, new_state: torch.Tensor, cfg) -> None:
    """Launch one decode step writing into ``output`` and ``new_state``.

    Shapes/dtypes as in ``gdn_decode_kernel``; all tensors contiguous.
    ``scale`` must already be resolved (0/None -> 1/sqrt(K) done by caller).
    ``cfg`` is a ``configs.LaunchConfig`` whose ``bv`` divides V and whose
    ``lanes_per_row`` (4 K columns a lane) covers a piece of K dividing it.
    No tensor is created here: only Python ints go into the grid.
    """
    batch, _, num_q_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2], v.shape[3]
    grid = (head_v // cfg.bv, batch * num_v_heads)
    gdn_decode_kernel[grid](
        q, k, v, state, A_log, a, dt_bias, b, output, new_state, scale,
        HQ=num_q_heads, HV=num_v_heads, K=head_k, V=head_v, BV=cfg.bv, KL=4 * cfg.lanes_per_row,
        num_warps=cfg.num_warps, num_stages=1,  # no loop: nothing to pipeline
    )
