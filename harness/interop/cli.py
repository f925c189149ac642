"""The ``python -m harness`` command line (see :mod:`harness.__main__`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import HarnessInputError
from harness.facts import CONTEST_BASELINE_SOLUTION, FLASHINFER_SOLUTION, REFERENCE_SOLUTION
from harness.paths import RESULTS_DIR, SOLUTIONS_DIR
from harness.run_lock import writing_into


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pack = commands.add_parser("pack", help="write a solution as a contest submission: DIR/NAME.json "
                                            "(flashinfer-bench Solution), and with --starter-kit KIT the "
                                            "starter kit's folder KIT/NAME/")
    pack.add_argument("name", metavar="NAME", help="solution folder name (see run_local.py -h)")
    pack.add_argument("--out", required=True, type=Path, metavar="DIR",
                      help="folder the Solution JSON goes into, and nothing else: a dataset's solutions/ "
                           "folder (or one below it) is fine")
    pack.add_argument("--starter-kit", type=Path, metavar="KIT",
                      help="also write the starter kit's folder KIT/NAME/ (config.toml, solution/<language>/); "
                           "KIT must not lie inside DIR")
    pack.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, metavar="DIR",
                      help="folder to find solutions in (default: solutions/)")
    export = commands.add_parser("export-dataset", help="write a workload set as a flashinfer-bench dataset "
                                                        "folder (definitions/, workloads/, blob/)")
    export.add_argument("set", metavar="SET", help="set name (contest-v1, contest-v2, sweep) or a dataset folder")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="empty folder to write into")
    export.add_argument("--no-progress", action="store_true", help="no progress bar while tensors are generated")
    score = commands.add_parser("score", help="predict the contest score of every solution from the runs "
                                              "stored under a results folder")
    score.add_argument("--set", default="contest-v2", choices=("contest-v1", "contest-v2", "sweep"),
                       help="workload set the score is over (default: %(default)s, the contest's)")
    score.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                       help="folder whose runs/ are read (default: results/, the committed evidence; "
                            "results/local holds your own runs)")
    score.add_argument("--rule", default="final", choices=("final", "reference"),
                       help="final (default): the final contest's, mean over workloads of the baseline's µs / "
                            "the solution's, lowest passed µs each, any failed trace scores 0; reference: the "
                            f"starter kit's first, mean of {REFERENCE_SOLUTION} µs / the solution's "
                            "(docs/interop.md)")
    score.add_argument("--baseline", default=None, metavar="NAME",
                       help=f"--rule final only: the baseline's solution label (default: {CONTEST_BASELINE_SOLUTION}, "
                            "the contest's baseline as shipped, judged from baselines/, where the runs hold it; "
                            f"else {FLASHINFER_SOLUTION})")
    score.add_argument("--tier", default=None, help="timing tier (default: contest where the runs hold it, "
                                                    "else their headline tier)")
    return parser


def check_args(parser: argparse.ArgumentParser, args) -> None:
    """Options that parse but do not go together end like any usage error (exit 2)."""
    if args.command == "score" and args.rule == "reference" and args.baseline is not None:
        parser.error(f"--baseline applies to --rule final only (the reference rule divides {REFERENCE_SOLUTION})")


def run_score(args) -> int:
    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition
    from harness.data.workloads import load_workloads
    from harness.paths import WORKLOADS_DIR
    from harness.records.store import load_runs

    if not (args.results / "runs").is_dir():
        raise HarnessInputError(args.results, None, "holds no runs/ folder")
    workloads = {w.uuid: w.batch_size for w in load_workloads(WORKLOADS_DIR / f"{args.set}.jsonl",
                                                                load_definition(OUR_DEFINITION))}
    score = score_final if args.rule == "final" else score_reference
    return score(args, load_runs(args.results), workloads)


def score_final(args, runs, workloads: dict[str, int]) -> int:
    """``score --rule final``: the table, and a note for each GPU without the baseline."""
    from harness.records.score import default_baseline, final_scores, gpus_without, print_final_scores

    baseline = args.baseline or default_baseline(runs, args.set)
    scores = final_scores(runs, args.set, workloads, baseline, args.tier, where=args.results / "runs")
    if not scores:
        raise HarnessInputError(args.results / "runs", None, f"no solution of a {args.set} run compares with "
                                f"{baseline!r}" + (f" in the {args.tier} tier" if args.tier else ""))
    print_final_scores(scores, args.set, baseline)
    for hardware in gpus_without(runs, args.set, baseline):
        print(f"note: no {args.set} run on {hardware} holds {baseline!r}: not scored there")
    return 0


def score_reference(args, runs, workloads: dict[str, int]) -> int:
    """``score --rule reference``: the table of the starter kit's first rule."""
    from harness.records.score import print_reference_scores, reference_scores

    scores = reference_scores(runs, args.set, workloads, args.tier)
    if not scores:
        raise HarnessInputError(args.results / "runs", None, f"no run of {args.set} with a passed solution"
                                + (f" timed by the {args.tier} tier" if args.tier else ""))
    print_reference_scores(scores, args.set)
    return 0


def run_export(args) -> int:
    from harness.interop.export import export_dataset

    out = export_dataset(args.set, args.out, show_progress=not args.no_progress)
    print(f"{out}/: flashinfer-bench dataset of {args.set} (flashinfer_bench.data.TraceSet.from_path reads it; "
          f"run_local.py --workloads {out} runs it)")
    return 0


def run_pack(args) -> int:
    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition
    from harness.interop.pack import pack
    from harness.judge.solutions import discover, load_meta

    folders = discover(args.solutions)
    if args.name not in folders:
        raise HarnessInputError(args.solutions, None, f"no solution {args.name!r}; "
                                f"available: {', '.join(folders)}")  # discover raised if none
    packed = pack(load_meta(folders[args.name]), load_definition(OUR_DEFINITION), args.out, args.starter_kit)
    spec = packed.solution.spec
    print(f"{packed.json_path}: flashinfer-bench Solution {packed.solution.name!r} "
          f"({spec.language.value}, entry {spec.entry_point}, {len(packed.solution.sources)} source files)")
    if packed.kit_dir is not None:
        print(f"{packed.kit_dir}/: starter-kit folder (config.toml, solution/{spec.language.value}/)")
    if packed.stale_kit is not None:
        print(f"warning: {packed.stale_kit}/ is a starter-kit folder an earlier pack left beside the JSON; "
              "remove it before using this folder as a dataset's solutions/ (flashinfer-bench would read "
              "its *.json as Solutions)", file=sys.stderr)
    return 0


COMMANDS = {"pack": run_pack, "export-dataset": run_export, "score": run_score}


def main(argv: list[str]) -> int:
    """Run one command; 0, or 2 with the file or field at fault for bad input."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    try:
        with writing_into([getattr(args, "out", None)]):  # never while a run's vault watches the checkout
            return COMMANDS[args.command](args)
    except HarnessInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an --out or --starter-kit that is a file, or not writable: the path is in the message
        print(f"error: cannot write the output: {exc}", file=sys.stderr)
        return 2
