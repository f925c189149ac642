"""fla-recurrent: our own Triton GDN decode kernel (entry module).

``run(inputs)`` picks a launch config by batch size from the current GPU's
launch table (``launch_tables/``, or the default model on a GPU without one:
:mod:`.configs`) and launches ``kernel.gdn_decode_kernel`` once, writing straight into
``inputs["output"]`` and ``inputs["new_state"]``. The hot path creates no
tensor, copies nothing, never synchronizes and never autotunes.
"""

from __future__ import annotations

import math

from . import configs, kernel


def run_with_config(inputs: dict, cfg) -> dict:
    """:func:`run` with an explicit ``configs.LaunchConfig`` (``python -m tools.tune`` measures them all)."""
    q = inputs["q"]
    scale = inputs.get("scale")
    # Host-side float math only: the kernel always gets a resolved scale.
    scale = float(scale) if scale else 1.0 / math.sqrt(q.shape[-1])
    output, new_state = inputs["output"], inputs["new_state"]
    kernel.launch(
        q, inputs["k"], inputs["v"], inputs["state"],
        inputs["A_log"], inputs["a"], inputs["dt_bias"], inputs["b"],
        scale, output, new_state, cfg,
    )
    return {"output": output, "new_state": new_state}


def run(inputs: dict) -> dict:
    """One GDN decode step in destination passing style.

    Args:
        inputs: the definition's inputs (q, k, v [B,1,H*,128] bf16; state
            [B,8,128,128] f32 k-last; A_log, dt_bias [8] f32; a, b [B,1,8]
            bf16; scale float, 0/None meaning 1/sqrt(128)) plus the
            destinations ``output`` [B,1,8,128] bf16 and ``new_state``
            [B,8,128,128] f32.

    Returns:
        ``{"output": output, "new_state": new_state}`` (the same tensors).
    """
    q = inputs["q"]
    return run_with_config(inputs, configs.pick(q.shape[0], q.device))
