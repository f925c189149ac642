"""One run over several GPUs: ``run_local.py --gpus all`` here, or Modal's containers.

A *lane* is one GPU of this host (or one Modal container) running a whole,
isolated judge: ``run_local.py --device cuda:N`` over its share of the
solutions, plus pt-reference, into a results folder of its own. So every lane
measures its own copy floor and reference, and every ratio (× floor, speedup)
is taken on one GPU. The lanes' runs then merge into one run folder through
the writer ``run_local.py`` uses, every trace carrying the device it ran on
(``environment.device``).

* :func:`schedule` spreads the solutions over the lanes, longest expected job
  first onto the least-loaded lane (LPT), with costs from the stored runs
  (:func:`expected_costs`), so the wall time falls with the number of GPUs;
* :func:`merge_lanes` is the one merge, also for Modal (``run_modal.py``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.facts import REFERENCE_SOLUTION
from harness.paths import REPO_ROOT

#: Options of run_local.py that a lane sets itself (the rest pass through unchanged).
LANE_OWNED = {"algo", "device", "results", "gpus", "no_progress", "verbose", "help"}


@dataclass
class LaneRun:
    """What one lane judged: the solutions it was given, and its run folder's contents."""

    names: list[str]
    run_id: str
    meta: dict
    traces: list = field(default_factory=list)  # harness.records.trace.Trace
    floors: list = field(default_factory=list)  # harness.records.trace.FloorMeasurement


def lane_algo(names: list[str], with_reference: bool = True) -> str:
    """What a lane runs: its solutions and (where the solutions folder has it) pt-reference,
    so its speedups are taken on its own GPU."""
    return ",".join(dict.fromkeys([*names, *([REFERENCE_SOLUTION] if with_reference else [])]))


def expected_costs(names: list[str], stored: list, set_name: str) -> dict[str, float]:
    """Seconds each solution is expected to take on ``set_name``: the span of its traces'
    timestamps in the newest stored run of that set that holds it, plus one trace's share
    (``stored``: :func:`harness.records.store.load_runs`). A solution never run costs the
    median of the others (1 s when none is known)."""
    costs = {}
    for run in sorted((r for r in stored if r.meta.get("workloads") == set_name), key=lambda r: r.name):
        for name in names:
            stamps = sorted(datetime.fromisoformat(t.evaluation.timestamp) for t in run.traces if t.solution == name)
            if stamps:
                span = (stamps[-1] - stamps[0]).total_seconds()
                costs[name] = span * len(stamps) / max(len(stamps) - 1, 1) if len(stamps) > 1 else 1.0
    known = sorted(costs.values())
    default = known[len(known) // 2] if known else 1.0
    return {name: costs.get(name, default) for name in names}


def schedule(costs: dict[str, float], lanes: int) -> list[list[str]]:
    """The solutions split over ``lanes`` lanes: the longest expected job first, each onto the
    lane with the least expected work so far (LPT; within 4/3 of the best possible longest lane).
    Lanes left without a job are dropped."""
    loads = [[0.0, []] for _ in range(max(1, lanes))]
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        lane = min(loads, key=lambda load: load[0])
        lane[0] += costs[name]
        lane[1].append(name)
    return [names for _, names in loads if names]


def share_out(names: list[str], costs: dict[str, float], lanes: int, with_reference: bool) -> list[list[str]]:
    """Each lane's own solutions (:func:`schedule`). pt-reference runs on every lane anyway
    (:func:`lane_algo`), so it costs no lane more than another: it is left out of the
    schedule and its rows are kept from the first lane."""
    reference = with_reference and REFERENCE_SOLUTION in names
    shares = schedule({n: costs[n] for n in names if not (reference and n == REFERENCE_SOLUTION)}, lanes)
    if reference:
        shares = [[*shares[0], REFERENCE_SOLUTION], *shares[1:]] if shares else [[REFERENCE_SOLUTION]]
    return shares


def lane_argv(args: argparse.Namespace, parser: argparse.ArgumentParser, names: list[str], device: str,
              results: Path, with_reference: bool = True) -> list[str]:
    """The run_local.py command line of one lane: the user's options, but its own solutions,
    device and results folder (:data:`LANE_OWNED`)."""
    argv = [sys.executable, str(REPO_ROOT / "run_local.py"), "--algo", lane_algo(names, with_reference),
            "--device", device, "--results", str(results), "--no-progress"]
    for action in parser._actions:  # every option the user could have given, as parsed
        if action.dest in LANE_OWNED or not action.option_strings:
            continue
        value = getattr(args, action.dest)
        if action.nargs == 0:  # a flag (store_true): given or not
            argv += [action.option_strings[-1]] if value else []
        elif value is not None and value != action.default:
            argv += [action.option_strings[-1], str(value)]
    return argv


def run_lanes(commands: list[list[str]], logs: list[Path]) -> list[int]:
    """Start every lane's command at once (one process per GPU), wait for all; their exit codes.
    A Ctrl-C reaches them too (same process group): each writes what finished, then exits.
    They run under this process's checkout lock (:data:`harness.run_lock.LOCK_HELD_ENV`, inherited)."""
    procs = []
    for command, log in zip(commands, logs):
        with open(log, "w") as out:
            procs.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT))
    try:
        return [p.wait() for p in procs]
    except KeyboardInterrupt:
        return [p.wait() for p in procs]


def merge_lanes(lanes: list[LaneRun], algo: str, **meta_extra) -> tuple[str, dict, list, list]:
    """One run out of the lanes' runs: (run id, run.json data, traces, floors).

    Each lane's traces are annotated with that lane's own copy floors and
    pt-reference only (:func:`harness.records.annotate.annotate`): no ratio
    divides one GPU's time by another's. The merged run keeps each lane's own
    solutions (pt-reference only where it was one of them) and every lane's
    floors; run.json names the lanes and their headline tiers, and notes when
    those differ (never compare figures across tiers). Traces keep the lanes' order.
    """
    from harness.records.annotate import annotate
    from harness.records.environment import git_commit
    from harness.records.trace import label_solution

    traces, floors = [], []
    for lane in lanes:
        annotated = annotate(lane.traces, lane.floors)
        traces += [t for t in annotated if label_solution(t.solution) in lane.names]
        floors += lane.floors
    names = [n for lane in lanes for n in lane.names]
    headline = {name: sorted({t.evaluation.performance.headline_tier for t in traces
                              if label_solution(t.solution) == name and t.evaluation.performance})
                for name in names}
    meta = dict(lanes[0].meta, algo=algo, git_commit=git_commit() or lanes[0].meta.get("git_commit", ""),
                solutions=list(dict.fromkeys(label for lane in lanes for label in lane.meta.get("solutions", [])
                                             if label_solution(label) in lane.names)),
                lanes=[{"run_id": lane.run_id, "solutions": lane.names,
                        "device": lane.meta.get("config", {}).get("device"),
                        "hardware": lane.meta.get("environment", {}).get("hardware")} for lane in lanes],
                headline_tiers=headline, **meta_extra)
    meta["notes"] = [n for lane in lanes for n in lane.meta.get("notes", [])]
    if len(lanes) > 1 and any("changed files it must not touch" in n for n in meta["notes"]):
        # lanes judge at the same time on one host: a file one solution changes is seen by every lane's guard
        meta["notes"].append("a solution changed protected files while several lanes ran: every lane marks the "
                             "solution it was judging at that moment, so re-run the solutions marked as tampering "
                             "alone (without --gpus) to tell the culprit from the bystanders")
    if len({tier for found in headline.values() for tier in found}) > 1:  # e.g. CUPTI refused on one lane
        meta["notes"].append(f"the lanes' headline tiers differ ({headline}): compare solutions only within one tier")
    # run ids start with the UTC start time: the earliest lane names the run
    return min(lane.run_id for lane in lanes), meta, traces, floors


def fan_out(args: argparse.Namespace, parser: argparse.ArgumentParser, names: list[str], devices: list[str],
            stored: list) -> tuple[Path, list[int]]:
    """Run ``names`` over ``devices`` (one lane each) and merge the lanes into one run folder under
    ``args.results``; returns (that folder, the lanes' exit codes).

    Raises:
        RuntimeError: no lane wrote a run folder (their logs are named).
    """
    from harness.judge.entries import discover_all
    from harness.paths import SOLUTIONS_DIR
    from harness.records.store import RunWriter, load_run

    with_reference = REFERENCE_SOLUTION in discover_all(args.solutions or SOLUTIONS_DIR).found
    lanes = list(zip(devices, share_out(names, expected_costs(names, stored, args.workloads), len(devices),
                                        with_reference)))
    scratch = Path(tempfile.mkdtemp(prefix="gdn-lanes-"))
    roots = [scratch / f"lane{i}" for i in range(len(lanes))]
    logs = [scratch / f"lane{i}.log" for i in range(len(lanes))]
    for (device, share), log in zip(lanes, logs):
        print(f"{device}: {lane_algo(share, with_reference)}; log {log}", flush=True)
    codes = run_lanes([lane_argv(args, parser, share, device, root, with_reference)
                       for (device, share), root in zip(lanes, roots)], logs)
    finished, lost = [], []
    for (device, share), root, log, code in zip(lanes, roots, logs, codes):
        folders = sorted((root / "runs").glob("*")) if (root / "runs").is_dir() else []
        if folders:  # a lane stopped before its first write has none
            stored_run = load_run(folders[-1])
            finished.append(LaneRun(share, stored_run.name, stored_run.meta, stored_run.traces, stored_run.floors))
        if code not in (0, 130):
            lost.append(f"the lane on {device} ({', '.join(share)}) ended with exit status {code}"
                        f"{'' if folders else ' before it wrote a trace: its solutions have no rows'}; "
                        f"its log: {log}")
    if not finished:
        raise RuntimeError(f"no lane wrote a run folder; see {', '.join(map(str, logs))}")
    run_id, meta, traces, floors = merge_lanes(finished, args.algo, gpus=devices)
    meta["notes"] += lost
    writer = RunWriter(Path(args.results) / "runs" / run_id)
    writer.write_run(meta, floors, traces)
    if not any(codes):  # a failed lane's folder and log stay for a look
        shutil.rmtree(scratch, ignore_errors=True)
    return writer.run_dir, codes
