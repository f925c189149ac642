"""Tune the launch tables of our own solutions on this GPU, one command for all of them.

Usage (from the repository root, on a GPU machine)::

    python -m tools.tune --algo all                       # fla-recurrent, cuda-v4, cutedsl-bf16
    python -m tools.tune --algo cuda-v4 [--batches 1,2,4,...] [--iters 100] [--rounds 1] [--only REGEX]
        [--dtypes float32,bfloat16] [--defines NAME[=VALUE],...] [--out DIR]

Per solution, state dtype and batch size it checks every configuration of the
solution's search space against the reference and times it (the harness's
CUPTI tier, else CUDA events; the tier is recorded), beside the copy floor
and the baselines, then chooses one config per batch size
(:func:`tools.tune.measure.steady_choice`); with ``--rounds N`` every figure is
the median of N rounds over all configs in turn (the batch size's row records
them). It writes the full report
``<out>/<solution>/<GPU>.json`` (default ``<out>``: a new
``results/tuning/<UTC time>/``) and this GPU's table file in the solution
folder (:func:`tools.tune.table_files.write_table_files`; replacing this GPU's
file if there is one: that is the command's purpose), which the solution
picks at run time on this GPU. (``python -m tools.tune.install REPORT`` writes
the same files later from a report.) With ``--only`` (part of the search space) it
writes no table file, nor with ``--batches`` that leave out one of the table's batch sizes
(:data:`tools.tune.table_files.TABLE_BATCHES`). ``--defines`` builds cuda-v4 with extra preprocessor
macros beside its all-variants one (a candidate build, e.g.
``GDN_V4_CANDIDATE=4``; the report records them): a candidate is compared with
the shipped kernel, never installed, so it writes no table file either, and
another ``--algo`` refuses them. A bad option exits with status 2 and a message; a
solution that cannot run here is skipped with its reason (status 0).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import torch

from harness.facts import STATE_DTYPES
from tools.tune import ADAPTERS
from tools.tune.driver import tune_solution, unavailable_reason
from tools.tune.report import build_report, default_out_dir, format_report, report_path, write_report
from tools.tune import table_files  # TABLE_BATCHES read when the parser is built: tests stand in smaller ones
from tools.tune.table_files import no_table_reason, write_table_files
from tools.tune.measure import KernelTimer

#: A preprocessor macro as nvcc's ``-D`` takes it: NAME or NAME=VALUE, NAME a C identifier (VALUE
#: without blanks or commas: the list is comma-separated and each macro is one ``-D`` argument).
_MACRO = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(=[^\s,]+)?")


def _names(text: str, known, what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)} (choose from {', '.join(known)})")
    if not names:
        raise argparse.ArgumentTypeError(f"no {what} named (choose from {', '.join(known)})")
    return list(dict.fromkeys(names))


def algos(text: str) -> list[str]:
    """``all`` or comma-separated solution names with an adapter."""
    return list(ADAPTERS) if text.strip() == "all" else _names(text, list(ADAPTERS), "solution")


def dtypes(text: str) -> tuple[str, ...]:
    """Comma-separated state dtype names."""
    return tuple(_names(text, STATE_DTYPES, "state dtype"))


def batches(text: str) -> list[int]:
    """Comma-separated positive batch sizes, returned sorted and once each."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one batch size, each >= 1")
    return sorted(set(values))


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def regex(text: str) -> str:
    """A valid regular expression."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    return text


def macros(text: str) -> tuple[str, ...]:
    """Comma-separated preprocessor macros, each NAME or NAME=VALUE (NAME a C identifier), each NAME once."""
    given = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [macro for macro in given if not _MACRO.fullmatch(macro)]
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(map(repr, bad))}: a macro is NAME or NAME=VALUE, "
                                         "NAME a C identifier")
    if not given:
        raise argparse.ArgumentTypeError("no macro named (NAME or NAME=VALUE, comma-separated)")
    names = [macro.split("=")[0] for macro in given]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # nvcc would take the last one: say which was meant
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} defined more than once")
    return tuple(given)


def parser() -> argparse.ArgumentParser:
    """The command line (see the module doc)."""
    p = argparse.ArgumentParser(prog="python -m tools.tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", required=True, type=algos, help=f"all, or some of: {', '.join(ADAPTERS)}")
    p.add_argument("--batches", type=batches, default=list(table_files.TABLE_BATCHES),
                   help="comma-separated batch sizes; a table file is written only when they include every "
                        "default one")
    p.add_argument("--iters", type=positive_int, default=100, help="timed calls per config (median)")
    p.add_argument("--rounds", type=positive_int, default=1,
                   help="time every config this many times, all of them once a round, and keep the median "
                        "(a drift of the machine spreads over every config alike; the tune takes as many "
                        "times as long)")
    p.add_argument("--only", type=regex, default="",
                   help="regular expression: measure only the matching config names (plus the one in use); "
                        "writes no table file")
    p.add_argument("--dtypes", type=dtypes, default=None, help="state dtypes to tune (default: each solution's)")
    p.add_argument("--defines", type=macros, default=(),
                   help="comma-separated preprocessor macros (NAME or NAME=VALUE) for a candidate build of "
                        "cuda-v4, e.g. GDN_V4_CANDIDATE=4; writes no table file")
    p.add_argument("--out", type=Path, default=None, help="folder for <solution>/<GPU>.json (default: a new "
                                                          "results/tuning/<UTC time>/)")
    return p


def check_arguments(cli: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the parser cannot check alone: ``--defines`` only for solutions whose adapter builds
    with them (``takes_defines``: cuda-v4). Calls ``cli.error`` (status 2) otherwise."""
    takers = [name for name, adapter in ADAPTERS.items() if getattr(adapter, "takes_defines", False)]
    refused = [name for name in args.algo if name not in takers]
    if args.defines and refused:
        cli.error(f"--defines: not for {', '.join(refused)} (only {', '.join(takers)} is built with "
                  f"preprocessor macros: --algo {','.join(takers)})")
    if ablations := [macro for macro in args.defines if macro.split("=")[0] == "GDN_V4_ABLATE"]:
        cli.error(f"--defines {','.join(ablations)}: an ablation build computes wrong results by design "
                  "(python -m tools.ablation_probe times it)")


def make_adapter(name: str, defines: tuple[str, ...]):
    """The adapter of ``name``, building with ``defines`` when there are any."""
    return ADAPTERS[name](defines=defines) if defines else ADAPTERS[name]()


def why_no_table(args: argparse.Namespace) -> str | None:
    """Why the tune these arguments ask for writes no table file
    (:func:`tools.tune.table_files.no_table_reason` of them), or None."""
    return no_table_reason(only=args.only, batches=args.batches, defines=args.defines)


def load(adapter) -> str | None:
    """Load the adapter's solution; the reason it cannot be loaded here, or None."""
    try:
        adapter.load()
    except Exception as exc:  # a build or import failure skips this solution, not the others
        return f"cannot be loaded: {type(exc).__name__}: {str(exc)[:500]}"
    return None


def main(argv: list[str] | None = None, *, timer=None, device=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``).

    Args:
        argv: the arguments after ``python -m tools.tune``.
        timer: ``timer(calls) -> µs`` of calls taken in turn; default the harness's :class:`tools.tune.measure.KernelTimer`
            (tests inject a deterministic one).
        device: where to run; default ``cuda`` (tests pass ``cpu``).

    Returns:
        0, or 2 after a message for bad input (an unknown solution, no batch
        sizes, a count below 1, a malformed macro or ``--defines`` for a solution
        other than cuda-v4, no GPU, a report file that exists).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    cli = parser()
    args = cli.parse_args(argv)
    check_arguments(cli, args)
    if device is None:
        if not torch.cuda.is_available():
            cli.error("no CUDA GPU here: the tuner times kernels on a GPU")
        device = "cuda"
    out_dir = args.out or default_out_dir()
    paths = {name: report_path(out_dir, name, device) for name in args.algo}
    existing = [str(path) for path in paths.values() if path.exists()]
    if existing:
        cli.error(f"{', '.join(existing)} exists: a tune never rewrites a file (choose another --out)")
    timer = timer or KernelTimer(device, iters=args.iters)
    command = shlex.join(["python", "-m", "tools.tune", *argv])
    for name in args.algo:
        adapter = make_adapter(name, args.defines)
        wanted = [dtype for dtype in adapter.state_dtypes() if args.dtypes is None or dtype in args.dtypes]
        reason = (None if wanted else f"no state dtype of {', '.join(adapter.state_dtypes())} in --dtypes") \
            or unavailable_reason(adapter) or load(adapter)
        if reason:
            print(f"skipped {name}: {reason}", file=sys.stderr)
            continue
        results = tune_solution(adapter, args.batches, timer, device, args.only, tuple(wanted), args.rounds)
        report = build_report(name, device, command, timer, args.only, results, defines=args.defines)
        print(format_report(report))
        print(f"wrote {write_report(paths[name], report)}")
        why_not = why_no_table(args)
        if why_not:
            print(f"no table file written for {name}: {why_not}")
            continue
        for path in write_table_files(adapter, report, paths[name]):
            print(f"wrote {path}")
    return 0
