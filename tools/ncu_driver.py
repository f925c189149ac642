"""A subject called back to back, for Nsight Compute to profile (issue #33, ``results/cuda-notes.md``):

    ncu --clock-control none --set full -k regex:gdn_decode_v4 -o OUT python -m tools.ncu_driver cuda-v4 1

A subject is an own solution (through its positional DPS entry, on the sweep workload of batch B,
as ``tools/tier_parity.py`` calls it) or ``stream-copy``: the Triton streaming copy of the same
state bytes (the copy floor's kernel, ``harness/judge/stream_copy.py``, its first configuration
for that size). ``--state-dtype bfloat16`` gives either a bf16 state (the bf16-state mode).
No timing here: ``--clock-control none`` leaves the GPU's clocks as they are.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness.facts import STATE_DTYPES

#: The kernel-name filters (``ncu -k regex:...``) of each subject's own kernel.
KERNELS = {"cuda-v4": "gdn_decode_v4", "cuda-v1": "gdn_decode_v1_kernel", "fla-recurrent": "gdn_decode_kernel",
           "stream-copy": "_stream_copy_kernel"}
STREAM_COPY = "stream-copy"


def call_back_to_back(subject: str, batch: int, calls: int, state_dtype: str = "float32") -> None:
    """Make the subject's inputs (its state in ``state_dtype``), then call it ``calls`` times and
    wait for the GPU."""
    import torch

    from tools.tier_parity import COPY, subject_call

    with tempfile.TemporaryDirectory() as workdir:
        if subject == STREAM_COPY:
            from harness.judge.stream_copy import candidate_configs, stream_copy

            _, (state, target) = subject_call(COPY, batch, Path(workdir), state_dtype)
            config = candidate_configs(state.numel() * state.element_size())[0]
            fn, args = (lambda s, t: stream_copy(s, t, config)), (state, target)
        else:
            fn, args = subject_call(subject, batch, Path(workdir), state_dtype)
        torch.cuda.synchronize()
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("subject", help=f"an own solution or {STREAM_COPY}")
    parser.add_argument("batch", type=int, help="batch size (a sweep workload's)")
    parser.add_argument("--calls", type=int, default=13, help="calls (default: %(default)s)")
    parser.add_argument("--state-dtype", choices=STATE_DTYPES, default="float32",
                        help="the state's dtype (default: %(default)s)")
    args = parser.parse_args(argv)
    call_back_to_back(args.subject, args.batch, args.calls, args.state_dtype)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
