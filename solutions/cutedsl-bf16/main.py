"""cutedsl-bf16: our CuTe DSL GDN decode kernel, fp32 or bf16 state.

The state mode follows the dtype of ``inputs["state"]``:

* float32: the definition itself (fp32 state in, fp32 ``new_state`` out);
* bfloat16: the state is stored in bf16 (in and out), all arithmetic in fp32
  (tolerance derived in docs/bf16-state-tolerance.md).

Device code: :mod:`.gdn_cute_kernel`; compilation and launch configuration:
:mod:`.gdn_cute_build` (siblings in this package, imported relatively).

What ``run`` costs per call (all of it is timed): one dict lookup keyed by
the state dtype and the input shapes, one TVM-FFI call that checks the ten
tensors' shapes, dtypes, devices and alignment in C++ and launches the
kernel on the current torch stream. No host allocation, no synchronization,
no DLPack conversion. The first call for a new (dtype, shape) compiles the
kernel (about a second); the harness's warm-up calls absorb it, or call
:func:`prepare` beforehand.

The kernel writes ``new_state`` out of place (``inplace_state = false``), so
the harness's NaN poisoning of ``new_state`` checks that every element is
written; it is equally correct with ``new_state`` aliasing ``state`` (each CTA
reads its rows before writing them; tools/smoke_cutedsl.py checks both).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from . import gdn_cute_build as build

#: (state dtype, state shape, q shape, v shape, device) -> compiled callable
_launchers: dict[tuple, Callable] = {}
_devices: dict[torch.device, tuple[int, build.Selection]] = {}


def _device(device: torch.device) -> tuple[int, build.Selection]:
    """``(SM count, launch-table selection)`` of a device, queried once."""
    if device not in _devices:
        sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
        _devices[device] = (sms, build.device_selection(device))
    return _devices[device]


def launch_source(device: torch.device, state_dtype: torch.dtype) -> str:
    """``"table <device name>"`` (the GPU's launch table) or ``"default model (<bandwidth> GB/s)"``:
    where ``run``'s configs for this state dtype on ``device`` come from (for the tuned shape)."""
    return _device(torch.device(device))[1].source(state_dtype)


def _launch_key(inputs: dict[str, Any]) -> tuple:
    state = inputs["new_state"]
    return (state.dtype, state.shape, inputs["q"].shape, inputs["v"].shape, state.device)


def kernel_key(inputs: dict[str, Any], config: tuple | None = None) -> build.KernelKey:
    """The compile key for these inputs; ``config`` (a ``build.LaunchConfig``
    or a tuple of its leading fields) overrides the launch table (the device's, else the
    default model)
    (``python -m tools.tune`` measures every valid one).

    Raises:
        ValueError: inconsistent shapes or dtypes, or a shape the design
            cannot serve (e.g. more than 2**31 state elements: 32-bit indexing).
    """
    q, v, state, new_state = inputs["q"], inputs["v"], inputs["state"], inputs["new_state"]
    batch, _, num_q_heads, head_k = q.shape
    num_v_heads, head_v = v.shape[2], v.shape[3]
    if state is not None and state.dtype != new_state.dtype:
        raise ValueError(f"state dtype {state.dtype} differs from new_state dtype {new_state.dtype}")
    if tuple(new_state.shape) != (batch, num_v_heads, head_v, head_k):
        raise ValueError(f"new_state shape {tuple(new_state.shape)} is not [B, HV, V, K]")
    if new_state.numel() >= 2**31:
        raise ValueError("state has 2**31 elements or more; the kernel indexes with 32 bits")
    build.validate_shapes(num_q_heads, num_v_heads, head_k, head_v, new_state.dtype)
    if config is None:
        sms, selection = _device(q.device)
        config = build.choose_config(batch, num_q_heads, num_v_heads, head_k, head_v, new_state.dtype, sms, selection)
    return build.KernelKey(new_state.dtype, num_q_heads, num_v_heads, head_k, head_v, build.LaunchConfig(*config),
                           build.target_arch())


def prepare(inputs: dict[str, Any]) -> Callable:
    """Compile (or fetch) the kernel for these inputs' dtypes and shapes."""
    key = _launch_key(inputs)
    if key not in _launchers:
        _launchers[key] = build.compile_kernel(kernel_key(inputs))
    return _launchers[key]


def launch(compiled: Callable, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Call a compiled kernel on the contract's inputs (see :func:`run`)."""
    new_state, state = inputs["new_state"], inputs["state"]
    if state is None:
        state = new_state.zero_()
    scale = inputs.get("scale")
    if not scale:
        scale = 1.0 / math.sqrt(inputs["q"].shape[-1])
    compiled(inputs["q"], inputs["k"], inputs["v"], state, new_state, inputs["A_log"], inputs["a"],
             inputs["dt_bias"], inputs["b"], inputs["output"], float(scale))
    return {"output": inputs["output"], "new_state": new_state}


def run(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """One GDN decode step into ``inputs["output"]`` and ``inputs["new_state"]``.

    Args:
        inputs: the definition's inputs plus the ``output`` [B,1,HV,V] bf16 and
            ``new_state`` [B,HV,V,K] destinations (state dtype float32 or
            bfloat16; ``new_state`` may be ``state`` itself). ``state`` None
            means a zero state (``new_state`` is zeroed and updated in place).

    Returns:
        ``{"output": output, "new_state": new_state}``.
    """
    compiled = _launchers.get(_launch_key(inputs))
    if compiled is None:
        compiled = prepare(inputs)
    return launch(compiled, inputs)
