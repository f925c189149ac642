"""Check and time GDN decode solutions on Modal GPUs, one container per solution.

    pip install 'gdn-decode-bench[modal]' && modal token new     # once
    modal run run_modal.py --algo all --workloads contest-v2
    modal run run_modal.py --algo cuda-v4,fla-recurrent --workloads sweep --tiers cupti,events --gpu H100
    modal run run_modal.py --algo pt-reference --options="-n 1 --iters 50"

``--options`` passes any other run_local.py option through. Each container
runs the same :func:`harness.judge.orchestrate.run_benchmark` as run_local.py, with
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

Like run_local.py, a run writes only its own run folder, under
``results/local/`` by default (ignored by git); the leaderboard changes only
through ``python -m harness.records.leaderboard``.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import tomllib
from pathlib import Path

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
TIMEOUT_S = 3 * 3600  # one solution on one set, compilation included
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


# ------------------------------------------------------------- local side


def container_algo(name: str) -> str:
    """What the container judging solution ``name`` runs (:func:`harness.fanout.lane_algo`):
    the solution and pt-reference, so that every ratio is taken on its own GPU."""
    from harness.fanout import lane_algo

    return lane_algo([name])


def merge_results(results: list[dict], names: list[str], algo: str, gpu: str) -> tuple[str, dict, list, list]:
    """One run out of the containers' runs: (run id, run.json data, traces, floors), by the
    merge ``run_local.py --gpus`` uses (:func:`harness.fanout.merge_lanes`): ``results[i]`` is
    the container that judged ``names[i]``; each container is a lane, annotated with its own
    copy floors and pt-reference only."""
    from harness.fanout import LaneRun, merge_lanes
    from harness.records.trace import FloorMeasurement, Trace

    lanes = [LaneRun([name], r["run_id"], r["run"], [Trace.model_validate(t) for t in r["traces"]],
                     [FloorMeasurement.model_validate(f) for f in r.get("floors", [])])
             for name, r in zip(names, results)]
    return merge_lanes(lanes, algo, modal={"gpu": gpu, "container_runs": [r["run_id"] for r in results]})


def write_run_files(results_dir: Path, run_id: str, run: dict, traces: list, floors: list):
    """``<results_dir>/runs/<run_id>/`` (run.json, traces.jsonl, floors.jsonl,
    summary.csv) by :class:`harness.records.store.RunWriter`, as run_local.py
    writes them. Returns (run folder, summary frame)."""
    from harness.records.store import RunWriter

    writer = RunWriter(Path(results_dir) / "runs" / run_id)
    writer.write_meta(run)
    writer.write_traces(traces)
    writer.write_floors(floors)
    return writer.run_dir, writer.write_summary(traces, floors)


def collect(outputs: list, names: list[str], algo: str, gpu: str, results_dir: Path) -> Path | None:
    """Write the containers' results (exceptions reported, one line each) and
    print the table. None if no container returned."""
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
    run_id, run, traces, floors = merge_results(results, judged, algo, gpu)
    run_dir, frame = write_run_files(results_dir, run_id, run, traces, floors)
    print_table(frame)
    for note in run.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    print(f"traces: {run_dir / 'traces.jsonl'}\nsummary: {run_dir / 'summary.csv'}")
    return run_dir


def run_on_modal(evaluate, algo: str, workloads: str, tiers: str, gpu: str, options: str,
                 results_dir: Path) -> int:
    """Check the arguments here (before paying for GPUs), then one container
    per solution in parallel; returns the exit code."""
    from harness.cli import build_parser, parse_tiers
    from harness.judge.run import select_solutions

    build_parser().parse_args(harness_argv(algo, workloads, tiers, options))  # exits on a bad option
    try:
        if tiers:
            parse_tiers(tiers, "cuda")
        names = [path.name for path in select_solutions(algo)]
    except Exception as exc:  # unknown tier or solution: a message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    function = evaluate if gpu == DEFAULT_GPU else evaluate.with_options(gpu=gpu)
    print(f"{len(names)} container(s) on {gpu}: {', '.join(names)}")
    jobs = [(container_algo(n), workloads, tiers, options) for n in names]
    outputs = list(function.starmap(jobs, return_exceptions=True))
    return 0 if collect(outputs, names, algo, gpu, results_dir) else 1


# ------------------------------------------------------------- Modal app


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
    """CUDA devel image + pyproject's dependencies + this repository's code.
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
            .add_local_python_source("harness"))


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

    @app.function(image=build_image(), gpu=DEFAULT_GPU, timeout=TIMEOUT_S)
    def evaluate(algo: str, workloads: str, tiers: str, options: str) -> dict:
        return evaluate_remote(algo, workloads, tiers, options)

    @app.local_entrypoint()
    def main(algo: str = "all", workloads: str = "contest-v1", tiers: str = "", gpu: str = DEFAULT_GPU,
             options: str = "", results: str = ""):
        from harness.paths import LOCAL_RESULTS_DIR

        code = run_on_modal(evaluate, algo, workloads, tiers, gpu, options,
                            Path(results) if results else LOCAL_RESULTS_DIR)
        if code:
            raise SystemExit(code)


def standalone_main() -> int:
    """``python run_modal.py``: say how to run this file."""
    problem = credentials_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    print("start it with Modal's CLI: modal run run_modal.py [--algo NAME|all] [--workloads SET] "
          "[--tiers cupti,events,sync] [--gpu B200] [--options='...run_local.py options...']", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(standalone_main())
