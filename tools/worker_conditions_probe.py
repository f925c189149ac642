"""Which of the judge's worker's conditions moves FlashInfer's CUPTI timers on a kernel?

A probe of the H200's contest lean (issue #29, docs/timing.md):

    python -m tools.worker_conditions_probe --out DIR [--batches 1,64] [--repeats 3]
        [--subjects copy,cuda-v4,fla-recurrent] [--conditions plain,second-context,footprint]

(``--conditions`` also takes ``beside-<GiB>`` and ``pad-<MiB>``, below.)

The harness's contest and cupti tiers read the own kernels about 1% over the same timers in a plain
process at B = 64 on an H200, in both harness rounds of a run that alternated the sides
(results/proof/20261128-H200-parity-order: not the order, not the clocks), while the copy, timed in
the judge's own process before any worker starts, does not. A solution's worker differs from
:mod:`tools.tier_parity`'s plain process in two ways this probe can set apart, each a condition of a
fresh process that times every subject at every batch size with the plain contest and cupti timers
(:func:`tools.tier_parity.plain_figures`, the cross-check's own):

* ``plain``: nothing else, as the cross-check's plain side;
* ``second-context``: another process holds a CUDA context on the same GPU, idle, as the judge does
  while its worker times (:func:`second_context`);
* ``footprint``: the process first holds :data:`FOOTPRINT_BYTES` of GPU memory, about what a worker
  holds before its timed buffers (the timing core's buffer sets and the worker's L2 flush), so the
  timed buffers land elsewhere in its memory;
* ``beside-<GiB>`` (added 2026-11-28, after the run below): another process holds a CUDA context and
  that many GiB of GPU memory, written, as the judge holds its references, floor copies and flushes
  while its worker times. A process's memory is the driver's physical pages; another process holding
  some moves which pages the timed buffers get, which ``footprint`` (the process's own addresses)
  does not;
* ``pad-<MiB>`` (added 2026-11-28): as ``footprint``, that many MiB held first. Several pads read how far
  a kernel's figure moves with where in a process's memory its argument sets land, which a process's
  allocation history decides: the worker's contest tier read cuda-v4 at B = 64 1.3-1.5% higher after
  the events and sync tiers of the smaller workloads than without them
  (results/proof/20261128-H200-tiers-ab).

The conditions (``--conditions``) run in rounds, their order rotated each round, so a drift of the machine
spreads over all of them. Writes ``DIR/worker_conditions_probe.json`` (every round's figures) and prints each
condition's median over the rounds beside ``plain``'s. Needs a CUDA GPU, flashinfer-python,
flashinfer-bench and cupti-python.

Measured on an H200 (0f247d7, results/proof/20261128-H200-worker-conditions; predicted "neither" at
45%): neither condition reproduces the lean. At B = 64 both read the kernels within 0.4% of ``plain``,
the footprint a little faster. Beside 4 or 16 GiB (f844c0d, results/proof/20261128-H200-judge-memory): the
kernels within 0.4% again. Seven pads at B = 64 (c549df3, results/proof/20261128-H200-contest-pads): cuda-v4's
contest figure spans 2.2%, its cupti figure 0.6% -- the lean is where the worker's history leaves its sets
(results/proof/20261128-H200-tiers-ab).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from contextlib import contextmanager, nullcontext

from harness.judge.core import SET_BYTES
from harness.judge.timing import TimingConfig
from harness.judge.timing.gpu_state import MIN_FLUSH_BYTES
from tools.probe_cli import batch_sizes, has_gpu, probe_parser, write_report

CONDITIONS = ("plain", "second-context", "footprint")
#: A condition ``beside-<GiB>``: the second context's process also holds that much GPU memory.
BESIDE = "beside-"
#: A condition ``pad-<MiB>``: the process holds that much GPU memory before its timed buffers.
PAD = "pad-"
#: GPU memory the ``footprint`` condition holds before the timed buffers: the timing core's buffer sets at their
#: most and the least the worker's flush zeroes.
FOOTPRINT_BYTES = SET_BYTES + MIN_FLUSH_BYTES
#: The second context's process: a CUDA context and a tensor of argv[1] bytes (at least one), zeroed so the
#: driver has backed it, held until its stdin closes.
_SECOND_CONTEXT = ("import sys, torch; x = torch.zeros(max(1, int(sys.argv[1])), dtype=torch.uint8, device='cuda'); "
                   "torch.cuda.synchronize(); print('ready', flush=True); sys.stdin.read()")


def parse_conditions(text: str) -> list[str] | None:
    """The conditions of ``--conditions`` in order (each one of :data:`CONDITIONS`, ``beside-<GiB>`` or
    ``pad-<MiB>``, ``plain`` among them, none twice), or None after an error line on stderr."""
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if c not in CONDITIONS and beside_bytes(c) is None and pad_bytes(c) is None]
    if bad or "plain" not in names or len(set(names)) != len(names):
        why = (f"unknown {', '.join(bad)}" if bad else "plain must be among them, once each")
        print(f"error: --conditions {text!r}: {why}; choose from {', '.join(CONDITIONS)}, {BESIDE}<GiB> or "
              f"{PAD}<MiB>", file=sys.stderr)
        return None
    return names


def _amount(condition: str, prefix: str, unit_bytes: int, most: float) -> int | None:
    """``<prefix><number>`` as bytes (the number in units of ``unit_bytes``), or None where ``condition`` is not
    one, or its number is not a positive one under ``most``."""
    if not condition.startswith(prefix):
        return None
    try:
        amount = float(condition[len(prefix):])
    except ValueError:
        return None
    return int(amount * unit_bytes) if 0 < amount < most else None


def beside_bytes(condition: str) -> int | None:
    """Bytes of GPU memory another process holds in ``condition`` (0 for ``second-context``), or None where no
    other process is part of it (or ``beside-<GiB>`` does not name a positive number of GiB under 1,024)."""
    return 0 if condition == "second-context" else _amount(condition, BESIDE, 2**30, 1024)


def pad_bytes(condition: str) -> int | None:
    """Bytes of GPU memory the process holds before its timed buffers in ``condition`` (:data:`FOOTPRINT_BYTES`
    for ``footprint``), or None where it holds none first (or ``pad-<MiB>`` does not name a positive number of MiB
    under 2**20)."""
    return FOOTPRINT_BYTES if condition == "footprint" else _amount(condition, PAD, 2**20, 2**20)


@contextmanager
def second_context(hold_bytes: int = 0):
    """Another process holding a CUDA context on the GPU, idle, and ``hold_bytes`` of GPU memory, for the
    duration of the block.

    Raises:
        RuntimeError: that process ended without saying it holds them (e.g. out of GPU memory).
    """
    holder = subprocess.Popen([sys.executable, "-c", _SECOND_CONTEXT, str(hold_bytes)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()  # blocks until it holds the context, or has ended
        if line.strip() != "ready":
            raise RuntimeError(f"the second context's process did not start (it said {line!r})")
        yield
    finally:
        holder.stdin.close()
        try:
            holder.wait(30)
        except subprocess.TimeoutExpired:
            holder.kill()


def figures_in_condition(condition: str, subjects: list[str], batches: list[int], warm_s: float) -> list[dict]:
    """In this (fresh) process, under ``condition`` (``footprint`` and ``pad-<MiB>`` are set up here, the others by
    the caller), each subject at each batch size timed with the plain contest and cupti timers: rows
    ``{"subject", "batch_size", "contest_us", "contest_trials_us", "cupti_us"}`` (µs)."""
    import torch

    from harness.facts import Tier
    from tools.tier_parity import CONTEST_TRIAL_MEDIANS, plain_figures

    pad = pad_bytes(condition)
    held = torch.empty(pad, dtype=torch.uint8, device="cuda") if pad else None
    rows = []
    for subject in subjects:
        for batch in batches:
            found = plain_figures(subject, batch, warm_s, tiers=(Tier.CONTEST, Tier.CUPTI))
            rows.append({"subject": subject, "batch_size": batch, "contest_us": found[Tier.CONTEST],
                         "contest_trials_us": found[CONTEST_TRIAL_MEDIANS], "cupti_us": found[Tier.CUPTI]})
    del held
    return rows


def measure(conditions: list[str], subjects: list[str], batches: list[int], repeats: int,
            warm_s: float) -> list[dict]:
    """Every condition in every round (its order rotated a place a round), each in a fresh process:
    the rows of :func:`figures_in_condition` with ``round`` and ``condition`` added."""
    from tools.timing_proof import in_fresh_process

    rows = []
    for round_ in range(repeats):
        shift = round_ % len(conditions)
        for condition in conditions[shift:] + conditions[:shift]:
            held = beside_bytes(condition)
            with second_context(held) if held is not None else nullcontext():
                found = in_fresh_process(figures_in_condition, condition, subjects, batches, warm_s)
            rows += [{"round": round_, "condition": condition, **row} for row in found]
            print(f"round {round_ + 1}: {condition} done", flush=True)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per condition (in the order first measured), subject and batch size: the median over the rounds of each
    timer's figure, and its ratio to the ``plain`` condition's median."""
    points = sorted({(r["subject"], r["batch_size"]) for r in rows})
    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    table = []
    for subject, batch in points:
        base = {t: statistics.median(r[t] for r in rows if (r["subject"], r["batch_size"], r["condition"]) ==
                                     (subject, batch, "plain")) for t in ("contest_us", "cupti_us")}
        for condition in conditions:
            mine = [r for r in rows if (r["subject"], r["batch_size"], r["condition"]) == (subject, batch, condition)]
            entry = {"subject": subject, "batch_size": batch, "condition": condition}
            for timer in ("contest_us", "cupti_us"):
                entry[timer] = statistics.median(r[timer] for r in mine)
                entry[timer.replace("_us", "_over_plain")] = entry[timer] / base[timer]
                entry[timer.replace("_us", "_rounds_us")] = [r[timer] for r in mine]
            table.append(entry)
    return table


def print_table(table: list[dict]) -> None:
    print("| subject | B | condition | contest µs | / plain | cupti µs | / plain | contest by round |")
    print("|---|---|---|---|---|---|---|---|")
    for e in table:
        rounds = " ".join(f"{v:.3f}" for v in e["contest_rounds_us"])
        print(f"| {e['subject']} | {e['batch_size']} | {e['condition']} | {e['contest_us']:.3f} | "
              f"{e['contest_over_plain']:.4f} | {e['cupti_us']:.3f} | {e['cupti_over_plain']:.4f} | {rounds} |")


def main(argv: list[str] | None = None) -> int:
    parser = probe_parser(__doc__, "1,64")  # --out, --batches, --repeats (here: rounds over the conditions)
    parser.add_argument("--subjects", default="copy,cuda-v4,fla-recurrent",
                        help="tier_parity's subjects: the copy and own solutions")
    parser.add_argument("--conditions", default=",".join(CONDITIONS),
                        help=f"comma list of {', '.join(CONDITIONS)}, {BESIDE}<GiB> and {PAD}<MiB>, plain among them "
                             "(default: %(default)s)")
    parser.add_argument("--warm-seconds", type=float, default=TimingConfig().warm_s,
                        help="clock warm-up before each plain timer, as tier_parity's (default: %(default)s)")
    args = parser.parse_args(argv)
    batches, conditions = batch_sizes(args.batches), parse_conditions(args.conditions)
    if batches is None or conditions is None or not has_gpu("the worker conditions probe"):
        return 2
    subjects = [s for s in args.subjects.split(",") if s]
    rows = measure(conditions, subjects, batches, max(1, args.repeats), args.warm_seconds)
    table = summary(rows)
    write_report(args.out, "worker_conditions_probe", conditions=conditions, footprint_bytes=FOOTPRINT_BYTES,
                 warm_s=args.warm_seconds, summary=table, rows=rows)
    print_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
