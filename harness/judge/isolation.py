"""Run each solution in its own spawned process, so that its crash, hang or
CUDA error becomes a status in its traces instead of the end of the run.

The parent writes a job file and starts ``python -m harness.judge.isolation JOB``.
The child loads the solution and evaluates it on the job's workloads,
appending one JSON line per event to the job's event file (``ready`` once the
solution module loaded, ``start`` before each workload, ``trace`` after it).
The parent follows that file. If the child dies or stops making progress,
the workload it was on gets RUNTIME_ERROR or TIMEOUT with the tail of the
child's log, and a fresh child resumes with the workloads left (a CUDA error
poisons the process's context, so resuming in-process is not possible).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from harness.judge.check import Status
from harness.paths import REPO_ROOT


@dataclass
class Timeouts:
    """Seconds the parent waits: for the solution to load (compilation
    included), for each workload, and for the whole solution."""

    startup_s: float = 600.0
    workload_s: float = 300.0
    total_s: float = 3600.0


@dataclass
class Job:
    """Everything a child needs, as plain JSON."""

    solution_dir: str
    state_dtype: str
    dataset: str
    uuids: list[str]  # workloads to evaluate, in order
    config: dict  # RunConfig fields, see config_to_json
    reference_dir: str
    events_path: str


def config_to_json(config) -> dict:
    """A RunConfig as JSON (nested dataclasses become dicts)."""
    return asdict(config)


def config_from_json(data: dict):
    """Inverse of :func:`config_to_json`."""
    from harness.judge.run import RunConfig
    from harness.judge.solutions import Tolerance
    from harness.judge.timing import TimingConfig

    return RunConfig(device=data["device"], tiers=tuple(data["tiers"]), trials=data["trials"],
                     tolerance=Tolerance(**data["tolerance"]), timing=TimingConfig(**data["timing"]))


def _emit(events_path: str, event: dict) -> None:
    with open(events_path, "a") as f:
        f.write(json.dumps(event) + "\n")
        f.flush()
        os.fsync(f.fileno())


def child_main(job_path: str) -> None:
    """Entry point of the child process: evaluate the job, emitting events."""
    from harness.data.dataset import open_dataset
    from harness.data.reference_cache import ReferenceCache
    from harness.judge.run import Variant, evaluate_solution
    from harness.judge.solutions import load_meta
    from harness.judge.timing import L2Flusher

    job = Job(**json.loads(Path(job_path).read_text()))
    config = config_from_json(job.config)
    dataset = open_dataset(job.dataset, show_progress=False)
    wanted = set(job.uuids)
    dataset.workloads = [w for w in dataset.workloads if w.uuid in wanted]
    variant = Variant(load_meta(job.solution_dir), job.state_dtype)
    flush = L2Flusher(config.device) if config.device.startswith("cuda") else None
    _emit(job.events_path, {"event": "ready"})
    traces = evaluate_solution(variant, dataset, config, ReferenceCache(job.reference_dir), flush,
                               on_start=lambda w: _emit(job.events_path, {"event": "start", "uuid": w.uuid}))
    for trace in traces:
        _emit(job.events_path, {"event": "trace", "trace": trace})


class _Follower:
    """Reads new complete lines of the child's event file."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def new_events(self) -> list[dict]:
        if not self.path.exists():
            return []
        with open(self.path) as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[: data.rfind("\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def _log_tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def run_isolated(job: Job, workdir: Path, timeouts: Timeouts, failure_trace, max_restarts: int = 3,
                 poll_s: float = 0.05) -> Iterator[dict]:
    """Yield the traces of ``job``, one per workload, whatever the child does.

    Args:
        failure_trace: ``(uuid, Status, log) -> trace`` for workloads the child
            could not finish (crash, timeout, never reached).
    """
    remaining = list(job.uuids)
    started_at = time.monotonic()
    for attempt in range(max_restarts + 1):
        if not remaining:
            return
        events = workdir / f"events-{attempt}.jsonl"
        log = workdir / f"child-{attempt}.log"
        job_path = workdir / f"job-{attempt}.json"
        job_path.write_text(json.dumps(asdict(job) | {"uuids": remaining, "events_path": str(events)}))
        with open(log, "w") as log_file:
            proc = subprocess.Popen([sys.executable, "-m", "harness.judge.isolation", str(job_path)], cwd=REPO_ROOT,
                                    stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"))
        follower, ready, current = _Follower(events), False, None
        deadline = time.monotonic() + timeouts.startup_s
        outcome = None
        while outcome is None:
            for event in follower.new_events():
                if event["event"] == "ready":
                    ready = True
                elif event["event"] == "start":
                    current = event["uuid"]
                    deadline = time.monotonic() + timeouts.workload_s
                elif event["event"] == "trace":
                    uuid = event["trace"]["workload"]["uuid"]
                    remaining.remove(uuid)
                    current = None
                    yield event["trace"]
            if proc.poll() is not None:
                for event in follower.new_events():  # lines written just before exit
                    if event["event"] == "trace":
                        remaining.remove(event["trace"]["workload"]["uuid"])
                        yield event["trace"]
                outcome = "exited"
            elif time.monotonic() > deadline or time.monotonic() - started_at > timeouts.total_s:
                _kill(proc)
                outcome = "timeout"
            else:
                time.sleep(poll_s)
        if not remaining:
            return
        tail = _log_tail(log)
        if outcome == "exited" and not ready:
            # the solution never loaded: every workload fails the same way, no retry
            code = proc.returncode
            for uuid in remaining:
                yield failure_trace(uuid, Status.RUNTIME_ERROR, f"solution process exited ({code}) before it "
                                    f"was ready:\n{tail}")
            return
        status = Status.TIMEOUT if outcome == "timeout" else Status.RUNTIME_ERROR
        what = ("timed out" if outcome == "timeout" else f"died (exit code {proc.returncode})")
        victim = current or remaining[0]
        phase = "loading" if not ready else "on this workload"
        yield failure_trace(victim, status, f"solution process {what} {phase}:\n{tail}")
        remaining.remove(victim)
        if outcome == "timeout" and time.monotonic() - started_at > timeouts.total_s:
            break
    for uuid in remaining:
        yield failure_trace(uuid, Status.RUNTIME_ERROR, "not run: the solution process failed too often "
                            "or ran out of its total time")


if __name__ == "__main__":
    child_main(sys.argv[1])
