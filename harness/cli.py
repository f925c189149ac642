"""Command-line shell shared by run_local.py (and the local side of run_modal.py)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

# Everything the judge will need is imported now, before any solution runs: a
# module imported later would be read from disk after a solution could edit it.
from harness.errors import HarnessInputError
from harness.facts import GPU_TIERS, TIERS, Tolerance
from harness.judge.isolation import Timeouts
from harness.judge.run import RunConfig, run_benchmark
from harness.judge.timing import TimingConfig
from harness.paths import RESULTS_DIR
from harness.records.leaderboard import write_leaderboard
from harness.records.report import print_table
from harness.records.store import RunWriter


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_tiers(text: str, device: str) -> tuple[str, ...]:
    """``cupti,events,sync`` -> tuple; on the CPU the wall-clock tier is always added.

    Raises:
        argparse.ArgumentTypeError: an unknown tier name.
    """
    tiers = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown tier(s) {unknown}; choose from {TIERS}")
    if not device.startswith("cuda") and "wallclock" not in tiers:
        tiers += ("wallclock",)
    return tiers


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Check and time gdn_decode_qk4_v8_d128_k_last solutions.")
    p.add_argument("--algo", default="all", help="solution name, comma list, or 'all' (default)")
    p.add_argument("--workloads", default="contest-v1",
                   help="set name (contest-v1, contest-v2, sweep) or path to a flashinfer-bench dataset")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.add_argument("--tiers", default=None, help=f"comma list of {TIERS} (default: cupti,events,sync on a GPU, "
                                                 "wallclock on the CPU)")
    p.add_argument("-n", "--trials", type=int, default=3, help="correctness trials with fresh random inputs (3)")
    p.add_argument("--warmup", type=int, default=10, help="warmup calls per tier (10)")
    p.add_argument("--warm-seconds", type=float, default=0.2,
                   help="seconds of back-to-back calls before each GPU tier, so clocks ramp up (0.2)")
    p.add_argument("--iters", type=int, default=100, help="timed calls per tier, cut for slow solutions (100)")
    p.add_argument("--sync-trials", type=int, default=3, help="trials of the sync tier (3, as the contest)")
    p.add_argument("--budget", type=float, default=2.0, help="seconds per tier per workload before cutting iters")
    p.add_argument("--min-iters", type=int, default=5,
                   help="timed calls per tier never cut below this, however slow the solution (5)")
    p.add_argument("--atol", type=float, default=1e-2)
    p.add_argument("--rtol", type=float, default=1e-2)
    p.add_argument("--startup-timeout", type=float, default=600.0, help="seconds for a solution to load/compile")
    p.add_argument("--workload-timeout", type=float, default=300.0, help="seconds per workload")
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (results/)")
    p.add_argument("--solutions", type=Path, default=None, help="folder to discover solutions in (solutions/)")
    p.add_argument("--no-progress", action="store_true")
    return p


def config_from_args(args) -> RunConfig:
    device = args.device or default_device()
    tiers = parse_tiers(args.tiers or (",".join(GPU_TIERS) if device.startswith("cuda") else "wallclock"), device)
    timing = TimingConfig(warmup=args.warmup, iters=args.iters, trials=args.sync_trials, budget_s=args.budget,
                          min_iters=args.min_iters, warm_s=args.warm_seconds)
    return RunConfig(device=device, tiers=tiers, trials=args.trials, tolerance=Tolerance(args.atol, args.rtol),
                     timing=timing)


def run_from_args(args, config: RunConfig):
    """``run_benchmark`` with the options of :func:`build_parser` (shared with run_modal.py)."""
    return run_benchmark(args.algo, args.workloads, config, args.results,
                         timeouts=Timeouts(args.startup_timeout, args.workload_timeout),
                         progress=not args.no_progress, solutions_root=args.solutions)


def main(argv: list[str]) -> int:
    """Run, print the table, write the summary and the leaderboard; return the exit code
    (0, or 2 for bad input, 130 after Ctrl-C: what finished is written first)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    try:
        result = run_from_args(args, config)
    except (HarnessInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    frame = RunWriter(result.run_dir).write_summary(result.traces, result.floors)
    print_table(frame)
    counts = Counter(t.evaluation.status.value for t in result.traces)
    failed = len(result.traces) - counts["PASSED"] - counts["SKIPPED"]
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"traces: {result.run_dir / 'traces.jsonl'}\nsummary: {result.run_dir / 'summary.csv'}\n"
          f"solution x workload: {counts['PASSED']} passed, {failed} failed, {counts['SKIPPED']} skipped")
    if result.interrupted:
        return 130
    print(f"leaderboard: {write_leaderboard(args.results)}")
    return 0
