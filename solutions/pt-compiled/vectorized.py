"""Vectorized fp32 GDN decode step (k-last state layout): pt-compiled's math.

The same math as the definition's per-head loop reference
(``workloads/gdn_decode_qk4_v8_d128_k_last.json``), written with batched
tensor ops so that it is fast enough to serve as the ``pt-compiled``
baseline. This file is its one home: the tuners and the tests load it from
this solution through the harness's loader (``tools/vectorized.py``), the
test fixture solutions link to it (``tests/fixtures/solutions/*/vectorized.py``),
and tests/data/test_vectorized_reference.py checks it against the loop reference and the
formulas of README.md "The math".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def default_scale(head_size: int) -> float:
    """Return the definition's default output scale ``1/sqrt(head_size)``."""
    return 1.0 / math.sqrt(head_size)


def resolve_scale(scale: float | None, head_size: int) -> float:
    """Map the definition's "0 or None means default" convention to a number."""
    if scale is None or float(scale) == 0.0:
        return default_scale(head_size)
    return float(scale)


def gates(A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor, b: torch.Tensor):
    """Decay and update gates of the delta rule, fp32.

    Args:
        A_log: ``[HV]`` float32, log of the per-head decay rate A.
        a: ``[B, 1, HV]`` bfloat16, input-dependent decay projection.
        dt_bias: ``[HV]`` float32, bias added to ``a`` before softplus.
        b: ``[B, 1, HV]`` bfloat16, update-gate projection.

    Returns:
        ``(g, beta)``, each ``[B, HV]`` float32:
        ``g = exp(-exp(A_log) * softplus(a + dt_bias))``, ``beta = sigmoid(b)``.
    """
    x = a.squeeze(1).float() + dt_bias.float()
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(x))
    beta = torch.sigmoid(b.squeeze(1).float())
    return g, beta


def delta_rule_step(state: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    g: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """One gated delta-rule update of a k-last state, returned as a new tensor.

    ``S = g*S; u = S k; S += (beta * (v - u)) ⊗ k``.

    Args:
        state: ``[B, HV, V, K]`` float32 or float64.
        k: ``[B, HV, K]`` (already expanded to the v heads), same float dtype.
        v: ``[B, HV, V]``.
        g, beta: ``[B, HV]``.
    """
    s = state * g[..., None, None]
    u = torch.matmul(s, k.unsqueeze(-1)).squeeze(-1)
    delta = beta[..., None] * (v - u)
    return s + delta.unsqueeze(-1) * k.unsqueeze(-2)


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale=None):
    """GDN decode step, all heads and sequences at once (fp32 compute).

    Args:
        q: ``[B, 1, HQ, K]`` bfloat16; ``k``: ``[B, 1, HQ, K]`` bfloat16.
        v: ``[B, 1, HV, V]`` bfloat16, with ``HV`` a multiple of ``HQ`` (GVA:
            q/k head ``h // (HV // HQ)`` serves v head ``h``).
        state: ``[B, HV, V, K]`` (k-last), any float dtype, or None for zeros.
        A_log, dt_bias: ``[HV]`` float32. a, b: ``[B, 1, HV]`` bfloat16.
        scale: float; 0 or None means ``1/sqrt(K)``.

    Returns:
        ``(output, new_state)``: ``[B, 1, HV, V]`` bfloat16 and
        ``[B, HV, V, K]`` float32.
    """
    batch, _, num_q_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2], v.shape[3]
    group = num_v_heads // num_q_heads
    scale = resolve_scale(scale, head_k)
    if state is None:
        state = torch.zeros(batch, num_v_heads, head_v, head_k, dtype=torch.float32, device=q.device)
    g, beta = gates(A_log, a, dt_bias, b)
    q_f = q.squeeze(1).float().repeat_interleave(group, dim=1)
    k_f = k.squeeze(1).float().repeat_interleave(group, dim=1)
    new_state = delta_rule_step(state.float(), k_f, v.squeeze(1).float(), g, beta)
    out = scale * torch.matmul(new_state, q_f.unsqueeze(-1)).squeeze(-1)
    return out.unsqueeze(1).to(torch.bfloat16), new_state
