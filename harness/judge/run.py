"""One benchmark run: every selected solution on every workload of a dataset.

This is the function both command-line shells (run_local.py, run_modal.py)
call. In order:

1. validate every solution folder, and read and convert every contest entry
   (:mod:`harness.judge.entries`: a flashinfer-bench Solution JSON or a starter-kit
   folder); a malformed one becomes COMPILE_ERROR traces, never the end of the
   run, unless no entry could be read at all (bad input); snapshot its files and
   build the compiled ones, while the tensors of one of our sets are generated on
   first use;
2. snapshot what later workers must not be able to change: the harness's
   sources (read first of all), the dataset's stored tensors (into
   :class:`~harness.judge.references.References`), and fingerprints of the
   files a solution could spoil (:mod:`harness.judge.isolation`);
3. measure the copy floor of every workload (the physical limit);
4. judge each variant in a worker of its own (:mod:`harness.judge.session`);
   after each, verify the fingerprints (a change marks that solution as
   tampering and puts the results folder back) and rewrite the run's files
   from memory, so a later failure, a kill or Ctrl-C loses nothing finished.

Only this process writes under ``results/``.
"""

from __future__ import annotations

import compileall
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from tqdm import tqdm

from harness.data.dataset import Dataset, describe_dataset, make_tensors
from harness.data.workloads import Workload
from harness import interrupts
from harness.errors import HarnessInputError
from harness.facts import DEFAULT_TOLERANCE, REFERENCE_SOLUTION, Rules, Tier, Tolerance
from harness.judge import entries
from harness.judge.build import CompileError
from harness.judge.check import Status
from harness.judge.core import build_core
from harness.judge.floor import measure_floor
from harness.judge.isolation import (GPU_PRELOAD, Timeouts, Zygote, become_subreaper,
                                     protect_memory, read_tree)
from harness.judge.references import References
from harness.judge.vault import FileVault, new_set_aside
from harness.judge.session import RunContext, Variant, VariantJudge
from harness.judge.solutions import SolutionLoadError, SolutionMeta
from harness.judge.timing import L2Flusher, TimingConfig
from harness.paths import REPO_ROOT, RESULTS_DIR, SOLUTIONS_DIR, set_aside_root
from harness.records.annotate import annotate
from harness.records.environment import environment, git_commit, hardware_name, version_drift, without_bytecode
from harness.records.store import RunWriter, stored_references
from harness.records.trace import Environment, FloorMeasurement, Trace

HARNESS_DIR = Path(__file__).resolve().parents[1]


@dataclass
class RunConfig:
    """What a run does: device, tiers, correctness trials, the fp32 tolerance, the timing settings
    and the rules an input modified by a call is judged by (:class:`harness.facts.Rules`)."""

    device: str = "cpu"
    tiers: tuple[str, ...] = (Tier.WALLCLOCK,)
    trials: int = 3
    tolerance: Tolerance = field(default_factory=lambda: DEFAULT_TOLERANCE)
    timing: TimingConfig = field(default_factory=TimingConfig)
    rules: str = Rules.DEFAULT


@dataclass
class RunResult:
    """Where a run wrote its files, what it measured, and what it had to say."""

    run_dir: Path
    traces: list[Trace] = field(default_factory=list)
    floors: list[FloorMeasurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    timeline: list[dict] = field(default_factory=list)  # where the run's time went (run.json's "timeline")
    unwritten: str | None = None  # why the run folder could not be written (the judging went on)


@dataclass
class Candidate:
    """A selected solution (folder or contest entry): its validated variants, or why it cannot run."""

    folder: Path  # the solution folder, or the contest entry (a Solution JSON file, a starter-kit folder)
    variants: list[Variant] = field(default_factory=list)
    failure: tuple[Status, str] | None = None  # COMPILE_ERROR or SKIPPED, with the log
    files: dict[str, bytes] = field(default_factory=dict)
    library: bytes | None = None
    library_file: Path | None = None  # where the build cache holds ``library`` (the next run loads it from there)
    unreadable: SolutionLoadError | None = None  # why a contest entry could not be read


class Selected(NamedTuple):
    """A solution ``--algo`` selected: its name and where it is (folder, Solution JSON or kit)."""

    name: str
    path: Path


def select_solutions(algo: str, solutions_root: Path | None = None, definition: str | None = None,
                     notes: list[str] | None = None) -> list[Selected]:
    """The solutions named by ``algo`` (``all`` or a comma list) under the solutions root (a folder
    of solution folders, or contest entries: :func:`harness.judge.entries.discover_all`),
    pt-reference first. Entries for a definition other than ``definition`` are left out, said in
    ``notes``.

    Raises:
        ValueError: a name that the solutions root does not hold, no name at all, or a missing root.
        HarnessInputError: the root holds nothing to judge, or two solutions of one name.
    """
    root = Path(solutions_root or SOLUTIONS_DIR)
    if not root.exists():
        raise ValueError(f"solutions folder {root} does not exist")
    discovery = entries.discover_all(root, definition)
    found = discovery.found
    names = list(found) if algo == "all" else [a.strip() for a in algo.split(",") if a.strip()]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f"unknown solution(s) {', '.join(unknown)}; available: {', '.join(sorted(found))}")
    if not names:
        raise ValueError(f"--algo {algo!r} names no solution; available: all, {', '.join(sorted(found))}")
    names.sort(key=lambda n: n != REFERENCE_SOLUTION)
    if notes is not None:
        notes += discovery.notes
    return [Selected(n, found[n]) for n in names]


def prepare(selected: Selected, dataset: Dataset, config: RunConfig) -> Candidate:
    """Validate (or read and convert), snapshot and build one solution; failures become the
    candidate's status."""
    candidate = Candidate(selected.path)
    try:
        loaded = entries.load(selected.path, dataset.definition)
    except SolutionLoadError as exc:
        candidate.failure = (Status.COMPILE_ERROR, str(exc))
        candidate.variants = [Variant(_placeholder(selected))]
        candidate.unreadable = exc if entries.is_entry(selected.path) else None
        return candidate
    meta = loaded.meta
    candidate.variants = [Variant(meta, d) for d in sorted(meta.state_dtypes, key=lambda d: d != "float32")]
    candidate.failure = _skip(meta, dataset, config)
    if candidate.failure:
        return candidate
    try:  # the judge calls the solution only through the positional entry (harness/judge/dps.py)
        candidate.files = entries.files_of(loaded, dataset.definition)
    except SolutionLoadError as exc:
        candidate.failure = (Status.COMPILE_ERROR, str(exc))
        return candidate
    try:
        candidate.library_file = entries.build(loaded)
        candidate.library = candidate.library_file.read_bytes() if candidate.library_file else None
    except CompileError as exc:
        candidate.failure = (Status.COMPILE_ERROR, str(exc)[-4000:])
    return candidate


def prepare_all(selected: list[Selected], dataset: Dataset, config: RunConfig) -> list[Candidate]:
    """:func:`prepare` every solution, in order. The builds run side by side (each nvcc is a
    process of its own, and nothing is timed yet), so a run waits for its longest build, not their sum.

    Raises:
        HarnessInputError: every selected solution is a contest entry and none could be read
            (nothing at all can be judged: each one's file and field are named).
    """
    with ThreadPoolExecutor(max_workers=max(1, min(len(selected), os.cpu_count() or 1))) as pool:
        candidates = list(pool.map(lambda one: prepare(one, dataset, config), selected))
    if candidates and all(c.unreadable for c in candidates):
        if len(candidates) == 1:
            raise candidates[0].unreadable
        raise HarnessInputError("--solutions", None, "no contest entry could be read:\n  " +
                                "\n  ".join(str(c.unreadable) for c in candidates))
    return candidates


def _placeholder(selected: Selected):
    """A stand-in meta for a solution that could not be read (its traces carry the name it was found under)."""
    name = selected.name[:64] if re.fullmatch(r"[A-Za-z0-9._-]+", selected.name) else "invalid-name"
    return SolutionMeta(name, selected.path, "", "python", "", "", "", (), False, False, ("float32",))


def _skip(meta, dataset: Dataset, config: RunConfig) -> tuple[Status, str] | None:
    if meta.definition != dataset.definition.name:
        return Status.SKIPPED, f"solution is for definition {meta.definition}, dataset is {dataset.definition.name}"
    if meta.gpu_only and not config.device.startswith("cuda"):
        return Status.SKIPPED, "GPU-only solution and the run is on the CPU"
    missing = meta.missing_packages()
    if missing:
        return Status.SKIPPED, f"missing packages: {', '.join(missing)}"
    return None


def run_id(dataset_name: str, device: str) -> str:
    """``<UTC time>_<hardware>_<dataset>``, safe as a folder name."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{hardware_name(device)}_{Path(dataset_name).name}").strip("-")
    return f"{stamp}_{slug}"


def measure_floors(dataset: Dataset, references: References, config: RunConfig, state_dtypes: set[str],
                   env: Environment, progress: bool, notes: list[str] | None = None) -> list[FloorMeasurement]:
    """Every copy the floor of each workload is the best of (:func:`harness.judge.floor.measure_floor`),
    in every state dtype a variant uses: several measurements per (workload, state dtype).

    A copy's time depends on the bytes it moves, not on their values, so the copies are timed
    once per state shape and dtype (:func:`floor_key`) and serve every workload of that shape,
    each record naming the workload that was copied (``measured_on``): contest-v1's 20
    workloads all have B = 1, and their 40 floors took 19 s of a 4-minute H100 run.

    A floor that cannot be measured (a CUPTI or CUDA error) is said in ``notes`` and left out:
    its workloads get no ``x_copy_floor``, and the solutions are still judged."""
    flush = L2Flusher(config.device) if config.device.startswith("cuda") else (lambda: None)
    pairs = [(w, d) for w in dataset.workloads for d in sorted(state_dtypes)]
    measured: dict[tuple, list[FloorMeasurement]] = {}
    floors = []
    for w, d in tqdm(pairs, desc="copy floor", disable=not progress, leave=False):
        key = floor_key(dataset.definition, w, d)
        if key not in measured:
            try:
                measured[key] = measure_floor(dataset.definition, w, references.stored[w.uuid], d, config.device,
                                              config.tiers, config.timing, flush, env)
            except RuntimeError as exc:  # CUPTI's and CUDA's errors are RuntimeErrors
                measured[key] = []
                if notes is not None:
                    notes.append(f"no copy floor for {d} state of workload {w.uuid} (B = {w.batch_size}) and "
                                 f"those of its shape: {exc}")
            floors += measured[key]
        else:
            floors += [m.model_copy(update={"workload": w.uuid, "batch_size": w.batch_size, "measured_on": m.workload})
                       for m in measured[key]]
    del flush
    if config.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return floors


def floor_key(definition, workload: Workload, state_dtype: str) -> tuple:
    """What a copy floor's time depends on: the state's shape and dtype, and whether the workload
    has a state to copy (else the floor is a fill of ``new_state``)."""
    shape = tuple(definition.shape_of(definition.outputs["new_state"], workload.axes))
    return shape, state_dtype, "state" in workload.inputs


def floors_by_key(floors: list[FloorMeasurement]) -> dict[tuple[str, str], list[FloorMeasurement]]:
    """(workload uuid, state dtype) -> every copy measured for it (the physical limit takes their fastest call)."""
    found: dict[tuple[str, str], list[FloorMeasurement]] = {}
    for floor in floors:
        found.setdefault((floor.workload, floor.state_dtype), []).append(floor)
    return found


def run_vault(dataset: Dataset, candidates: list[Candidate], results_dir: Path) -> FileVault:
    """Everything this run, or the next, reads from disk (see :mod:`harness.judge.vault`): the
    harness (its bytecode compiled first, so the judge's own later imports write none), the
    solutions' folders and their cached builds, the dataset's files, the whole results tree
    and this run's results folder, and the importable entries of the checkout's root. What it takes
    out after a worker goes to a set-aside folder of this run, outside the checkout
    (:func:`harness.paths.set_aside_root`, :func:`harness.judge.vault.new_set_aside`)."""
    compileall.compile_dir(HARNESS_DIR, quiet=1)
    libraries = [c.library_file for c in candidates if c.library_file is not None]
    folders = [c.folder for c in candidates if c.folder.is_dir()]
    single = [c.folder for c in candidates if c.folder.is_file()]  # Solution JSON files
    vault = FileVault(roots=[HARNESS_DIR, RESULTS_DIR, results_dir, *folders],
                      files=[*dataset.read_files(), *libraries, *single], shallow=[REPO_ROOT],
                      set_aside=new_set_aside(set_aside_root()))
    outward = vault.links_out()
    if outward:  # said before anything is judged: what a worker writes behind it would reach the next run
        raise HarnessInputError(outward[0], None, f"a link to the folder {os.path.realpath(outward[0])}, outside what "
                                "a run keeps safe from its solutions (the results tree, the solutions' folders); put "
                                "the folder itself there, or remove the link")
    return vault


def run_benchmark(algo: str, dataset_spec: str, config: RunConfig, results_dir: Path, *,
                  solutions_root: Path | None = None, progress: bool = True, timeouts: Timeouts | None = None,
                  on_trace: Callable[[Trace], None] | None = None) -> RunResult:
    """Check and time the selected solutions on a dataset; see module doc.

    ``on_trace`` gets each variant's traces once they are final (after the
    fingerprint check of its worker), in workload order.

    Returns the run's result; ``interrupted`` is True when Ctrl-C ended it
    (what finished is written). Never raises for a solution's fault.

    Raises:
        HarnessInputError: the dataset is malformed; the solutions root holds nothing to judge, or
            only contest entries none of which can be read.
        ValueError: unknown solution name, or no such solutions folder.
        harness.judge.core.CoreError: the timing core cannot be built here (no C compiler or
            CPython headers).
    """
    become_subreaper()
    protect_memory()
    if config.device.startswith("cuda:"):  # every bare synchronize() (timers, CUPTI's flush) then means this GPU
        torch.cuda.set_device(torch.device(config.device))
    harness_files = read_tree(HARNESS_DIR, "**/*.py")
    clock = Stopwatch()
    dataset = describe_dataset(dataset_spec)
    left_out: list[str] = []
    selected = select_solutions(algo, solutions_root, dataset.definition.name, left_out)
    Zygote.prestart(GPU_PRELOAD if config.device.startswith("cuda") else ())  # imports beside the builds
    results_dir = Path(results_dir)
    run_dir = results_dir / "runs" / run_id(dataset.name, config.device)
    result = RunResult(run_dir, notes=left_out)
    core_library = build_core()  # before anything else is made: without it nothing can be timed
    with ThreadPoolExecutor(max_workers=1) as builder:  # the builds are nvcc processes: the tensors meanwhile
        building = builder.submit(prepare_all, selected, dataset, config)
        make_tensors(dataset, show_progress=progress)
        result.timeline.append(clock.lap("tensors, while the builds run"))
        candidates = building.result()
    result.timeline.append(clock.lap("the rest of the builds"))
    vault = run_vault(dataset, candidates, results_dir)
    references = References(dataset, config.device, notes=result.notes)
    env = Environment(**environment(config.device))
    # read before any worker runs: a solution of this run cannot have touched them
    earlier_references, reference_runs = stored_references(results_dir, env.hardware, dataset.definition.name,
                                                           REFERENCE_SOLUTION, exclude=run_dir)
    result.timeline.append(clock.lap("fingerprints and references"))
    variants = [v for c in candidates for v in c.variants]
    writer = RunWriter(run_dir)
    meta = {"algo": algo, "workloads": dataset_spec, "definition": dataset.definition.name,
            "config": asdict(config), "environment": env.model_dump(), "git_commit": git_commit(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "solutions": [v.label for v in variants], "notes": result.notes,
            "version_drift": version_drift(env.libs),
            "earlier_reference_runs": reference_runs,  # where speedups come from when this run has no reference
            "timeline": result.timeline}
    if meta["version_drift"] and config.device.startswith("cuda"):
        result.notes.append("installed versions differ from pyproject.toml's pinned gpu extra, which the "
                            f"results were measured with: {'; '.join(meta['version_drift'])}")
    uncompiled = without_bytecode(p for v in variants for p in v.meta.packages)
    if uncompiled:
        result.notes.append(f"installed without bytecode: {', '.join(f'{m} ({folder})' for m, folder in uncompiled.items())}; "
                            "every worker that imports them compiles their sources again (workers write no bytecode), "
                            "which only lengthens the run: `python -m compileall -q FOLDER` once shortens it")
    scratch = Path(tempfile.mkdtemp(prefix="gdn-judge-"))
    ctx = RunContext(dataset, config, references, {}, env, harness_files, scratch, core_library,
                     timeouts or Timeouts())
    bar = tqdm(total=len(variants) * len(dataset.workloads), desc="evaluating", disable=not progress)
    try:
        dtypes = {v.state_dtype for c in candidates if not c.failure for v in c.variants}
        result.floors = measure_floors(dataset, references, config, dtypes, env, progress,
                                       result.notes) if dtypes else []
        ctx.floors = floors_by_key(result.floors)
        result.timeline.append(clock.lap("copy floor"))
        save(writer, meta, result, vault, earlier_references)
        def arrived(trace: Trace) -> None:
            bar.update()
            bar.set_postfix_str(f"{trace.solution}: {trace.evaluation.status.value}")

        for candidate in candidates:
            for variant in candidate.variants:
                done = len(result.traces)
                judge = judge_variant(ctx, candidate, variant, vault, result, arrived)
                writing = time.monotonic()
                save(writer, meta, result, vault, earlier_references)
                result.timeline.append(clock.lap(variant.label, load_s=judge.load_seconds,
                                                 workload_s=judge.workload_seconds,
                                                 write_s=round(time.monotonic() - writing, 3)))
                for trace in result.traces[done:] if on_trace else ():  # final: after the fingerprint check
                    on_trace(trace)
    except KeyboardInterrupt:
        result.interrupted = True
        result.notes.append("interrupted (Ctrl-C): the traces hold what finished before it")
    finally:
        try:
            with interrupts.deferred():  # what finished is written whole, whatever signal comes meanwhile
                bar.close()
                save(writer, meta, result, vault, earlier_references)
                shutil.rmtree(scratch, ignore_errors=True)
        except KeyboardInterrupt:  # held while writing: the run was whole, and is written
            result.interrupted = True
            result.notes.append("interrupted (Ctrl-C) while the run was being written: it is written whole")
    result.traces = annotate(result.traces, result.floors, references=earlier_references)
    return result


def judge_variant(ctx: RunContext, candidate: Candidate, variant: Variant, vault: FileVault, result: RunResult,
                  arrived: Callable[[Trace], None]) -> VariantJudge:
    """Add one variant's traces to ``result`` (also those made before a Ctrl-C), then, once its
    worker is gone, put back every file it changed (:class:`FileVault`). Returns the variant's judge."""
    judge = VariantJudge(ctx, variant, candidate.files, candidate.library)
    generator = (judge.all_remaining(ctx.dataset.workloads, *candidate.failure) if candidate.failure
                 else judge.traces())
    traces = []
    try:
        for trace in generator:
            traces.append(trace)
            arrived(trace)
    finally:
        with interrupts.deferred():  # a Ctrl-C here lost the variant's traces and left files half put back
            generator.close()  # kills the worker tree, also on Ctrl-C
            changed = vault.restore()
            sent = interrupts.take_refused()
            if sent:
                result.notes.append(f"{variant.label}'s processes sent the judge {', '.join(f'{n} (pid {p})' for n, p in sent)}: "
                                    "refused, as a solution does not stop the run")
            if changed:
                traces = tampered(judge, ctx, traces, changed)
                aside = f"; what it wrote is kept aside in {vault.set_aside}" if vault.kept_aside else ""
                result.notes.append(f"{variant.label} changed files it must not touch: {', '.join(changed[:10])}; "
                                    "the run kept using the copies it took when it started, and put every one of "
                                    f"them back as it was (files it added taken out){aside}")
            result.traces += traces
    return judge


class Stopwatch:
    """Laps of a run (run.json's ``timeline``: where the time went, for tools/run_timeline.py)."""

    def __init__(self):
        self.last = time.monotonic()

    def lap(self, step: str, **detail) -> dict:
        """``{"step", "seconds"}`` since the previous lap (wall-clock s), with ``detail``."""
        now = time.monotonic()
        seconds, self.last = round(now - self.last, 3), now
        return {"step": step, "seconds": seconds, **detail}


def tampered(judge: VariantJudge, ctx: RunContext, traces: list[Trace], changed: list[str]) -> list[Trace]:
    """Every trace of a variant that changed protected files becomes RUNTIME_ERROR naming them."""
    log = ("tampering: the solution process changed files outside its own private folder: "
           + ", ".join(changed[:20]))
    by_uuid = {t.workload.uuid for t in traces}
    return [judge.trace(w, Status.RUNTIME_ERROR, log) for w in ctx.dataset.workloads if w.uuid in by_uuid]


def save(writer: RunWriter, meta: dict, result: RunResult, vault: FileVault,
         earlier_references: list[Trace] = ()) -> None:
    """Rewrite the run's files from memory (annotation in one pure pass, with the reference
    timings of earlier runs on this GPU where this run has none), then let the vault keep them. Where the
    folder cannot be written (a full disk, a file system gone read-only) the run goes on judging and says
    so in ``result.unwritten``; the next save tries again (the traces stay in memory)."""
    try:
        written = writer.write_run(meta, result.floors,
                                   annotate(result.traces, result.floors, references=earlier_references))
    except OSError as exc:
        result.unwritten = f"{writer.run_dir}: {exc.strerror or exc}"
        return
    result.unwritten = None
    for path in written:
        vault.remember(path)
