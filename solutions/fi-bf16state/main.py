"""fi-bf16state: FlashInfer's bf16-state GDN decode kernel, as a comparison row.

The kernel is FlashInfer's CuTe DSL bf16-state decode
(``flashinfer/gdn_kernels/gdn_decode_bf16_state.py``: ``wide_vec`` T=1 when
``B * HV >= 512``, else its ILP-4 kernel), reached through the public
``gated_delta_rule_decode_pretranspose`` with a bf16 state, ``backend=
"flashinfer"`` (never the manifest-based "cake" backend that ``"auto"`` may
pick for pools) and ``use_qk_l2norm=False``.

That kernel only works on a state *pool* with slot indices. Given a plain
``state`` FlashInfer builds ``torch.arange(B)`` on every call; we pass the
state as the pool ourselves with indices ``0..B-1`` made once per (B, device)
and cached, the same kernel and the same memory traffic minus FlashInfer's
per-call allocation. The state is updated in place (``inplace_state = true``:
the harness's positional entry copies ``state`` into ``new_state`` inside each
timed call, as a submitted entry would, and passes ``new_state`` as both
``state`` and ``new_state``; see fi-baseline's docstring) and ``output`` is
bf16, which the kernel writes directly.

What is timed, per call: one dict lookup for the cached indices,
FlashInfer's Python wrapper and its compiled-kernel cache lookup, and one
kernel launch. The first call per batch size compiles and allocates the
indices; the harness's warm-up absorbs it.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch
from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose

_BACKEND = ({"backend": "flashinfer"}
            if "backend" in inspect.signature(gated_delta_rule_decode_pretranspose).parameters else {})
_slot_indices: dict[tuple[int, torch.device], torch.Tensor] = {}


def resolve_scale(scale: float | None, head_k: int) -> float:
    """The definition's ``0 or None means 1/sqrt(K)``; FlashInfer only maps None."""
    return float(scale) if scale else 1.0 / math.sqrt(head_k)


def slot_indices(batch: int, device: torch.device) -> torch.Tensor:
    """int32 ``[0, 1, ..., batch-1]`` on ``device``, made once and cached."""
    key = (batch, device)
    if key not in _slot_indices:
        _slot_indices[key] = torch.arange(batch, dtype=torch.int32, device=device)
    return _slot_indices[key]


def run(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """One decode step on a bf16 state: updated in place, ``output`` written.

    Raises:
        ValueError: ``state`` is not bf16 or does not alias ``new_state``.
    """
    state, pool = inputs["state"], inputs["new_state"]
    if state is None or state.data_ptr() != pool.data_ptr() or pool.dtype != torch.bfloat16:
        raise ValueError("fi-bf16state needs a bf16 state updated in place (inplace_state = true)")
    q = inputs["q"]
    gated_delta_rule_decode_pretranspose(
        q, inputs["k"], inputs["v"], None, inputs["A_log"], inputs["a"], inputs["dt_bias"], inputs["b"],
        scale=resolve_scale(inputs.get("scale"), q.shape[-1]), output=inputs["output"], use_qk_l2norm=False,
        initial_state=pool, initial_state_indices=slot_indices(q.shape[0], q.device), **_BACKEND)
    return {"output": inputs["output"], "new_state": pool}
