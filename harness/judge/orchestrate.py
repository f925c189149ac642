"""One benchmark run: every selected solution on every workload of a dataset.

This is the function both command-line shells (run_local.py, run_modal.py)
call. It computes the reference outputs and the copy floor once per workload,
evaluates each solution variant in its own process (:mod:`harness.judge.isolation`),
and appends each trace to ``results/runs/<run id>/traces.jsonl`` the moment it
arrives, so whatever was measured survives a later failure.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch
from tqdm import tqdm

from harness.judge.check import Status
from harness.data.dataset import Dataset, open_dataset
from harness.records.environment import environment, git_commit, hardware_name
from harness.judge.isolation import Job, Timeouts, config_to_json, run_isolated
from harness.data.reference_cache import ReferenceCache
from harness.judge.run import COPY_FLOOR, RunConfig, Variant, copy_floor_trace, evaluate_solution, make_trace, variants_of
from harness.judge.solutions import discover, load_meta
from harness.judge.timing import L2Flusher
from harness.data.workloads import materialize_inputs

REFERENCE_SOLUTION = "pt-reference"


@dataclass
class RunResult:
    """Where a run wrote its files, and its traces."""

    run_dir: Path
    traces: list[dict[str, Any]] = field(default_factory=list)


def select_solutions(algo: str, solutions_root: Path | None = None) -> list[Path]:
    """Folders of the solutions named by ``algo`` (``all`` or a comma list),
    pt-reference first so that speedups can be filled in as traces arrive.

    Raises:
        ValueError: a name that no folder under ``solutions/`` has.
    """
    found = discover(solutions_root) if solutions_root else discover()
    names = list(found) if algo == "all" else [a.strip() for a in algo.split(",") if a.strip()]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f"unknown solution(s) {unknown}; available: {sorted(found)}")
    names.sort(key=lambda n: n != REFERENCE_SOLUTION)
    return [found[n] for n in names]


def run_id(dataset_name: str, device: str) -> str:
    """``<UTC time>_<hardware>_<dataset>``, safe as a folder name."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{hardware_name(device)}_{Path(dataset_name).name}").strip("-")
    return f"{stamp}_{slug}"


def precompute_references(dataset: Dataset, config: RunConfig, cache: ReferenceCache, progress: bool) -> None:
    """Reference outputs of every (workload, trial), once, before any solution."""
    pairs = [(w, t) for w in dataset.workloads for t in range(config.trials)]
    for workload, trial in tqdm(pairs, desc="reference outputs", disable=not progress, leave=False):
        cache.get(dataset, workload, trial, materialize_inputs(workload, dataset.definition, dataset.files,
                                                               config.device, trial))


class TraceAnnotator:
    """Adds the copy-floor multiple and the speedup vs pt-reference, per tier,
    to each trace, from the floor and reference traces of the same run."""

    def __init__(self):
        self.floors: dict[str, dict] = {}
        self.references: dict[str, dict] = {}

    def annotate(self, trace: dict) -> dict:
        uuid = trace["workload"]["uuid"]
        perf = trace["evaluation"].get("performance")
        if trace["solution"] == COPY_FLOOR:
            self.floors[uuid] = perf["tiers"] if perf else {}
        elif trace["solution"] == REFERENCE_SOLUTION and perf:
            self.references[uuid] = perf["tiers"]
        if not perf:
            return trace
        if trace["solution"] == COPY_FLOOR:
            return trace
        for tier, entry in perf["tiers"].items():
            floor = self.floors.get(uuid, {}).get(tier, {})
            ref = self.references.get(uuid, {}).get(tier, {})
            if entry.get("available") and floor.get("available"):
                entry["copy_floor_us"] = floor["value_us"]
                entry["x_copy_floor"] = entry["value_us"] / floor["value_us"]
            if entry.get("available") and ref.get("available"):
                entry["speedup_vs_reference"] = ref["value_us"] / entry["value_us"]
        headline = perf["tiers"].get(perf.get("headline_tier") or "", {})
        if "speedup_vs_reference" in headline:
            perf["reference_latency_ms"] = headline["value_us"] / headline["speedup_vs_reference"] / 1e3
            perf["speedup_factor"] = headline["speedup_vs_reference"]
        return trace


def _floor_traces(dataset: Dataset, config: RunConfig):
    flush = L2Flusher(config.device) if config.device.startswith("cuda") else None
    for workload in dataset.workloads:
        yield copy_floor_trace(dataset, workload, config, flush)
    del flush
    if config.device.startswith("cuda"):
        torch.cuda.empty_cache()


def _variant_traces(variant: Variant, dataset: Dataset, dataset_spec: str, config: RunConfig, scratch: Path,
                    references: ReferenceCache, isolate: bool, timeouts: Timeouts):
    if not isolate:
        flush = L2Flusher(config.device) if config.device.startswith("cuda") else None
        yield from evaluate_solution(variant, dataset, config, references, flush)
        return
    by_uuid = {w.uuid: w for w in dataset.workloads}
    workdir = Path(tempfile.mkdtemp(prefix=f"{variant.meta.name}-", dir=scratch))
    job = Job(str(variant.meta.directory), variant.state_dtype, dataset_spec, list(by_uuid),
              config_to_json(config), str(references.folder), "")
    failure = lambda uuid, status, log: make_trace(dataset, by_uuid[uuid], variant, status, log, config)
    yield from run_isolated(job, workdir, timeouts, failure)


def run_benchmark(algo: str, dataset_spec: str, config: RunConfig, results_dir: Path, isolate: bool = True,
                  timeouts: Timeouts | None = None, progress: bool = True,
                  on_trace: Callable[[dict], None] | None = None, solutions_root: Path | None = None) -> RunResult:
    """Check and time the selected solutions on a dataset; see module doc.

    Raises:
        HarnessInputError: the dataset or a solution.toml is malformed.
        ValueError: unknown solution name.
    """
    dataset = open_dataset(dataset_spec, show_progress=progress)
    variants = [v for path in select_solutions(algo, solutions_root) for v in variants_of(load_meta(path))]
    run_dir = Path(results_dir) / "runs" / run_id(dataset.name, config.device)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({
        "algo": algo, "workloads": dataset_spec, "definition": dataset.definition.name,
        "config": config_to_json(config), "environment": environment(config.device), "git_commit": git_commit(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "solutions": [v.label for v in variants]}, indent=2) + "\n")
    scratch = Path(tempfile.mkdtemp(prefix="gdn-run-"))
    references = ReferenceCache(scratch / "references")
    result = RunResult(run_dir)
    annotator = TraceAnnotator()
    try:
        precompute_references(dataset, config, references, progress)
        streams = [_floor_traces(dataset, config)] + [
            _variant_traces(v, dataset, dataset_spec, config, scratch, references, isolate, timeouts or Timeouts())
            for v in variants]
        total = len(dataset.workloads) * (len(variants) + 1)
        with open(run_dir / "traces.jsonl", "a") as out, tqdm(total=total, desc="evaluating", disable=not progress) as bar:
            for stream in streams:
                for trace in stream:
                    trace = annotator.annotate(trace)
                    out.write(json.dumps(trace) + "\n")
                    out.flush()
                    result.traces.append(trace)
                    bar.set_postfix_str(f"{trace['solution']}: {trace['evaluation']['status']}")
                    bar.update()
                    if on_trace:
                        on_trace(trace)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def statuses(traces: list[dict]) -> dict[str, dict[str, int]]:
    """Count of each status per solution."""
    counts: dict[str, dict[str, int]] = {}
    for t in traces:
        per = counts.setdefault(t["solution"], {})
        per[t["evaluation"]["status"]] = per.get(t["evaluation"]["status"], 0) + 1
    return counts


__all__ = ["run_benchmark", "select_solutions", "RunResult", "Status"]
