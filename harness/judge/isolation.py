"""Process and file isolation: a worker per solution, and files it cannot spoil unnoticed.

* :class:`WorkerProcess` starts ``python -m harness.judge.worker`` in a private
  directory the parent wrote from memory (the harness sources and the
  solution, as they were when the run started), in a session and process
  group of its own, with a private working directory and Triton cache. When it
  ends, times out or the user presses Ctrl-C, :func:`kill_tree` kills its
  process group and every process left under the judge (the judge is a child
  subreaper, so a double-forked daemon is re-parented to it and found).
* :class:`FileGuard` fingerprints (SHA-256 of the bytes) the files a solution
  could spoil for others — the dataset's tensor files, the harness's sources,
  the solutions, the results folder — before a worker starts and verifies them
  after it ends; :class:`ResultsGuard` can also put the results folder back.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
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


def descendants(pid: int | None = None) -> list[int]:
    """Every live descendant of ``pid`` (this process by default), from /proc."""
    found, todo = [], _children(pid or os.getpid())
    while todo:
        child = todo.pop()
        if child not in found:
            found.append(child)
            todo += _children(child)
    return found


def kill_tree(process_group: int | None) -> None:
    """SIGKILL a worker's process group and every process left under the judge, then reap them."""
    if process_group:
        try:
            os.killpg(process_group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in descendants():
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
        if pid == 0 and not descendants():
            return
        if pid == 0:
            time.sleep(0.01)


class WorkerProcess:
    """One running worker and the parent's end of its channel."""

    def __init__(self, private_dir: Path, log_path: Path, to_worker_bytes: int, from_worker_bytes: int):
        """Start the worker; the payload areas (:class:`protocol.PayloadArea`) hold the largest
        frame of tensors each way: ``to_worker_bytes`` (stored inputs), ``from_worker_bytes`` (outputs)."""
        self.private_dir, self.log_path = private_dir, log_path
        (private_dir / "work").mkdir(parents=True, exist_ok=True)
        (private_dir / "triton").mkdir(exist_ok=True)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        to_area = msg.PayloadArea.create(to_worker_bytes, "gdn-judge-to-worker")
        from_area = msg.PayloadArea.create(from_worker_bytes, "gdn-judge-from-worker")
        # the private copy of the harness first; what the user's PYTHONPATH adds (packages) after it
        python_path = os.pathsep.join(p for p in (str(private_dir / "code"), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=python_path, PYTHONUNBUFFERED="1",
                   TRITON_CACHE_DIR=str(private_dir / "triton"), PYTHONDONTWRITEBYTECODE="1")
        fds = (to_worker_r, from_worker_w, to_area.fd, from_area.fd)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-m", "harness.judge.worker", "--read-fd", str(to_worker_r),
                 "--write-fd", str(from_worker_w), "--recv-area-fd", str(to_area.fd),
                 "--send-area-fd", str(from_area.fd)],
                cwd=private_dir / "work", env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=fds)
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

    def recv_tensor(self, header, shape, dtype: str, deadline: float):
        """A payload (see :meth:`protocol.Channel.recv_tensor`) before ``deadline``."""
        return self._before(deadline, lambda: self.channel.recv_tensor(header, shape, dtype))

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
            try:
                area.map.close()
            except BufferError:  # a view still alive (an abandoned reader thread): freed with it
                pass


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


def _digest(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


class FileGuard:
    """Fingerprints of the files under some roots (and of some single files)."""

    def __init__(self, roots: list[Path], files: list[Path] = ()):
        self.roots, self.files = [Path(r) for r in roots], [Path(f) for f in files]
        self.prints = self._take()

    def _paths(self) -> set[Path]:
        paths = {f for f in self.files}
        for root in self.roots:
            if root.is_dir():
                paths |= {p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        return paths

    def _take(self) -> dict[Path, str | None]:
        return {p: _digest(p) for p in sorted(self._paths() | set(getattr(self, "prints", {})))}

    def changes(self) -> list[str]:
        """Paths added, removed or changed since the fingerprints were taken (sorted)."""
        now = self._take()
        return sorted(str(p) for p in set(now) | set(self.prints) if now.get(p) != self.prints.get(p))

    def refresh(self) -> None:
        """Take the fingerprints again (after the judge itself wrote under a root)."""
        self.prints = {p: _digest(p) for p in sorted(self._paths())}


class ResultsGuard(FileGuard):
    """A FileGuard over the results folder that also keeps its bytes, so a
    solution that deleted or edited earlier results can be undone."""

    def __init__(self, root: Path):
        super().__init__([root])
        self.root = Path(root)
        self.saved = read_tree(self.root) if self.root.is_dir() else {}

    def restore(self) -> None:
        """Put every saved file back and remove the files neither there at the start nor written by the judge."""
        for path in self._paths():
            if path.relative_to(self.root).as_posix() not in self.saved:
                path.unlink(missing_ok=True)
        write_tree(self.saved, self.root)

    def remember(self, path: Path) -> None:
        """The judge wrote ``path``: keep its bytes as the version to restore."""
        self.saved[Path(path).relative_to(self.root).as_posix()] = Path(path).read_bytes()
