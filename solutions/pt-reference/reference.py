import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    """GDN decode, one token, k-last state [B, HV, V, K]; fp32 compute.

    g = exp(-exp(A_log) * softplus(a + dt_bias)); beta = sigmoid(b)
    per (batch, v-head h), with q/k head h // (HV // HQ) and S the [V, K] tile:
        S = g * S;  u = S k;  S = S + (beta * (v - u)) outer k;  o = scale * S q
    """
    B, T, HQ, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    assert T == 1 and k.shape[2] == HQ and HV % HQ == 0
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    group = HV // HQ
    if state is None:
        state = torch.zeros(B, HV, V, K, dtype=torch.float32, device=q.device)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a[:, 0].float() + dt_bias.float()))  # [B, HV]
    beta = torch.sigmoid(b[:, 0].float())  # [B, HV]
    output = torch.empty(B, 1, HV, V, dtype=torch.float32, device=q.device)
    new_state = torch.empty(B, HV, V, K, dtype=torch.float32, device=q.device)
    for i in range(B):
        for h in range(HV):
            qh = q[i, 0, h // group].float()  # [K]
            kh = k[i, 0, h // group].float()  # [K]
            vh = v[i, 0, h].float()  # [V]
            S = g[i, h] * state[i, h].float()  # [V, K]
            u = S @ kh  # [V]
            S = S + torch.outer(beta[i, h] * (vh - u), kh)
            output[i, 0, h] = scale * (S @ qh)
            new_state[i, h] = S
    return output.to(torch.bfloat16), new_state
