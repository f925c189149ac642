"""The worker zygote (harness/judge/zygote.py): a worker it forks gets what a worker started with
``python -s -m`` gets (above all the judge's private copy of ``harness``), and the judge copes with a
zygote that was killed or stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.judge import isolation
from harness.judge.isolation import (GPU_PRELOAD, ForkedWorker, Zygote, become_subreaper, kill_tree,
                                     start_process, worker_env)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl, SCM_RIGHTS and /proc are Linux")

#: Stands in for harness/judge/worker.py in a private copy: reports what the process it runs in got.
PROBE = r'''
import ctypes, json, os, resource, signal, sys
import harness
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
report = {
    "harness": harness.__file__, "name": __name__, "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(),
    "env": dict(os.environ), "fds": [f for f in fds if os.path.exists(f"/proc/self/fd/{f}")],
    "stdin": os.readlink("/proc/self/fd/0"), "stdout": os.readlink("/proc/self/fd/1"),
    "stderr": os.readlink("/proc/self/fd/2"), "parent_is_judge": os.getppid() == int(sys.argv[1]),
    "own_session": os.getsid(0) == os.getpid(), "own_group": os.getpgid(0) == os.getpid(),
    "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), "flags": list(sys.flags),
    "dont_write_bytecode": sys.dont_write_bytecode, "umask": os.umask(0o22),
    "rlimits": [resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_AS, resource.RLIMIT_CORE)],
    "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD)],
    "harness_modules_before": [m for m in sys.modules if m.startswith("harness.")],
    "passed_fd_reads": os.read(int(sys.argv[2]), 5).decode(),
}
print(json.dumps(report), flush=True)
'''


#: Stands in for the worker in a zygote that preloaded the compilers: which cache folders they use.
CACHES = r'''
import json, os, sys
preloaded = [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]
from torch._inductor.runtime.cache_dir_utils import cache_dir
try:
    from triton import knobs
    triton_cache = knobs.cache.dir
except ImportError:  # no Triton here (the CPU wheel of torch)
    triton_cache = None
print(json.dumps({"preloaded": preloaded, "inductor": cache_dir(), "triton": triton_cache}), flush=True)
'''


def _private_copy(root: Path, source: str = PROBE) -> Path:
    """A private folder as the judge writes one: code/harness/{__init__,judge/__init__,judge/probe}.py, work/."""
    code = root / "code"
    (code / "harness" / "judge").mkdir(parents=True)
    (code / "harness" / "__init__.py").write_text("")
    (code / "harness" / "judge" / "__init__.py").write_text("")
    (code / "harness" / "judge" / "probe.py").write_text(source)
    (root / "work").mkdir()
    return root


def _probe(root: Path, zygote: bool, source: str = PROBE) -> tuple[object, dict]:
    """Start the probe like the judge starts a worker; (the process object, its report)."""
    root = _private_copy(root, source)
    read, write = os.pipe()
    os.write(write, b"hello")
    base = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    python_path = os.pathsep.join(p for p in (str(root / "code"), os.environ.get("PYTHONPATH")) if p)
    env = dict(base, PYTHONPATH=python_path, TRITON_CACHE_DIR=str(root / "triton"),
               TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"))
    with open(root / "log", "ab") as log:
        proc = start_process("harness.judge.probe", [str(os.getpid()), str(read)], root / "work", base, env,
                             [str(root / "code")], log, (read,), zygote=zygote)
    os.close(read)
    os.close(write)
    assert proc.wait(60) == 0, (root / "log").read_text()
    # the report is the last JSON line: what follows it is the interpreter's exit (Triton's nanobind
    # prints its reference-leak warnings there)
    report = next(line for line in reversed((root / "log").read_text().splitlines()) if line.startswith("{"))
    return proc, json.loads(report)


@pytest.fixture
def judge():
    """This process as the judge (a subreaper); the zygote it may already have (one of this
    environment, as a run of an earlier test left it) serves here too, as in a run."""
    assert become_subreaper()


def _comparable(report: dict, root: Path) -> dict:
    text = json.dumps(report).replace(str(root), "<root>")
    return json.loads(text)


def test_a_forked_worker_gets_what_a_started_worker_gets(judge, tmp_path):
    popen, started = _probe(tmp_path / "popen", zygote=False)
    forked_proc, forked = _probe(tmp_path / "forked", zygote=True)
    assert isinstance(popen, subprocess.Popen) and isinstance(forked_proc, ForkedWorker)
    # the judge's private copy, not the installed harness nor the one under test
    assert forked["harness"] == str(tmp_path / "forked" / "code" / "harness" / "__init__.py")
    assert forked["harness_modules_before"] == ["harness.judge"]  # nothing of the harness preloaded
    assert forked["parent_is_judge"] and forked["own_session"] and forked["own_group"]
    assert forked["dumpable"] == 1 and forked["stdin"] == "/dev/null"
    assert forked["passed_fd_reads"] == "hello"
    assert _comparable(forked, tmp_path / "forked") == _comparable(started, tmp_path / "popen")


def test_a_worker_of_a_gpu_runs_zygote_compiles_into_its_own_caches(judge, tmp_path):
    """The zygote of a GPU run imported torch.compile and Triton before the worker's environment
    existed: their cache folders must still be the worker's private ones, or one solution could
    leave compiled kernels for another to load."""
    Zygote.stop_current()
    Zygote.prestart(GPU_PRELOAD)
    try:
        proc, report = _probe(tmp_path / "w", zygote=True, source=CACHES)
    finally:
        Zygote.stop_current()  # the tests after this one get the zygote of a CPU run again
    assert isinstance(proc, ForkedWorker) and report["preloaded"] == ["torch._dynamo", "torch._inductor"]
    assert report["inductor"] == str(tmp_path / "w" / "inductor")
    assert report["triton"] in (None, str(tmp_path / "w" / "triton"))


def test_a_zygote_whose_preload_started_a_thread_does_not_fork(judge, tmp_path, monkeypatch, capfd):
    """A fork copies only the thread that forks: a worker forked from it could deadlock on a lock the
    other thread held. The judge then starts its workers with Popen, and says why."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    Zygote.stop_current()
    Zygote.prestart(("starts_a_thread",))
    try:
        proc, report = _probe(tmp_path / "w", zygote=True)
    finally:
        Zygote.stop_current()
    assert isinstance(proc, subprocess.Popen) and report["passed_fd_reads"] == "hello"
    assert "the preload left threads running" in capfd.readouterr().err


def test_a_workers_compiler_caches_and_harness_copy_are_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/site")
    env = worker_env(tmp_path)
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "code"), "/site"])
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")


def test_a_killed_zygote_falls_back_to_popen_then_a_new_one_serves(judge, tmp_path, capfd):
    _, first = _probe(tmp_path / "a", zygote=True)
    zygote = Zygote.current
    os.kill(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait(10)
    proc, report = _probe(tmp_path / "b", zygote=True)
    assert isinstance(proc, subprocess.Popen)
    assert "the worker zygote failed" in capfd.readouterr().err
    assert report["harness"] == str(tmp_path / "b" / "code" / "harness" / "__init__.py")
    proc, report = _probe(tmp_path / "c", zygote=True)
    assert isinstance(proc, ForkedWorker) and Zygote.current is not zygote
    assert report["harness"] == str(tmp_path / "c" / "code" / "harness" / "__init__.py")


def test_a_stopped_zygote_is_continued(judge, tmp_path):
    _probe(tmp_path / "a", zygote=True)
    os.kill(Zygote.current.proc.pid, signal.SIGSTOP)
    proc, _ = _probe(tmp_path / "b", zygote=True)
    assert isinstance(proc, ForkedWorker)


def test_a_zygote_that_does_not_answer_is_replaced_by_popen(judge, tmp_path, monkeypatch):
    _probe(tmp_path / "a", zygote=True)
    monkeypatch.setattr(isolation, "ZYGOTE_FORK_S", 0.5)
    monkeypatch.setattr(signal, "SIGCONT", 0)  # the judge's SIGCONT does not reach it
    os.kill(Zygote.current.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    proc, _ = _probe(tmp_path / "b", zygote=True)
    assert isinstance(proc, subprocess.Popen) and time.monotonic() - started < 30
    assert Zygote.current is None


def test_a_new_environment_gets_a_new_zygote(judge, tmp_path, monkeypatch):
    _probe(tmp_path / "a", zygote=True)
    first = Zygote.current
    monkeypatch.setenv("GDN_ZYGOTE_TEST", "1")
    _, report = _probe(tmp_path / "b", zygote=True)
    assert Zygote.current is not first and report["env"]["GDN_ZYGOTE_TEST"] == "1"


def test_kill_tree_spares_the_zygote_and_kills_the_worker(judge, tmp_path):
    _probe(tmp_path / "a", zygote=True)
    root = _private_copy(tmp_path / "b")
    (root / "code" / "harness" / "judge" / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    base = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    with open(root / "log", "ab") as log:
        read, write = os.pipe()
        proc = start_process("harness.judge.sleeper", [], root / "work", base, dict(base), [str(root / "code")],
                             log, (read,), zygote=True)
        os.close(read)
        os.close(write)
    assert isinstance(proc, ForkedWorker) and proc.poll() is None
    kill_tree(proc.pid)
    assert proc.wait(5) is not None
    assert Zygote.current.proc.poll() is None
