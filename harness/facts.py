"""Facts the whole harness shares, each stated once.

Anything two modules must agree on lives here: names with a meaning to the
judge, the tiers, the tolerances a solution is checked with. A solution never
imports this (solutions are self-contained); the definition's own convention
for the scale (0 or None means ``1/sqrt(K)``) is restated in each solution.
"""

from __future__ import annotations

import math
from enum import StrEnum
from dataclasses import dataclass

#: The definition this project judges (``workloads/<name>.json``).
DEFINITION_NAME = "gdn_decode_qk4_v8_d128_k_last"
#: The definition's reference run eagerly: the speedup denominator of the run summary and of the
#: starter kit's first score rule (``score --rule reference``; the final contest's divides fi-baseline's instead).
REFERENCE_SOLUTION = "pt-reference"
#: FlashInfer's own fp32-state kernel: the "vs FlashInfer" column, and the final contest's score
#: baseline (its ``baseline`` author's solution; docs/interop.md, "The contest's score").
FLASHINFER_SOLUTION = "fi-baseline"
#: FlashInfer's kernel in the form the contest's official baseline shipped it (value-returning, the
#: state updated in place; ``baselines/``): the final-rules score's default baseline where a run holds it.
CONTEST_BASELINE_SOLUTION = "fi-baseline-wrapper"
#: FlashInfer's own kernel per state dtype: what a solution run with that state dtype is compared with.
FLASHINFER_SOLUTIONS = {"float32": FLASHINFER_SOLUTION, "bfloat16": "fi-bf16state"}
#: Label of the copy floor (the physical limit) in tables and CSV files. Not a solution.
COPY_FLOOR = "copy-floor"
#: Names a solution may not take: labels the harness itself writes into its records.
RESERVED_NAMES = frozenset({COPY_FLOOR, "all", "reference", "harness"})
#: Longest solution name: it appears in temporary paths, CSV cells and file names.
MAX_NAME_LENGTH = 64
#: flashinfer-bench's release the contest used (pyproject.toml's ``interop`` extra): packed JSON is
#: validated against its models, and contest entries are read with them.
FIB_VERSION = "0.1.2"

class Tier(StrEnum):
    """A timing tier: how one call's time is read (docs/timing.md). A ``str``: its value is the
    name traces, CSV columns and ``--tiers`` use."""

    CUPTI = "cupti"  # the device time CUPTI recorded for the call's kernels, copies and fills
    CONTEST = "contest"  # the final contest's own timer (FlashInfer's), what a predicted score is read from
    EVENTS = "events"  # a CUDA event pair around the call
    SYNC = "sync"  # the contest's original loop (flashinfer-bench 0.1.2's): a synchronize before each call, events around it
    WALLCLOCK = "wallclock"  # the host's monotonic clock around the call (a CPU run)


class Rules(StrEnum):
    """What a call that modified its inputs gets (``run_local.py --rules``; docs/judging.md).

    ``contest``: accepted and recorded, as the contest accepted it (flashinfer-bench gives every
    trial inputs of its own; FlashInfer's own baseline updates the input state in place); every
    timed call gets fresh inputs anyway, so the change cannot carry over. ``strict``: this
    project's contract, inputs byte-identical after the call, else RUNTIME_ERROR."""

    CONTEST = "contest"
    STRICT = "strict"

    DEFAULT = "contest"  # what a contestant's entry was judged by


#: Timing tiers, in the order of the trace's ``tiers`` table.
TIERS = tuple(Tier)
#: The GPU tiers a run measures unless ``--tiers`` says otherwise (``contest`` needs FlashInfer: opt in).
GPU_TIERS = (Tier.CUPTI, Tier.EVENTS, Tier.SYNC)
#: The final contest's own timer (harness.judge.timing.bench_contest): what a predicted score is read from.
CONTEST_TIER = Tier.CONTEST
#: Tiers whose timer is a contest library's own, called in the solution's process (the worker) on the
#: entry as flashinfer-bench calls it: FlashInfer's CUPTI timer (``contest``) and flashinfer-bench
#: 0.1.2's ``time_runnable`` loop (``sync``). The solution can patch them, so the judge believes their
#: figures only within the timing core's CUPTI figure and the copy floor: asking for one brings
#: ``cupti`` (docs/judging.md).
LIBRARY_TIERS = frozenset({Tier.CONTEST, Tier.SYNC})
#: Preference order for the headline latency of a trace.
HEADLINE_TIERS = (Tier.CUPTI, Tier.EVENTS, Tier.WALLCLOCK, Tier.SYNC)


def default_scale(head_size: int) -> float:
    """The definition's default output scale ``1/sqrt(head_size)`` (its ``scale`` input, when 0 or None)."""
    return 1.0 / math.sqrt(head_size)


@dataclass(frozen=True)
class Tolerance:
    """flashinfer-bench's rule: an element fails when ``|x-y| > atol`` and ``|x-y|/(|y|+1e-8) > rtol``."""

    atol: float = 1e-2
    rtol: float = 1e-2


#: The definition's tolerance for an fp32 state (flashinfer-bench's default, the contest's).
DEFAULT_TOLERANCE = Tolerance(1e-2, 1e-2)
#: Tolerances for a state stored in another dtype, checked against the fp32 reference. Derived in
#: docs/bf16-state-tolerance.md (first-order rounding analysis of a bf16-stored state at the
#: workloads' magnitudes); a solution cannot declare its own.
STATE_DTYPE_TOLERANCES = {"bfloat16": Tolerance(atol=0.75, rtol=0.03125)}
#: State dtypes a solution may declare.
STATE_DTYPES = ("float32", "bfloat16")
