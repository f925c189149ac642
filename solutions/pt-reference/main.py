"""pt-reference: the definition's reference ``run``, eagerly, copied into the
destinations. Its latency is the denominator of every speedup (as in the contest).

``reference.py`` is a verbatim copy of the definition's ``reference`` field
(workloads/gdn_decode_qk4_v8_d128_k_last.json), so that this folder runs on
its own; tests/solutions/test_solutions_self_contained.py checks that the two texts are
identical.
"""

from .reference import run as reference_run

#: The definition's inputs, in the order its reference takes them.
_INPUT_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "scale")


def run(inputs):
    """DPS entry point; see docs/solutions.md for the ``inputs`` dict."""
    output, new_state = reference_run(*[inputs.get(name) for name in _INPUT_NAMES])
    inputs["output"].copy_(output)
    inputs["new_state"].copy_(new_state)
    return {"output": inputs["output"], "new_state": inputs["new_state"]}
