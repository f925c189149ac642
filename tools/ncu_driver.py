"""A subject called back to back, for Nsight Compute to profile (issue #33, ``results/cuda-notes.md``):

    ncu --clock-control none --set full -k regex:gdn_decode_v4 -o OUT python -m tools.ncu_driver cuda-v4 1

A subject is an own solution (through its positional DPS entry, on the sweep workload of batch B,
as ``tools/tier_parity.py`` calls it) or ``stream-copy``: the Triton streaming copy of the same
state bytes (the copy floor's kernel, ``harness/judge/stream_copy.py``, its first configuration
for that size). ``--state-dtype bfloat16`` gives either a bf16 state (the bf16-state mode).
``--variant NAME`` calls one of cuda-v4's variants by its tuner name (e.g. ``r16/noalloc/l16/w1/p2s``)
from the tuner's all-variants build, on the tuner's inputs, instead of the variant its table picks.
``--build NAME`` calls cuda-v4 built as the ablation probe's build of that name
(``tools.ablation_probe.BUILDS``, e.g. ``copy``), on the probe's inputs, its table's variant.
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


class UnknownVariant(ValueError):
    """A ``--variant`` name that cuda-v4's all-variants build does not compile for the state dtype."""


def variant_call(name: str, batch: int, state_dtype: str):
    """``(fn, ())``: cuda-v4's variant ``name`` (:func:`tools.tune.cuda_v4.config_name`) on the
    tuner's inputs of batch ``batch`` with the state in ``state_dtype``.

    Raises:
        UnknownVariant: a name the all-variants build of that state dtype does not compile.
    """
    import torch

    from tools.tune.cuda_v4 import CudaV4
    from tools.tune.inputs import tune_inputs

    adapter = CudaV4()
    adapter.load()
    configs = adapter.configs(state_dtype)
    if name not in configs:
        raise UnknownVariant(f"cuda-v4 has no variant {name!r} for a {state_dtype} state")
    inputs, _ = tune_inputs(batch, state_dtype, torch.device("cuda"))
    return adapter.call(configs[name], inputs), ()


def build_call(name: str, batch: int, state_dtype: str, workdir: Path):
    """``(fn, ())``: cuda-v4 built as the ablation probe's build ``name`` (in ``workdir``), on the probe's
    inputs of batch ``batch`` with the state in ``state_dtype``."""
    from tools.ablation_probe import build_ablations
    from tools.tier_parity import solution_inputs

    module = build_ablations(workdir, [name])[name]
    _, inputs = solution_inputs(batch, state_dtype)
    return (lambda: module.run(inputs)), ()


def call_back_to_back(subject: str, batch: int, calls: int, state_dtype: str = "float32",
                      variant: str | None = None, build: str | None = None) -> None:
    """Make the subject's inputs (its state in ``state_dtype``), then call it ``calls`` times and
    wait for the GPU. ``variant``: cuda-v4's variant of that name (:func:`variant_call`); ``build``:
    cuda-v4 built as the ablation probe's build of that name (:func:`build_call`)."""
    import torch

    from tools.tier_parity import COPY, subject_call

    with tempfile.TemporaryDirectory() as workdir:
        if variant is not None:
            fn, args = variant_call(variant, batch, state_dtype)
        elif build is not None:
            fn, args = build_call(build, batch, state_dtype, Path(workdir))
        elif subject == STREAM_COPY:
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
    parser.add_argument("--variant", help="cuda-v4 only: this variant (a tuner name) instead of its table's")
    parser.add_argument("--build", help="cuda-v4 only: the ablation probe's build of this name (tools.ablation_probe)")
    args = parser.parse_args(argv)
    if (args.variant is not None or args.build is not None) and args.subject != "cuda-v4":
        parser.error("--variant and --build name a variant or a build of cuda-v4")
    if args.variant is not None and args.build is not None:
        parser.error("--variant or --build, not both")
    if args.build is not None:
        from tools.ablation_probe import BUILDS

        if args.build not in BUILDS:
            parser.error(f"--build: no build named {args.build!r} (known: {', '.join(BUILDS)})")
    import torch

    from tools.tier_parity import NoSweepWorkload

    if not torch.cuda.is_available():
        parser.error("no CUDA GPU here: Nsight Compute profiles the calls on a GPU")
    try:
        call_back_to_back(args.subject, args.batch, args.calls, args.state_dtype, args.variant, args.build)
    except (UnknownVariant, NoSweepWorkload) as exc:  # say so, exit 2
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
