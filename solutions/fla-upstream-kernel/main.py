"""fla-upstream-kernel: fla's fused recurrent GDN Triton kernel, without its wrapper.

fla-upstream calls fla's public ``fused_recurrent_gated_delta_rule``, which
allocates its own output and final state, so that baseline pays a second
full read and write of the state (the copy into ``new_state``). This one
launches the kernel the wrapper launches,
``fla.ops.gated_delta_rule.fused_recurrent.fused_recurrent_gated_delta_rule_fwd_kernel``,
with the grid and constants of ``fused_recurrent_gated_delta_rule_fwd``
(fla-core 0.6.0: BV = 8, one warp, num_stages 3, one program per (V block,
sequence, v head)), but with ``o`` = our ``output`` and ``ht`` = our
``new_state``: what fla's kernel alone costs, the number the FLA column of
the project's H100 table quotes.

It reaches into an internal of fla (the kernel's parameter list is not a
public API): pinned by the bundle to fla-core 0.6.0, and any mismatch shows
up as COMPILE_ERROR/RUNTIME_ERROR or a failed check, never as a silent number.
"""

from __future__ import annotations

import math

import triton
from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd_kernel

#: fla-core 0.6.0's fused_recurrent_gated_delta_rule_fwd launch constants.
FLA_BV, FLA_NUM_WARPS, FLA_NUM_STAGES = 8, 1, 3


def run(inputs: dict) -> dict:
    """One GDN decode step with fla's kernel, into the destinations.

    Args:
        inputs: the contract's dict (docs/solutions.md): q, k ``[B,1,4,128]``
            bf16; v ``[B,1,8,128]`` bf16; state ``[B,8,128,128]`` f32 k-last
            (fla's ``state_v_first``); A_log, dt_bias ``[8]`` f32; a, b
            ``[B,1,8]`` bf16 passed raw (softplus/sigmoid in the kernel);
            scale float/None; destinations ``output`` ``[B,1,8,128]`` bf16 and
            ``new_state`` ``[B,8,128,128]`` f32.

    Returns:
        ``{"output": output, "new_state": new_state}`` (the destinations).
    """
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    batch, seq_len, num_q_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2], v.shape[3]
    scale = inputs.get("scale")
    scale = float(scale) if scale else 1.0 / math.sqrt(head_k)
    output, new_state = inputs["output"], inputs["new_state"]
    grid = (triton.cdiv(head_v, FLA_BV) * batch * num_v_heads,)
    fused_recurrent_gated_delta_rule_fwd_kernel[grid](
        q=q, k=k, v=v, g=inputs["a"], gk=None, gv=None, beta=inputs["b"],
        A_log=inputs["A_log"], dt_bias=inputs["dt_bias"], o=output, h0=inputs["state"], ht=new_state,
        cu_seqlens=None, scale=scale, T=seq_len, H=num_q_heads, HV=num_v_heads, K=head_k, V=head_v,
        BK=triton.next_power_of_2(head_k), BV=FLA_BV,
        IS_BETA_HEADWISE=True,  # one beta per head: b is [B, 1, HV]
        USE_QK_L2NORM_IN_KERNEL=False, APPLY_BETA_SIGMOID=True, ALLOW_NEG_EIGVAL=False,
        STATE_V_FIRST=True, num_warps=FLA_NUM_WARPS, num_stages=FLA_NUM_STAGES,
    )
    return {"output": output, "new_state": new_state}
