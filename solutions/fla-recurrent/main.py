"""fla-recurrent: our own Triton GDN decode kernel (entry module).

``run(inputs)`` picks a launch config by batch size from ``configs.LAUNCH_TABLE``
and launches ``kernel.gdn_decode_kernel`` once, writing straight into
``inputs["output"]`` and ``inputs["new_state"]``. The hot path creates no
tensor, copies nothing, never synchronizes and never autotunes.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE.parents[1]) not in sys.path:  # configs.py uses tools.tuning
    sys.path.insert(0, str(_HERE.parents[1]))


def _load_sibling(name: str):
    """Import ``<this folder>/<name>.py`` by path.

    The harness loads this file by path and the folder name has a hyphen, so
    the folder is not a package; a unique module name keeps our ``kernel``
    and ``configs`` from clashing with other solutions' files of that name.
    """
    module_name = f"fla_recurrent_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, _HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


kernel = _load_sibling("kernel")
configs = _load_sibling("configs")


def run_with_config(inputs: dict, cfg) -> dict:
    """:func:`run` with an explicit ``configs.LaunchConfig`` (tune.py measures them all)."""
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
    return run_with_config(inputs, configs.pick(inputs["q"].shape[0]))
