"""FlashInfer's GDN decode in the form the contest's official baseline shipped it
(``flashinfer_wrapper_9b7f1e``: a value-returning Python entry, ``main.py::run``), written here for
this harness: ``run(q, k, v, state, A_log, a, dt_bias, b, scale) -> (output, new_state)``.

FlashInfer's ``gated_delta_rule_decode_pretranspose`` allocates ``output`` and updates ``state``
in place, and the pair it returns is ``(output, state)``. Under the contest's rules (inputs fresh
for every trial) that is accepted; the harness records the change (``--rules contest``).
``use_qk_l2norm=False``: the definition normalizes nothing. No ``backend`` is named: FlashInfer
picks its kernel as it did for the contest's baseline (our ``fi-baseline`` names it)."""

import math

from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    if not scale:  # the definition's 0 (or None) means 1/sqrt(K); FlashInfer maps only None
        scale = 1.0 / math.sqrt(q.shape[-1])
    output, new_state = gated_delta_rule_decode_pretranspose(
        q, k, v, state, A_log, a, dt_bias, b, scale=float(scale), use_qk_l2norm=False)
    return output, new_state
