"""The definition's names, read from the definition itself (one source for the tests too)."""

from __future__ import annotations

from functools import lru_cache

from harness.data.dataset import OUR_DEFINITION
from harness.data.definition import load_definition


@lru_cache(maxsize=1)
def tensor_input_names() -> tuple[str, ...]:
    """The definition's tensor inputs, in its order (``q, k, v, state, A_log, a, dt_bias, b``)."""
    return tuple(name for name, spec in load_definition(OUR_DEFINITION).inputs.items() if spec.shape is not None)
