"""Check and time GDN decode solutions on Modal GPUs, one container per solution.

    pip install 'gdn-decode-bench[modal]' && modal token new     # once
    modal run run_modal.py --algo all --workloads contest-v2
    modal run run_modal.py --algo cuda-v4,fla-recurrent --workloads sweep --tiers cupti,events --gpu H100
    modal run run_modal.py --algo pt-reference --options="-n 1 --iters 50"
    modal run run_modal.py --algo all --workloads /path/to/flashinfer-trace   # uploaded to the Volume
    modal run run_modal.py --tune --algo cuda-v4 --gpu H100 --options="--rounds 3"

``--options`` passes any other run_local.py option through. Each container
runs the same :func:`harness.judge.run.run_benchmark` as run_local.py, with
the RunConfig built by the same :mod:`harness.cli` functions, and returns its
traces and floors; this machine merges them into ``results/runs/<run id>/``
(run.json, traces.jsonl, floors.jsonl, summary.csv, written by
:class:`harness.records.store.RunWriter` as for run_local.py) and rebuilds
``results/leaderboard.csv``.

The image: an NVIDIA CUDA *devel* image (nvcc and headers for the CUDA
solutions), plus the project's dependencies and the ``gpu`` extra of
pyproject.toml, which pins every version the GPU results were measured with
(torch from PyTorch's CUDA 13 index). pyproject.toml is read when the image is
defined, so it stays the one list. The module imports without ``modal``
installed: the app is only defined when it is.

The Volume (:mod:`harness.volume`): before the GPU containers start, one
CPU container (``prepare``) opens the dataset, generating its tensors, and
compiles the CUDA solutions into the project's cache root on the Volume
``gdn-decode-bench-cache``, keyed as on a local machine, and commits it; the
GPU containers mount it read-only, since solutions run there. A local
``--workloads PATH`` (and ``--options "--solutions DIR"``) is uploaded to the
Volume under the hash of its files and the containers are given that folder.

``--tune`` runs the launch-table tuner (``python -m tools.tune``, ``--options``
then being its options) in one container of the judging function's settings
(image, GPU type, read-only Volume: the tuner runs solution code), which returns
the files the tune wrote (:mod:`tools.tune.remote`); this machine checks their
paths and writes them into a new ``results/tuning/<UTC time>-modal-<gpu>/``, and
puts the launch-table files into the solution folders only with
``--install-tables``.

Like run_local.py, a run writes only its own run folder, under
``results/local/`` by default (ignored by git); the leaderboard changes only
through ``python -m harness.records.leaderboard``.
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import NamedTuple

from harness.volume import (READ_ONLY_MOUNT, UPLOADS_SUBDIR, VOLUME_NAME, WRITABLE_MOUNT, Upload, cache_env,
                            container_args, dataset_upload, solutions_upload, use_container_cache, verify_upload)

try:
    import modal
except ImportError:  # the harness and the tests work without Modal
    modal = None

REPO_ROOT = Path(__file__).resolve().parent
APP_NAME = "gdn-decode-bench"
#: CUDA 13 toolkit (sm_100a for B200, sm_90a for H100), matching the CUDA 13 torch wheels.
CUDA_IMAGE = "nvidia/cuda:13.0.2-devel-ubuntu24.04"
PYTHON_VERSION = "3.11"
#: The pyproject extra the image installs: the pinned versions of every GPU dependency.
IMAGE_EXTRA = "gpu"
#: Where pip finds torch's CUDA 13 wheels.
TORCH_INDEX = "https://download.pytorch.org/whl/cu130"
DEFAULT_GPU = "B200"  # the contest's GPU
DEFAULT_WORKLOADS = "contest-v1"  # what a judged run reads unless --workloads says otherwise
TIMEOUT_S = 3 * 3600  # one solution on one set, compilation included
#: CPU cores of the prepare container: nvcc compiles a solution's targets in parallel.
PREPARE_CPUS = 8.0
PREPARE_TIMEOUT_S = 3600  # tensors of a set and every CUDA build, the first time
SETUP_HINT = "pip install 'gdn-decode-bench[modal]' && modal token new"


def image_packages(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """pyproject's ``[project.dependencies]``, then its :data:`IMAGE_EXTRA` extra, one
    requirement per distribution: a pin of the extra replaces the project's looser
    requirement of the same distribution (``torch>=2.6`` becomes ``torch==2.11.0``)."""
    from harness.records.environment import requirement_name

    project = tomllib.loads(Path(pyproject).read_text())["project"]
    pins = project["optional-dependencies"][IMAGE_EXTRA]
    pinned = {requirement_name(r) for r in pins}
    return [r for r in project["dependencies"] if requirement_name(r) not in pinned] + pins


# ------------------------------------------------------------ remote side


def harness_argv(algo: str, workloads: str, tiers: str = "", options: str = "") -> list[str]:
    """The run_local.py command line these arguments stand for."""
    return ["--algo", algo, "--workloads", workloads, *(["--tiers", tiers] if tiers else []), *shlex.split(options)]


def options_overriding(args, algo: str, workloads: str, tiers: str) -> list[str]:
    """The run_local.py options that ``--options`` set where run_modal.py has its own argument or the container
    decides (``args``: the parsed :func:`harness_argv`, in which the last value wins, so ``--options "--algo x"``
    would judge x after the local checks had passed ``algo``)."""
    from harness.cli import build_parser

    default_results = build_parser().get_default("results")
    return [flag for flag, differs in (("--algo", args.algo != algo), ("--workloads", args.workloads != workloads),
                                       ("--tiers", (args.tiers or "") != tiers),
                                       ("--results", args.results != default_results), ("--gpus", args.gpus is not None))
            if differs]


def evaluate_remote(algo: str, workloads: str, tiers: str = "", options: str = "",
                    results_dir: Path | None = None) -> dict:
    """Body of the Modal function, a plain function so that it also runs in
    process: one ``run_benchmark`` exactly as run_local.py would run it.

    Returns plain JSON data read back from the run folder it wrote (by
    :func:`harness.records.store.load_run`): ``{"run_id", "run" (run.json's
    data), "traces" (Trace dicts), "floors" (FloorMeasurement dicts)}``.
    """
    from harness.cli import build_parser, config_from_args, run_from_args
    from harness.records.store import load_run

    results = Path(results_dir) if results_dir else Path(tempfile.mkdtemp(prefix="gdn-results-"))
    args = build_parser().parse_args(harness_argv(algo, workloads, tiers, options) + ["--results", str(results)])
    stored = load_run(run_from_args(args, config_from_args(args)).run_dir)
    return {"run_id": stored.name, "run": stored.meta,
            "traces": [t.model_dump(mode="json") for t in stored.traces],
            "floors": [f.model_dump(mode="json") for f in stored.floors]}


def evaluate_in_container(algo: str, workloads: str, tiers: str = "", options: str = "",
                          mount: str | Path = READ_ONLY_MOUNT, local_cache: Path | None = None) -> dict:
    """Body of the Modal judging function: the read-only Volume at ``mount`` seen through a
    container-local cache root (``local_cache``, a new temporary folder if None) of links
    (:func:`harness.volume.use_container_cache`), so what a solution or a cache miss writes stays in the
    container; then :func:`evaluate_remote`. Returns what it returns."""
    use_container_cache(mount, local_cache)
    return evaluate_remote(algo, workloads, tiers, options)


def tune_container(argv: list[str], mount: str | Path = READ_ONLY_MOUNT, local_cache: Path | None = None) -> dict:
    """Body of the Modal tuning function: the read-only Volume's cache seen as in
    :func:`evaluate_in_container` (the tuner loads and builds solutions: their code runs
    here), then :func:`tools.tune.remote.tune_in_container` on this GPU. Returns what it returns."""
    from tools.tune.remote import tune_in_container

    use_container_cache(mount, local_cache)
    return tune_in_container(argv)


def prepare_cache(algo: str, workloads: str, options: str = "", mount: str | Path = WRITABLE_MOUNT) -> list[str]:
    """Body of the Modal prepare function (no solution code runs in it): point the project's
    cache root into the writable Volume at ``mount``, check the uploads the arguments name,
    open the dataset (generating a named set's tensors) and build every selected compiled
    solution as the judge would (:func:`harness.judge.entries.build`, same key).
    The caller commits the Volume. Returns notes (one line per build that failed: its
    container reports it).

    Raises:
        ValueError: an upload that does not match its key; HarnessInputError: a malformed dataset.
    """
    from harness.cli import build_parser
    from harness.data.dataset import open_dataset
    from harness.errors import HarnessInputError
    from harness.judge import entries, solutions
    from harness.judge.build import CompileError
    from harness.judge.run import select_solutions

    os.environ.update(cache_env(mount))
    args = build_parser().parse_args(harness_argv(algo, workloads, "", options))
    root = Path(mount).resolve()
    for path in (Path(args.workloads).resolve(), args.solutions and args.solutions.resolve()):
        if path and path.is_relative_to(root / UPLOADS_SUBDIR):  # what this machine was given, not the image
            verify_upload(mount, path.relative_to(root).as_posix())
    dataset = open_dataset(args.workloads, show_progress=False)
    notes = []
    for selected in select_solutions(algo, args.solutions, dataset.definition.name):
        try:
            loaded = entries.load(selected.path, dataset.definition)
            if loaded.files is None:  # a solution folder, built as the judge builds it (same key)
                solutions.build_library(loaded.meta)
            else:
                entries.build(loaded)
        except (CompileError, HarnessInputError) as exc:  # its container's verdict, not the run's end
            notes.append(f"{selected.name}: not built ahead ({type(exc).__name__}: {str(exc)[-300:]})")
    return notes


# ------------------------------------------------------------- local side


def container_algo(name: str, with_reference: bool = True) -> str:
    """What the container judging solution ``name`` runs (:func:`harness.fanout.lane_algo`):
    the solution and pt-reference (where the solutions folder has it), so that every ratio
    is taken on its own GPU."""
    from harness.fanout import lane_algo

    return lane_algo([name], with_reference)


def merge_results(results: list[dict], names: list[str], algo: str, gpu: str,
                  workloads: str | None = None) -> tuple[str, dict, list, list]:
    """One run out of the containers' runs: (run id, run.json data, traces, floors), by the
    merge ``run_local.py --gpus`` uses (:func:`harness.fanout.merge_lanes`): ``results[i]`` is
    the container that judged ``names[i]``; each container is a lane, annotated with its own
    copy floors and pt-reference only. ``workloads``: the dataset as the user named it, where
    the containers read an uploaded copy (run.json keeps both)."""
    from harness.fanout import LaneRun, merge_lanes
    from harness.records.trace import FloorMeasurement, Trace

    lanes = [LaneRun([name], r["run_id"], r["run"], [Trace.model_validate(t) for t in r["traces"]],
                     [FloorMeasurement.model_validate(f) for f in r.get("floors", [])])
             for name, r in zip(names, results)]
    modal_meta = {"gpu": gpu, "container_runs": [r["run_id"] for r in results]}
    if workloads is None or workloads == lanes[0].meta.get("workloads"):
        return merge_lanes(lanes, algo, modal=modal_meta)
    modal_meta["workloads_uploaded_as"] = lanes[0].meta.get("workloads")
    return merge_lanes(lanes, algo, modal=modal_meta, workloads=workloads)


def write_run_files(results_dir: Path, run_id: str, run: dict, traces: list, floors: list):
    """``<results_dir>/runs/<run_id>/`` (run.json, traces.jsonl, floors.jsonl,
    summary.csv) by :class:`harness.records.store.RunWriter`, as run_local.py
    writes them. Returns (run folder, summary frame)."""
    from harness.records.store import RunWriter
    from harness.run_lock import writing_into

    writer = RunWriter(Path(results_dir) / "runs" / run_id)
    with writing_into([writer.run_dir]):  # never while a run's vault watches the checkout (harness/run_lock.py)
        writer.write_run(run, floors, traces)
        return writer.run_dir, writer.write_summary(traces, floors)


def collect(outputs: list, names: list[str], algo: str, gpu: str, results_dir: Path,
            workloads: str | None = None) -> Path | None:
    """Write the containers' results (exceptions reported, one line each) and
    print the table (``workloads``: see :func:`merge_results`). None if no container returned."""
    from harness.records.report import print_table

    results, judged = [], []
    for name, output in zip(names, outputs):
        if isinstance(output, BaseException):
            print(f"error: {name}: the container failed: {type(output).__name__}: {output}", file=sys.stderr)
        else:
            results.append(output)
            judged.append(name)
    if not results:
        return None
    run_id, run, traces, floors = merge_results(results, judged, algo, gpu, workloads)
    run_dir, frame = write_run_files(results_dir, run_id, run, traces, floors)
    print_table(frame)
    for note in run.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    print(f"traces: {run_dir / 'traces.jsonl'}\nsummary: {run_dir / 'summary.csv'}")
    return run_dir


def upload(volume, uploads: list[Upload]) -> None:
    """Put each upload's files into ``volume`` (a ``modal.Volume``) under its key, unless a
    folder of that key is there already (same key, same files: the prepare container checks)."""
    for item in uploads:
        if already_uploaded(volume, item.volume_path):
            print(f"{item.kind}: already in the Volume as /{item.volume_path}")
            continue
        print(f"{item.kind}: uploading {len(item.files)} file(s) to the Volume as /{item.volume_path}")
        with volume.batch_upload(force=True) as batch:
            for name, content in item.files.items():
                batch.put_file(io.BytesIO(content) if isinstance(content, bytes) else content,
                               f"/{item.volume_path}/{name}")


def already_uploaded(volume, path: str) -> bool:
    """Whether ``volume`` holds anything under ``path``."""
    missing = (FileNotFoundError,) + ((modal.exception.NotFoundError,) if modal is not None else ())
    try:
        return bool(volume.listdir(path))
    except missing:
        return False


def run_on_modal(evaluate, algo: str, workloads: str, tiers: str, gpu: str, options: str,
                 results_dir: Path, prepare=None, volume=None) -> int:
    """Check the arguments here (before paying for GPUs), upload a local dataset or solutions
    folder to ``volume``, fill the Volume's cache (``prepare``, one CPU container), then one
    judging container per solution in parallel; returns the exit code (2: bad input)."""
    from harness.cli import build_parser, parse_tiers
    from harness.facts import REFERENCE_SOLUTION
    from harness.fanout import lane_algo
    from harness.judge.entries import discover_all
    from harness.judge.run import select_solutions
    from harness.paths import SOLUTIONS_DIR

    try:
        argv = harness_argv(algo, workloads, tiers, options)
    except ValueError as exc:  # shlex: an unbalanced quote
        print(f"error: --options {options!r}: {exc}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)  # exits on a bad option
    overridden = options_overriding(args, algo, workloads, tiers)
    if overridden:
        print(f"error: --options sets {', '.join(overridden)}: give them as run_modal.py's own arguments (a "
              "container's --results is its own, and it judges on its one GPU: no --gpus)", file=sys.stderr)
        return 2
    try:
        if tiers:
            parse_tiers(tiers, "cuda")
        selected = select_solutions(algo, args.solutions)
        dataset = dataset_upload(workloads)
        reference = discover_all(args.solutions or SOLUTIONS_DIR).found.get(REFERENCE_SOLUTION)
        paths = [one.path for one in selected]
        solutions = (solutions_upload(list(dict.fromkeys(paths + ([reference] if reference else []))))
                     if args.solutions else None)
    except (argparse.ArgumentTypeError, ValueError) as exc:  # a message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = [one.name for one in selected]
    uploads = [u for u in (dataset, solutions) if u is not None]
    if uploads and volume is None:
        print("error: a local --workloads or --solutions folder needs the Volume to travel", file=sys.stderr)
        return 2
    upload(volume, uploads)
    if prepare is not None:
        try:
            notes = prepare.remote(lane_algo(names, reference is not None),
                                   *container_args(workloads, options, dataset, solutions, WRITABLE_MOUNT))
        except Exception as exc:  # its message names the upload or file at fault
            print(f"error: preparing the Volume failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    function = evaluate if gpu == DEFAULT_GPU else evaluate.with_options(gpu=gpu)
    print(f"{len(names)} container(s) on {gpu}: {', '.join(names)}")
    remote_workloads, remote_options = container_args(workloads, options, dataset, solutions, READ_ONLY_MOUNT)
    jobs = [(container_algo(n, reference is not None), remote_workloads, tiers, remote_options) for n in names]
    outputs = list(function.starmap(jobs, return_exceptions=True))
    return 0 if collect(outputs, names, algo, gpu, results_dir, workloads) else 1


def tune_conflict(tune: bool, install_tables: bool, workloads: str, tiers: str) -> str | None:
    """Why these entry-point arguments do not go together (one line), or None."""
    if install_tables and not tune:
        return "--install-tables goes with --tune (it installs the launch tables a tune returns)"
    if tune and (workloads or tiers):
        given = " and ".join(f"--{name}" for name, value in (("workloads", workloads), ("tiers", tiers)) if value)
        return (f"{given} judge a run; --tune times on the tuner's own inputs (tools/tune/inputs.py): "
                "pass tuner options with --options=\"--batches 1,2,4 --iters 100\"")
    return None


def tune_on_modal(function, algo: str, gpu: str, options: str, tuning_dir: Path | None = None,
                  install_tables: bool = False, solutions_dir: Path | None = None, now=None) -> int:
    """``modal run run_modal.py --tune``: check the tuner's arguments here (before paying
    for a GPU), run the tune in one container on ``gpu`` (``function``: the Modal tuning
    function), write what it returns into a new ``<tuning_dir>/<UTC>-modal-<gpu>/`` (default
    ``results/tuning/``) and, with ``install_tables``, its launch tables into ``solutions_dir``
    (default ``solutions/``): :func:`tools.tune.remote.write_tuning`.

    Returns:
        0; 2 after a message for bad arguments; 1 when the container failed, returned
        nothing, or returned a path outside the expected folders (nothing written then).
    """
    from harness.paths import SOLUTIONS_DIR
    from harness.records.environment import git_commit
    from tools.tune.remote import tuned_names, tuner_argv, write_tuning
    from tools.tune.report import TUNING_DIR

    try:
        argv = tuner_argv(algo, options, install_tables)
    except ValueError as exc:  # a message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"tuning on {gpu}: python -m tools.tune {shlex.join(argv)}")
    try:
        output = (function if gpu == DEFAULT_GPU else function.with_options(gpu=gpu)).remote(argv)
    except Exception as exc:  # Modal's own, or the container's re-raised here: one line, not a traceback
        print(f"error: the tuning container failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(output, dict) or not (output.get("reports") or output.get("tables")):
        output = output if isinstance(output, dict) else {}
        print(f"error: the tune returned no file (exit status {output.get('code')}; its log is above)"
              + (f"\n{output['error']}" if output.get("error") else ""), file=sys.stderr)
        return 1
    record = {"gpu": gpu, "tuner_argv": argv, "local_git_commit": git_commit(),
              "command": shlex.join(["modal", "run", "run_modal.py", "--tune", "--algo", algo, "--gpu", gpu]
                                    + ([f"--options={options}"] if options else [])
                                    + (["--install-tables"] if install_tables else []))}
    try:
        folder, written = write_tuning(output, tuned_names(argv), tuning_dir or TUNING_DIR, gpu, record,
                                       install_tables, solutions_dir or SOLUTIONS_DIR, now)
    except ValueError as exc:  # paths from a container that ran solution code: nothing written
        print(f"error: refused the tune's files: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(f"tuning results: {folder}" + ("" if install_tables or not output["tables"] else
                                         " (launch tables kept there; --install-tables puts them into solutions/)"))
    if output.get("error") or output.get("code"):
        print(f"error: the tune stopped with status {output.get('code')}: {output.get('error') or 'see its log above'}",
              file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------- Modal app


def gpu_function_settings(image, volume) -> dict:
    """``app.function`` settings of the functions where solutions run, the judging and the tuning
    one alike (a tune runs where a judge would): the image, :data:`DEFAULT_GPU`, the Volume
    read-only, no access to other Modal objects (a solution could otherwise write the Volume
    through Modal's API), and results returned without pickle (CBOR), so that what a container
    running solution code returns cannot run code on this machine when it is read."""
    return {"image": image, "gpu": DEFAULT_GPU, "timeout": TIMEOUT_S, "restrict_modal_access": True,
            "_experimental_restrict_output": True,
            "volumes": {READ_ONLY_MOUNT: volume.with_mount_options(read_only=True)}}


class ModalObjects(NamedTuple):
    """The app's functions and Volume, as :func:`entry` uses them (tests pass stand-ins)."""

    evaluate: object
    prepare: object
    tune: object
    volume: object


def entry(objects: ModalObjects, algo: str = "", workloads: str = "", tiers: str = "", gpu: str = DEFAULT_GPU,
          options: str = "", results: str = "", tune: bool = False, install_tables: bool = False) -> int:
    """The local entry point's work (``modal run run_modal.py [...]``), its exit code: a tune
    (``--tune``: :func:`tune_on_modal`, into ``<results>/tuning/``, default ``results/tuning/``)
    or a judged run (:func:`run_on_modal`; ``--algo`` default all, ``--workloads`` default
    :data:`DEFAULT_WORKLOADS`, into ``<results>/runs/``, default ``results/local/runs/``).
    2 after a message for arguments that do not go together (:func:`tune_conflict`)."""
    from harness.paths import LOCAL_RESULTS_DIR

    problem = tune_conflict(tune, install_tables, workloads, tiers)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if tune:
        return tune_on_modal(objects.tune, algo, gpu, options, Path(results) / "tuning" if results else None,
                             install_tables)
    return run_on_modal(objects.evaluate, algo or "all", workloads or DEFAULT_WORKLOADS, tiers, gpu, options,
                        Path(results) if results else LOCAL_RESULTS_DIR, prepare=objects.prepare,
                        volume=objects.volume)


def credentials_problem() -> str | None:
    """Why Modal cannot be used from here (one line, with what to do), or None."""
    if modal is None:
        return f"run_modal.py needs the modal package: {SETUP_HINT}"
    from modal.config import config

    def setting(key: str):
        try:
            return config.get(key)
        except KeyError:  # a setting this modal version does not know
            return None

    if (setting("token_id") and setting("token_secret")) or setting("oauth_refresh_token"):
        return None
    return f"no Modal credentials on this machine: run `modal token new` (setup: {SETUP_HINT})"


def build_image():
    """CUDA devel image + pyproject's dependencies + this repository's code (the harness,
    the solutions, the workload sets and the tuner).
    The code is added last and mounted at start-up, so editing a solution does
    not rebuild the image; it lands under /root as in the repository, so
    harness.paths finds solutions/ and workloads/ there."""
    return (modal.Image.from_registry(CUDA_IMAGE, add_python=PYTHON_VERSION)
            .apt_install("build-essential")  # host compiler for nvcc and Triton's launchers
            .pip_install(*image_packages(), extra_index_url=TORCH_INDEX)
            .env({"CUDA_HOME": "/usr/local/cuda"})
            .add_local_file(REPO_ROOT / "pyproject.toml", "/root/pyproject.toml")
            .add_local_dir(REPO_ROOT / "workloads", "/root/workloads")
            .add_local_dir(REPO_ROOT / "solutions", "/root/solutions", ignore=["**/__pycache__", "**/*.pyc"])
            .add_local_python_source("harness", "tools"))  # tools: the tuner (--tune)


def _under_modal_cli() -> bool:
    """True when ``modal run`` (or ``python -m modal run``) is importing this file here."""
    program = Path(sys.argv[0])
    return program.name == "modal" or program.parent.name == "modal"


if modal is not None:
    if _under_modal_cli() and "--help" not in sys.argv and modal.is_local() and credentials_problem():
        # modal would fail later with a traceback; say what to do instead
        print(f"error: {credentials_problem()}", file=sys.stderr)
        raise SystemExit(1)

    app = modal.App(APP_NAME)
    image = build_image()
    volume = modal.Volume.from_name(VOLUME_NAME, create_if_missing=True)

    gpu_function = app.function(**gpu_function_settings(image, volume))

    @gpu_function
    def evaluate(algo: str, workloads: str, tiers: str, options: str) -> dict:
        return evaluate_in_container(algo, workloads, tiers, options)

    @gpu_function
    def tune_gpu(argv: list[str]) -> dict:
        return tune_container(argv)

    # No solution code runs here: it alone writes the Volume's cache.
    @app.function(image=image, cpu=PREPARE_CPUS, timeout=PREPARE_TIMEOUT_S, volumes={WRITABLE_MOUNT: volume})
    def prepare(algo: str, workloads: str, options: str) -> list[str]:
        try:
            return prepare_cache(algo, workloads, options)
        finally:
            volume.commit()  # what was cached before a failure stays for the next run

    @app.local_entrypoint()
    def main(algo: str = "", workloads: str = "", tiers: str = "", gpu: str = DEFAULT_GPU, options: str = "",
             results: str = "", tune: bool = False, install_tables: bool = False):
        code = entry(ModalObjects(evaluate, prepare, tune_gpu, volume), algo, workloads, tiers, gpu, options,
                     results, tune, install_tables)
        if code:
            raise SystemExit(code)


def standalone_main() -> int:
    """``python run_modal.py``: say how to run this file."""
    problem = credentials_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    print("start it with Modal's CLI: modal run run_modal.py [--algo NAME|all] [--workloads SET] "
          "[--tiers cupti,events,sync] [--gpu B200] [--options='...run_local.py options...']\n"
          "or tune launch tables: modal run run_modal.py --tune --algo NAME[,NAME]|all [--gpu B200] "
          "[--options='--batches 1,2,4 --iters 100'] [--install-tables]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(standalone_main())
