"""Command-line shell shared by run_local.py (and the local side of run_modal.py)."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
from collections import Counter
from pathlib import Path

# Everything the judge will need is imported now, before any solution runs: a
# module imported later would be read from disk after a solution could edit it.
from harness import interrupts
from harness.errors import HarnessInputError
from harness.facts import GPU_TIERS, LIBRARY_TIERS, TIERS, Rules, Tier, Tolerance
from harness.judge.core import CoreError
from harness.judge.isolation import Timeouts
from harness.judge.run import RunConfig, run_benchmark
from harness.judge.timing import IDLE_S, STOP_MIN_SAMPLES, TimingConfig
from harness.paths import LOCAL_RESULTS_DIR, RESULTS_DIR
from harness.records.report import print_summary, print_table, solution_summary
from harness.records.store import RunWriter
from harness.run_lock import exclusively


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def checked_device(text: str | None) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``, and only a CUDA device that is there.

    Raises:
        argparse.ArgumentTypeError: another name, or no such CUDA device here.
    """
    if text is None:
        return default_device()
    import torch

    name, _, index = text.partition(":")
    if name not in ("cpu", "cuda") or (index and (name == "cpu" or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"--device {text!r}: choose cpu, cuda or cuda:N")
    if name == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(index or 0) >= count:
            raise argparse.ArgumentTypeError(f"--device {text}: no such CUDA device here (PyTorch sees {count}); "
                                             "use --device cpu")
    return text


def checked_gpus(text: str) -> list[str]:
    """``--gpus``: ``all`` or a comma list of CUDA device indices, as ``cuda:N`` names.

    Raises:
        argparse.ArgumentTypeError: no CUDA GPU here, an index that is not a GPU here, or a repeated one.
    """
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise argparse.ArgumentTypeError(f"--gpus {text}: PyTorch sees no CUDA GPU here")
    if text == "all":
        return [f"cuda:{i}" for i in range(count)]
    parts = text.split(",")
    if not all(p.isdigit() and int(p) < count for p in parts) or len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: 'all' or distinct indices below {count} "
                                         f"(PyTorch sees {count} GPU{'s' if count != 1 else ''}), e.g. 0,1")
    return [f"cuda:{int(p)}" for p in parts]


def _number(kind: type, least: float, strict: bool, most: float):
    """An argparse type: a ``kind`` number ``> least`` (strict) or ``>= least``, and ``<= most`` (a bound
    far past any sensible run, so that the timers and the worker's deadlines never overflow: ``inf``
    or 1e300 seconds used to pass here and crash the run later)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}")
        if value != value or (value <= least if strict else value < least):  # NaN included
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if strict else '>='} {least:g}")
        if value > most:  # inf included
            raise argparse.ArgumentTypeError(f"{text} must be <= {most:g}")
        return value
    return parse


#: The most a count option (trials, calls) or a seconds option may ask for: a million calls, a day.
MOST_CALLS, MOST_SECONDS = 10**6, 86_400.0
COUNT, NON_NEGATIVE_COUNT = _number(int, 1, False, MOST_CALLS), _number(int, 0, False, MOST_CALLS)
POSITIVE, NON_NEGATIVE = _number(float, 0, True, MOST_SECONDS), _number(float, 0, False, MOST_SECONDS)


def checked_folders(args) -> None:
    """``--results`` a folder that can be written (made if missing), ``--solutions`` an existing folder
    or file (a Solution JSON; what it holds is checked when the run selects from it).

    Raises:
        argparse.ArgumentTypeError: naming the option and the path.
    """
    results = args.results
    if results.exists() and not results.is_dir():
        raise argparse.ArgumentTypeError(f"--results {results}: is a file, not a folder")
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"--results {results}: cannot be created ({exc.strerror})")
    if not os.access(results, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"--results {results}: not writable")
    if (results / "runs").exists() and not (results / "runs").is_dir():  # where every run folder goes
        raise argparse.ArgumentTypeError(f"--results {results}: its runs is a file, not a folder")
    if args.solutions is not None and not args.solutions.exists():
        raise argparse.ArgumentTypeError(f"--solutions {args.solutions}: no such folder or file")


def parse_tiers(text: str, device: str) -> tuple[str, ...]:
    """``cupti,events,sync`` -> tuple; on the CPU the wall-clock tier is always added, and
    ``contest`` or ``sync`` brings ``cupti`` with it (their timers run in the solution's process,
    so their figures are bounded by the timing core's CUPTI figure, docs/judging.md).

    Raises:
        argparse.ArgumentTypeError: an unknown tier name.
    """
    tiers = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown tier(s) {', '.join(unknown)}; choose from "
                                         f"{', '.join(tier.value for tier in TIERS)}")
    if not device.startswith("cuda") and Tier.WALLCLOCK not in tiers:
        tiers += (Tier.WALLCLOCK,)
    if LIBRARY_TIERS & set(tiers) and Tier.CUPTI not in tiers:
        tiers = (Tier.CUPTI,) + tiers
    return tiers


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Check every selected solution of gdn_decode_qk4_v8_d128_k_last against the reference and "
                    "time it; write a run folder (traces.jsonl, summary.csv, run.json).",
        epilog=solutions_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", default="all", help="solution name, comma list, or 'all' (default); see below")
    p.add_argument("--workloads", default="contest-v1",
                   help="set name (contest-v1, contest-v2, sweep) or path to a flashinfer-bench dataset folder "
                        "(default: contest-v1)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if PyTorch sees one)")
    p.add_argument("--gpus", default=None,
                   help="'all' or GPU indices (0,1): spread the solutions over these GPUs, one judge per GPU with "
                        "its own copy floor and pt-reference, merged into one run folder (excludes --device)")
    p.add_argument("--tiers", default=None, help=f"comma list of {', '.join(TIERS)} (default: cupti,events,sync on "
                                                 "a GPU, wallclock on the CPU); contest = the final contest's own "
                                                 "timer (FlashInfer's, needs the gpu extra); sync = the contest's original "
                                                 "one (flashinfer-bench 0.1.2's loop, needs the interop extra); "
                                                 "either adds cupti")
    p.add_argument("-n", "--trials", type=COUNT, default=3,
                   help="correctness trials per workload, each with fresh random inputs (default: 3)")
    p.add_argument("--warmup", type=NON_NEGATIVE_COUNT, default=TimingConfig.warmup,
                   help="untimed calls before each tier (default: %(default)s)")
    p.add_argument("--warm-seconds", type=NON_NEGATIVE, default=TimingConfig.warm_s,
                   help=f"seconds of back-to-back calls before a GPU tier after the GPU idled for {IDLE_S:g} s, so "
                        "the clocks ramp up (default: %(default)s)")
    p.add_argument("--keep-warm-seconds", type=NON_NEGATIVE, default=TimingConfig.keep_warm_s,
                   help="the same before a GPU tier that follows busy work, to top the clocks up; 0: one untimed call "
                        "(default: %(default)s)")
    p.add_argument("--iters", type=COUNT, default=TimingConfig.iters,
                   help="most timed calls per tier; the cupti, events and wallclock tiers stop sooner once the "
                        "median is stable (--max-noise), and slow solutions are cut by --budget (default: %(default)s)")
    p.add_argument("--max-noise", type=NON_NEGATIVE, default=TimingConfig.max_noise,
                   help="stop a cupti/events/wallclock tier once the half-width of its median's 95%% confidence "
                        "interval is this fraction of the median (or the interval one timer step wide), checked "
                        f"from {STOP_MIN_SAMPLES} calls on; 0: always --iters (default: %(default)s)")
    p.add_argument("--sync-trials", type=COUNT, default=3, help="trials of the sync tier (default: 3, as the contest)")
    p.add_argument("--budget", type=POSITIVE, default=TimingConfig.budget_s,
                   help="seconds one tier may take on one workload before its timed calls are cut (default: %(default)s)")
    p.add_argument("--min-iters", type=COUNT, default=TimingConfig.min_iters,
                   help="timed calls per tier never cut below this, however slow the solution (default: %(default)s)")
    p.add_argument("--atol", type=NON_NEGATIVE, default=1e-2,
                   help="absolute tolerance of the fp32 check (default: 0.01, flashinfer-bench's)")
    p.add_argument("--rtol", type=NON_NEGATIVE, default=1e-2,
                   help="relative tolerance of the fp32 check (default: 0.01, flashinfer-bench's)")
    p.add_argument("--startup-timeout", type=POSITIVE, default=600.0,
                   help="seconds a solution may take to load and compile (default: 600)")
    p.add_argument("--workload-timeout", type=POSITIVE, default=300.0,
                   help="seconds a solution may take on one workload (default: 300)")
    p.add_argument("--results", type=Path, default=LOCAL_RESULTS_DIR,
                   help="folder the run folder is written under, as RESULTS/runs/<id> (default: results/local, "
                        "ignored by git; the committed evidence is results/runs, written with --results results)")
    p.add_argument("--solutions", type=Path, default=None,
                   help="where the solutions are (default: solutions/): a folder of <name>/solution.toml folders, "
                        "or contest entries as shipped: a flashinfer-bench Solution JSON, a folder of them (a "
                        "dataset's solutions/, any depth), a starter-kit folder (config.toml + solution/<lang>/)")
    p.add_argument("--rules", choices=list(Rules), default=Rules.DEFAULT,
                   help="what a call that modifies its inputs gets: contest (default) accepts it and records it in "
                        "the trace and the summary, as the contest did (the official baseline updates its state in "
                        "place; every call gets fresh inputs either way); strict fails it (RUNTIME_ERROR)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print one row per (solution, workload), as in summary.csv")
    return p


def solutions_epilog() -> str:
    """The solutions ``--algo`` can name, with language and description (for ``-h``)."""
    from harness.judge.solutions import SolutionLoadError, discover, load_meta

    lines = []
    for folder, directory in discover().items():
        try:  # -h works even when a solution folder is broken: it is listed with its problem
            meta = load_meta(directory)
            summary = meta.description if len(meta.description) <= 72 else meta.description[:71] + "…"
            lines.append(f"  {meta.name:<22} {meta.language:<8} {summary}")
        except SolutionLoadError as exc:
            lines.append(f"  {folder:<22} {'?':<8} cannot be loaded: {exc.problem}")
    return "solutions (--algo):\n" + "\n".join(lines)


def config_from_args(args) -> RunConfig:
    """The run's configuration from the parsed options.

    Raises:
        argparse.ArgumentTypeError: a device that is not here, an unknown tier, unusable folders.
    """
    device = checked_device(args.device)
    checked_folders(args)
    tiers = parse_tiers(args.tiers or (",".join(GPU_TIERS) if device.startswith("cuda") else Tier.WALLCLOCK), device)
    timing = TimingConfig(warmup=args.warmup, iters=args.iters, trials=args.sync_trials, budget_s=args.budget,
                          min_iters=args.min_iters, warm_s=args.warm_seconds, keep_warm_s=args.keep_warm_seconds,
                          max_noise=args.max_noise)
    return RunConfig(device=device, tiers=tiers, trials=args.trials, tolerance=Tolerance(args.atol, args.rtol),
                     timing=timing, rules=str(args.rules))


def run_from_args(args, config: RunConfig):
    """``run_benchmark`` with the options of :func:`build_parser` (shared with run_modal.py)."""
    return run_benchmark(args.algo, args.workloads, config, args.results,
                         timeouts=Timeouts(args.startup_timeout, args.workload_timeout),
                         progress=not args.no_progress, solutions_root=args.solutions)


def install_signal_handlers() -> None:
    """For the judge's own process: SIGINT and SIGTERM stop the run the way Ctrl-C does (what
    finished is written, exit 130; :mod:`harness.interrupts`: the first one stops it, later ones
    are ignored); SIGUSR1 prints every thread's stack (``kill -USR1 <pid>``: where is it waiting?)."""
    interrupts.install()
    if hasattr(faulthandler, "register"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def main(argv: list[str]) -> int:
    """Run, print the table, write the run folder (never a tracked file: the leaderboard,
    plots and README table change only through their own commands); return the exit code
    (0, or 2 for bad input, 130 after Ctrl-C: what finished is written first)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
        devices = checked_gpus(args.gpus) if args.gpus else None
        if devices and args.device:
            raise argparse.ArgumentTypeError("--gpus and --device exclude each other: a lane per GPU sets its device")
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    return exclusively(lambda: run_and_report(args, parser, config, devices), results=args.results)


def run_and_report(args, parser, config: RunConfig, devices: list[str] | None) -> int:
    """The run :func:`main` makes once it holds the checkout's lock; its exit code."""
    try:
        if devices:
            return run_on_gpus(args, parser, devices)
        result = run_from_args(args, config)
    except (HarnessInputError, ValueError, CoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the first workload (the solutions' builds, the dataset): nothing to keep
        print("interrupted before any solution was judged: nothing was written", file=sys.stderr)
        return 130
    unwritten = report(args, result.run_dir, result.traces, result.floors, result.notes)
    result.unwritten = result.unwritten or unwritten
    if result.unwritten:
        print(f"error: the run folder could not be written ({result.unwritten}); every solution was judged, and "
              "what the console shows is all that is kept", file=sys.stderr)
        return 1
    return 130 if result.interrupted else 0


def report(args, run_dir: Path, traces: list, floors: list, notes: list[str]) -> str | None:
    """The run's summary.csv and its answer on the console (one row per solution; ``-v``: per workload);
    why summary.csv could not be written, if it could not (the console's answer comes all the same)."""
    try:
        frame, unwritten = RunWriter(run_dir).write_summary(traces, floors), None
    except OSError as exc:
        from harness.records.report import trace_rows

        frame, unwritten = trace_rows(traces, floors), f"{run_dir}: {exc.strerror or exc}"
    if args.verbose:
        print_table(frame)
    print_summary(solution_summary(frame))
    counts = Counter(t.evaluation.status.value for t in traces)
    failed = len(traces) - counts["PASSED"] - counts["SKIPPED"]
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"traces: {run_dir / 'traces.jsonl'}\nsummary: {run_dir / 'summary.csv'}\n"
          f"solution x workload: {counts['PASSED']} passed, {failed} failed, {counts['SKIPPED']} skipped")
    return unwritten


def run_on_gpus(args, parser, devices: list[str]) -> int:
    """``--gpus``: one judge per GPU (harness.fanout), merged into one run folder; the exit code.

    Raises:
        ValueError: unknown solution names.
    """
    from harness.fanout import fan_out
    from harness.judge.run import select_solutions
    from harness.records.store import load_run, load_runs

    names = [folder.name for folder in select_solutions(args.algo, args.solutions)]
    stored = load_runs(args.results)  # the user's runs first; what each solution costs, else the committed runs
    if Path(args.results).resolve() != RESULTS_DIR.resolve():
        stored += load_runs(RESULTS_DIR)
    try:
        run_dir, codes = fan_out(args, parser, names, devices, stored)
    except RuntimeError as exc:  # no lane wrote a run folder: their logs say why
        print(f"error: {exc}", file=sys.stderr)
        return 1
    run = load_run(run_dir)
    report(args, run_dir, run.traces, run.floors, run.meta.get("notes", []))
    # a lane that crashed is the harness's failure, never a solution's (their verdicts are traces)
    return 130 if 130 in codes else (2 if 2 in codes else (1 if any(codes) else 0))
