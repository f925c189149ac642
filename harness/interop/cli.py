"""The ``python -m harness`` command line (see :mod:`harness.__main__`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import HarnessInputError
from harness.paths import RESULTS_DIR, SOLUTIONS_DIR


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
    score.add_argument("--tier", default=None, help="timing tier (default: the runs' headline tier)")
    return parser


def run_score(args) -> int:
    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition
    from harness.data.workloads import load_workloads
    from harness.paths import WORKLOADS_DIR
    from harness.records.score import contest_scores, print_scores
    from harness.records.store import load_runs

    if not (args.results / "runs").is_dir():
        raise HarnessInputError(args.results, None, "holds no runs/ folder")
    workloads = {w.uuid: w.batch_size for w in load_workloads(WORKLOADS_DIR / f"{args.set}.jsonl",
                                                                load_definition(OUR_DEFINITION))}
    scores = contest_scores(load_runs(args.results), args.set, workloads, args.tier)
    if not scores:
        raise HarnessInputError(args.results / "runs", None, f"no run of {args.set} with a passed solution"
                                + (f" timed by the {args.tier} tier" if args.tier else ""))
    print_scores(scores, args.set)
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
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HarnessInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
