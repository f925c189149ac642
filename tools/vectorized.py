"""The vectorized fp32 reference, for the tuners and the tests.

Its one home is the pt-compiled solution (``solutions/pt-compiled/vectorized.py``);
this module imports it from there through the harness's own loader
(:func:`harness.judge.solutions.load_solution`, a private copy of the folder
imported as a package), once per process, so there is no second copy of the
math to drift.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import torch

from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR

#: The solution that holds the vectorized math.
HOME = "pt-compiled"
#: The definition's inputs, in the order :func:`gdn_decode` takes them.
INPUT_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "scale")


@functools.cache
def module() -> ModuleType:
    """pt-compiled's ``vectorized`` module (``gdn_decode``, ``gates``, ``delta_rule_step``, ...)."""
    entry = load_solution(load_meta(SOLUTIONS_DIR / HOME))
    return importlib.import_module(".vectorized", entry.__package__)


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output bf16 [B,1,HV,V], new_state f32 [B,HV,V,K])`` of one decode step, fp32 math;
    see ``solutions/pt-compiled/vectorized.py``."""
    return module().gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale)


def reference_outputs(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gdn_decode` of a contract ``inputs`` dict, on its state as fp32
    (a bf16 state is widened first: the fp32-state reference of a bf16 run)."""
    args = dict((name, inputs.get(name)) for name in INPUT_NAMES)
    if args["state"] is not None:
        args["state"] = args["state"].float()
    return gdn_decode(**args)
