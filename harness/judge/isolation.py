"""Process and file isolation: a worker per solution, and files it cannot spoil unnoticed.

* :class:`WorkerProcess` starts ``python -m harness.judge.worker`` in a private
  directory the parent wrote from memory (the harness sources and the
  solution, as they were when the run started), in a session and process
  group of its own, with a private working directory and Triton cache. When it
  ends, times out or the user presses Ctrl-C, :func:`kill_tree` kills its
  process group and every process left under the judge (the judge is a child
  subreaper, so a double-forked daemon is re-parented to it and found).
* Workers are forked by a :class:`Zygote` (harness/judge/zygote.py), a fork
  server of the judge that imported torch once, so a worker starts in a
  fraction of a second instead of two; it sets up exactly what the Popen path
  gives a worker. ``GDN_JUDGE_ZYGOTE=0`` turns it off; where it cannot be used
  (the judge is not a subreaper) or fails (it died, was stopped, did not
  answer), the worker is started with Popen.
* The files a solution could spoil for others are kept and put back by
  :class:`harness.judge.vault.FileVault`.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.judge import protocol as msg

#: prctl options: orphaned descendants are re-parented to this process, not to init;
#: a process is sent a signal when its parent dies.
PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG = 36, 1
#: prctl options: whether other processes of the same user may ptrace this one or read /proc/<pid>/mem.
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
PR_GET_CHILD_SUBREAPER = 37
#: The switch: fork workers from a zygote (see module doc) unless GDN_JUDGE_ZYGOTE=0.
USE_ZYGOTE = os.environ.get("GDN_JUDGE_ZYGOTE", "1") != "0"
#: The zygote's source, read when the judge starts (before any worker could change the file).
ZYGOTE_SOURCE = (Path(__file__).parent / "zygote.py").read_text()
#: Seconds the judge waits for the zygote: to be ready (it imports torch), to answer a fork request.
ZYGOTE_READY_S, ZYGOTE_FORK_S = 120.0, 10.0
#: What the zygote of a GPU run imports beyond numpy and torch, once rather than in every worker
#: that needs it: most of what torch.compile (pt-compiled) and fla (the FLA baselines) import
#: (importing fla's GDN ops took 20 s after torch alone and 13 s after these on the H100 host,
#: results/speed/20261124-H100/row_cost_probe.txt). Not torch._inductor.compile_fx: its import
#: starts the CUDA driver there (a thread named cuda0000..., also with PYTORCH_NVML_BASED_CUDA_CHECK
#: set), and the zygote then refuses to serve, so every worker of the run was started the slow way
#: (results/speed/20261125-H100/README.md). The zygote checks that the preload started neither
#: CUDA nor a thread, or refuses (zygote.py, ``preload``, ``fork_problem``); Triton and inductor
#: read their cache folders from the environment when they compile, so a worker's private caches
#: still apply (tests/judge/test_isolation.py). A CPU run does without: ~1.5 s more per zygote start there.
GPU_PRELOAD = ("torch._dynamo", "torch._inductor", "sympy", "triton.language")
#: The zygote's first PYTHONPATH entry (no such folder): a forked worker puts its own entries there.
ZYGOTE_PLACEHOLDER = "/nonexistent/gdn-judge-zygote-worker-pythonpath"


@dataclass
class Timeouts:
    """Seconds the parent waits: for the solution to load (compilation
    included), for each workload, and for the whole solution."""

    startup_s: float = 600.0
    workload_s: float = 300.0
    total_s: float = 3600.0


class WorkerGone(RuntimeError):
    """The worker exited, or stopped answering within its deadline (``timed_out``)."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


def is_subreaper() -> bool:
    """Whether this process reaps its orphaned descendants (see :func:`become_subreaper`)."""
    try:
        flag = ctypes.c_int(0)
        return ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 \
            and flag.value != 0
    except (OSError, AttributeError):
        return False


def _prctl(option: int, value: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where unsupported."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def protect_memory() -> bool:
    """Make this process non-dumpable (Linux): a worker running as the same
    (non-root) user can then neither ptrace the judge nor read its memory
    through /proc/<pid>/mem, where the references are. Root bypasses it
    (docs/judging.md)."""
    return _prctl(PR_SET_DUMPABLE, 0)


def die_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux). The
    worker calls it first thing, so a judge killed hard (SIGKILL, no clean-up)
    does not leave an honest worker running; an untrusted one can undo it
    (docs/judging.md)."""
    return _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def descendants(pid: int | None = None, spare: tuple[int, ...] = ()) -> list[int]:
    """Every live descendant of ``pid`` (this process by default), from /proc; not ``spare`` and theirs."""
    found, todo = [], [c for c in _children(pid or os.getpid()) if c not in spare]
    while todo:
        child = todo.pop()
        if child not in found:
            found.append(child)
            todo += _children(child)
    return found


def kill_tree(process_group: int | None) -> None:
    """SIGKILL a worker's process group and every process left under the judge, then reap them.
    The zygote is spared: a worker's descendants are never under it (it is no subreaper)."""
    if process_group:
        try:
            os.killpg(process_group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    spare = Zygote.running()
    for pid in descendants(spare=spare):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0 and not descendants(spare=spare):
            return
        if pid == 0:
            time.sleep(0.01)


class WorkerProcess:
    """One running worker and the parent's end of its channel."""

    def __init__(self, private_dir: Path, log_path: Path, to_worker_bytes: int, from_worker_bytes: int,
                 core_fds: tuple[int, int] | None = None):
        """Start the worker; the payload areas (:class:`protocol.PayloadArea`) hold the largest
        frame of tensors each way: ``to_worker_bytes`` (stored inputs), ``from_worker_bytes`` (outputs).
        ``core_fds``: the timing core's key pipe and capture area (:class:`harness.judge.core.CoreLink`),
        passed to the worker and closed here once it has them."""
        self.private_dir, self.log_path = private_dir, log_path
        (private_dir / "work").mkdir(parents=True, exist_ok=True)
        (private_dir / "triton").mkdir(exist_ok=True)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        to_area = msg.PayloadArea.create(to_worker_bytes, "gdn-judge-to-worker")
        from_area = msg.PayloadArea.create(from_worker_bytes, "gdn-judge-from-worker")
        base, env = worker_base_env(), worker_env(private_dir)
        fds = (to_worker_r, from_worker_w, to_area.fd, from_area.fd, *(core_fds or ()))
        args = ["--read-fd", str(to_worker_r), "--write-fd", str(from_worker_w), "--recv-area-fd", str(to_area.fd),
                "--send-area-fd", str(from_area.fd)]
        if core_fds:
            args += ["--core-key-fd", str(core_fds[0]), "--core-area-fd", str(core_fds[1])]
        with open(log_path, "ab") as log:
            self.proc = start_process("harness.judge.worker", args, private_dir / "work", base, env,
                                      [str(private_dir / "code")], log, fds)
        for fd in fds:  # the worker's ends; the areas stay mapped here
            os.close(fd)
        from multiprocessing.connection import Connection

        self.channel = msg.Channel.parent_side(Connection(from_worker_r, writable=False),
                                               Connection(to_worker_w, readable=False), to_area, from_area)

    def send(self, message, tensors=(), timeout_s: float = 60.0) -> None:
        """Send a header and its payloads within ``timeout_s``: a worker that stops
        reading its pipe must not block the judge (it is killed instead).

        Raises:
            WorkerGone: the worker is gone, or did not read in time (``timed_out``; it was killed).
        """
        def write() -> None:
            self.channel.send(message)
            for tensor in tensors:
                self.channel.send_tensor(tensor)

        failure: list[BaseException] = []
        writer = threading.Thread(target=lambda: _capture(write, failure), daemon=True)
        writer.start()
        writer.join(timeout_s)
        if writer.is_alive():
            self.kill()  # the write fails with a broken pipe and the thread ends
            writer.join(5)
            raise WorkerGone("the solution process stopped reading the judge's messages", timed_out=True)
        if failure:
            raise WorkerGone(f"the solution process is gone ({self.exit_text()})") from failure[0]

    def recv(self, deadline: float, *expected):
        """The next message (one of ``expected``) before ``deadline`` (time.monotonic()).

        Raises:
            WorkerGone: the worker exited, or the deadline passed (``timed_out``).
            protocol.ProtocolError: a malformed or unexpected message.
        """
        return self._before(deadline, lambda: self.channel.recv(*expected))

    def recv_tensor(self, header, shape, dtype: str, deadline: float, device: str = "cpu"):
        """A payload, copied onto ``device`` (see :meth:`protocol.Channel.recv_tensor`), before ``deadline``."""
        return self._before(deadline, lambda: self.channel.recv_tensor(header, shape, dtype, device))

    def pin_outputs_area(self) -> bool:
        """Page-lock the judge's mapping of the area the worker's outputs arrive in, which the judge
        copies onto the GPU (:meth:`protocol.PayloadArea.pin`; the stored inputs it sends come from
        host memory, so their area gains nothing). Returns whether it is locked."""
        return self.channel.recv_area.pin()

    def _before(self, deadline: float, read):
        """``read()`` on a thread, so that a worker that sends half a frame and
        stalls cannot block the judge: past ``deadline`` it is killed."""
        outcome: list = []

        def target() -> None:
            try:
                outcome.append(("ok", read()))
            except BaseException as exc:  # handed to the judge's thread below
                outcome.append(("raised", exc))

        reader = threading.Thread(target=target, daemon=True)
        reader.start()
        reader.join(max(0.0, deadline - time.monotonic()))
        if reader.is_alive():
            self.kill()  # the read ends with an end of file
            reader.join(5)
            raise WorkerGone("the solution process stopped answering before its deadline", timed_out=True)
        kind, value = outcome[0]
        if kind == "ok":
            return value
        if isinstance(value, (EOFError, OSError)) and not isinstance(value, msg.ProtocolError):
            raise WorkerGone(f"the solution process exited ({self.exit_text()})") from value
        raise value

    def exit_text(self) -> str:
        try:
            code = self.proc.wait(0.5)  # a pipe closes just before its writer is reaped
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def log_tail(self, limit: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, grace_s: float = 5.0) -> None:
        """Ask it to exit, then kill what is left of it (and of anything it started)."""
        if self.proc.poll() is None:
            try:
                self.channel.send(msg.Stop())
                self.proc.wait(grace_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """Kill the worker's process tree and close the judge's ends of the pipes (idempotent)."""
        kill_tree(self.proc.pid)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for connection in (self.channel.reader, self.channel.writer):
            if not connection.closed:
                connection.close()
        for area in (self.channel.send_area, self.channel.recv_area):
            area.close()


def worker_base_env() -> dict:
    """The environment every worker shares (the judge's, unbuffered, no bytecode written): the
    zygote runs in it, and a worker adds its own PYTHONPATH and compiler caches."""
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")


def worker_env(private_dir: Path) -> dict:
    """A worker's environment: :func:`worker_base_env` with the private copy of the harness first on
    PYTHONPATH (what the user's PYTHONPATH adds, packages, after it) and compiler caches of its own
    under ``private_dir``, so a solution cannot leave compiled kernels for a later worker to load."""
    python_path = os.pathsep.join(p for p in (str(private_dir / "code"), os.environ.get("PYTHONPATH")) if p)
    return dict(worker_base_env(), PYTHONPATH=python_path, TRITON_CACHE_DIR=str(private_dir / "triton"),
                TORCHINDUCTOR_CACHE_DIR=str(private_dir / "inductor"))


def start_process(module: str, args: list[str], cwd: Path, base_env: dict, env: dict, path_prefix: list[str],
                  log, fds: tuple[int, ...], zygote: bool = USE_ZYGOTE):
    """``python -s -m module *args`` in ``cwd`` with ``env`` (``base_env`` plus, per worker, ``path_prefix``
    in front of PYTHONPATH and the rest), its own session, stdin /dev/null, stdout and stderr ``log`` (a
    file), ``fds`` passed: forked by the zygote where it can (a :class:`ForkedWorker`), else a Popen."""
    forked = Zygote.fork(base_env, module, args, cwd, env, path_prefix, log.fileno(), fds) if zygote else None
    if forked is not None:
        return forked
    return subprocess.Popen([sys.executable, "-s", "-m", module, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=fds)


class ForkedWorker:
    """A worker the zygote forked (re-parented to the judge): Popen's poll/wait/pid/returncode for it."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (kill_tree): what Popen reports then
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode


class Zygote:
    """The judge's fork server (harness/judge/zygote.py), one per environment: started on the first
    fork and kept for the workers after it; a new environment (or a zygote that failed) starts another."""

    current: "Zygote | None" = None

    def __init__(self, key, preload: tuple[str, ...] = ()):
        self.key = key
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        with theirs:
            # the worker's PYTHONPATH entries come where the placeholder is, in front of the user's
            python_path = os.pathsep.join(p for p in (ZYGOTE_PLACEHOLDER, key[0].get("PYTHONPATH")) if p)
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-c", ZYGOTE_SOURCE, str(os.getpid()), str(theirs.fileno()), *preload],
                cwd="/", env=dict(key[0], PYTHONPATH=python_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True, pass_fds=(theirs.fileno(),))
        self.ready = False

    @classmethod
    def running(cls) -> tuple[int, ...]:
        """The pid of the live zygote, if any (for :func:`kill_tree` to spare)."""
        return (cls.current.proc.pid,) if cls.current is not None else ()

    @classmethod
    def fork(cls, base_env: dict, module: str, args: list[str], cwd: Path, env: dict, path_prefix: list[str],
             log_fd: int, fds: tuple[int, ...]) -> ForkedWorker | None:
        """A worker forked as ``python -s -m module *args`` with ``env`` (``base_env`` plus what differs per
        worker, ``path_prefix`` the PYTHONPATH entries it adds), in ``cwd``, stdout and stderr ``log_fd``,
        ``fds`` passed at their numbers; None where the zygote cannot be used or failed (the caller
        then starts it with Popen; a failure is said on stderr)."""
        if not is_subreaper() or min(fds) < 3:
            return None
        try:
            return cls.started(base_env).request(dict(module=module, args=args, cwd=str(cwd), env=env, path_prefix=path_prefix,
                                            placeholder=ZYGOTE_PLACEHOLDER, fds=list(fds)), [log_fd, *fds])
        except (OSError, ValueError, KeyError) as exc:
            print(f"judge: the worker zygote failed ({exc!r}); starting the worker without it", file=sys.stderr)
            cls.stop_current()
            return None

    @classmethod
    def started(cls, base_env: dict, preload: tuple[str, ...] = ()) -> "Zygote":
        """The zygote for ``base_env`` and the signals this process ignores now (a worker inherits
        them, as exec keeps them), started (importing ``preload`` too) if there is none; one for
        another key is stopped.

        Raises:
            OSError: the zygote process could not be started.
        """
        ignored = tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
                        if signal.getsignal(s) == signal.SIG_IGN)
        key = (base_env, ignored)
        if cls.current is not None and cls.current.key != key:
            cls.stop_current()
        if cls.current is None:
            cls.current = Zygote(key, preload)
        return cls.current

    @classmethod
    def prestart(cls, preload: tuple[str, ...] = ()) -> None:
        """Start the zygote now, for the workers of :func:`worker_base_env`, importing ``preload``
        too (:data:`GPU_PRELOAD` for a GPU run), so that its imports overlap the run's builds and
        tensor generation rather than delay the first worker. Does nothing where workers would not
        be forked; a zygote that cannot start is said at the first fork, which falls back to Popen."""
        if USE_ZYGOTE and is_subreaper():
            try:
                cls.started(worker_base_env(), preload)
            except OSError:
                pass

    def request(self, request: dict, fds: list[int]) -> ForkedWorker:
        if not self.ready:
            self.sock.settimeout(ZYGOTE_READY_S)
            hello = json.loads(self.sock.recv(4096) or b"{}")
            if hello.get("ready") is not True:
                raise OSError(hello.get("error") or f"the zygote exited before it was ready (exit code {self.proc.poll()})")
            self.ready = True
        os.kill(self.proc.pid, signal.SIGCONT)  # a worker may have stopped it
        self.sock.settimeout(ZYGOTE_FORK_S)
        socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
        reply = json.loads(self.sock.recv(4096) or b"{}")
        if "pid" not in reply:
            raise OSError(f"the zygote did not fork: {reply.get('error') or 'it exited'}")
        return ForkedWorker(reply["pid"])

    @classmethod
    def stop_current(cls) -> None:
        zygote, cls.current = cls.current, None
        if zygote is not None:
            zygote.sock.close()
            zygote.proc.kill()
            zygote.proc.wait()


atexit.register(Zygote.stop_current)


def _capture(action, failures: list) -> None:
    """Run ``action``; append what it raised (a broken pipe) to ``failures``."""
    try:
        action()
    except (OSError, ValueError) as exc:
        failures.append(exc)


def write_tree(files: dict[str, bytes], root: Path) -> None:
    """Write ``{relative path: bytes}`` under ``root``."""
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def read_tree(root: Path, pattern: str = "**/*", skip=("__pycache__",)) -> dict[str, bytes]:
    """``{relative path: bytes}`` of the files under ``root`` matching ``pattern``."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob(pattern))
            if p.is_file() and not set(skip) & set(p.relative_to(root).parts)}
