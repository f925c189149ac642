"""One judging run per checkout at a time, and nothing else writing into the checkout meanwhile.

A run's file vault (:mod:`harness.judge.vault`) puts back every file under the
checkout's ``harness/`` and ``results/`` trees, the solutions' folders and their
builds after each worker, and reports any change there as that worker's
tampering. A second run in the same checkout writes exactly there (its run
folder, its summary, bytecode, a build), so two runs at once each blame the
other's writes on the solution they are judging and delete them. Measured
2026-11-26 (two ``run_local.py --algo pt-reference --device cpu`` started 3 s
apart in one clone): 0 of 20 passed in each run, every trace "tampering", where
one run alone passes 20 of 20. Any other writer does the same: a file copied
into ``results/tuning/`` 6 s into such a run was deleted, and the run passed 0
of 20 (same day, same command); written there by a tune's report writer under
the lock, the report waited for the run, which passed 20 of 20, and was kept.

So the run (:func:`harness.cli.main`, :func:`exclusively`) holds an exclusive
lock (``flock``) on a file of its checkout, kept under the cache root, from
start to end, and every tool writes into the checkout only under the same lock
(:func:`writing_into`: a tune's report and tables, a probe's report, the
leaderboard, the plots, what a Modal run or tune brings back); a second one
waits for it, after saying so. While a process holds the lock,
:data:`LOCK_HELD_ENV` in its environment names it, so what it starts (the
lanes of a ``--gpus`` run) and what it calls in process run under its lock
instead of waiting for themselves. Where ``fcntl`` is missing (not Linux or
macOS) there is no lock.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from harness import processes
from harness.paths import REPO_ROOT, cache_dir

try:
    import fcntl
except ImportError:  # no flock here: runs are not serialized
    fcntl = None

#: Set (to its pid) by the process holding the lock, for as long as it holds it; inherited by what
#: it starts. A process that finds it naming itself or an ancestor runs under that lock.
LOCK_HELD_ENV = "GDN_BENCH_LOCK_HELD_BY"

#: What a command stopped by Ctrl-C while waiting for the lock says (then it exits 130).
STOPPED_WHILE_WAITING = "stopped while waiting for the other command; nothing was judged or written"


class WaitInterrupted(Exception):
    """Ctrl-C (or SIGINT/SIGTERM under the CLI's handlers) while waiting for another process's
    lock: nothing was judged or written."""


def lock_path(repo_root: Path = REPO_ROOT) -> Path:
    """The lock file of the checkout at ``repo_root``: ``<cache root>/run-locks/<16 hex digits>.lock``,
    named by the checkout's resolved path (outside the checkout, so no run writes into it)."""
    digest = hashlib.sha256(str(Path(repo_root).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "run-locks" / f"{digest}.lock"


def folder_lock_path(folder: Path) -> Path:
    """The lock file of a ``--results`` folder outside the checkout (:func:`lock_path`'s form, named by the
    folder's resolved path): two checkouts' runs into one folder would each take the other's run folder for
    its solution's tampering (2026-11-28: both runs 0 of 20, one run's traces lost)."""
    digest = hashlib.sha256(f"results:{Path(folder).resolve()}".encode()).hexdigest()[:16]
    return cache_dir() / "run-locks" / f"{digest}.lock"


@contextmanager
def checkout_lock(on_wait: Callable[[str], None] = lambda holder: None,
                  path: Path | None = None, also: Iterable[Path] = ()) -> Iterator[None]:
    """Hold the checkout's run lock (and the lock files ``also``) for the ``with`` block.

    Args:
        on_wait: called once, before waiting, with what the holder wrote into the lock file
            (``"pid N since HH:MM:SS UTC: <its script>"``), when another process holds the lock.
        path: the lock file (default :func:`lock_path` of this checkout).
        also: more lock files (:func:`folder_lock_path`), taken with it; all in the order of their
            paths, so two commands that share some never wait for each other in a circle.

    Raises:
        WaitInterrupted: a KeyboardInterrupt while waiting, ``on_wait`` included (one in the ``with``
            block is the block's).
    """
    if fcntl is None or _held_above():
        yield
        return
    paths = sorted({Path(path) if path else lock_path(), *map(Path, also)})
    with ExitStack() as stack:
        for one in paths:
            stack.enter_context(_one_lock(one, on_wait))
        os.environ[LOCK_HELD_ENV] = str(os.getpid())
        try:
            yield
        finally:
            os.environ.pop(LOCK_HELD_ENV, None)


@contextmanager
def _one_lock(path: Path, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold one lock file for the block (see :func:`checkout_lock`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        # The whole wait, the note included: a Ctrl-C that lands while the note is being printed
        # (the moment a user, or a test, reacts to it) is a Ctrl-C while waiting.
        try:
            _acquire(handle, on_wait)
        except KeyboardInterrupt as exc:
            raise WaitInterrupted() from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S UTC', time.gmtime())}: {_command()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def _acquire(handle, on_wait: Callable[[str], None]) -> None:
    """Take the lock on the open lock file, at once or, after ``on_wait(holder)``, once it is free."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        on_wait(handle.read().strip() or "a process that wrote nothing there yet")
        fcntl.flock(handle, fcntl.LOCK_EX)


def _held_above() -> bool:
    """Whether :data:`LOCK_HELD_ENV` names this process or one it descends from (the lock's holder
    started it): then it runs under that lock. A name inherited from elsewhere (a shell that kept
    it, a pid reused) counts for nothing. Without ``/proc`` (macOS), a live process named counts."""
    try:
        named = int(os.environ.get(LOCK_HELD_ENV, ""))
    except ValueError:
        return False
    ancestors = processes.ancestors()
    if ancestors is not None:
        return named in ancestors
    try:
        os.kill(named, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def _command() -> str:
    """This process's script, relative to the checkout where it lies in it (``run_local.py``,
    ``tools/tune/__main__.py``): what a waiting command is told holds the lock."""
    script = Path(sys.argv[0] or "python").resolve()
    return str(script.relative_to(REPO_ROOT.resolve())) if script.is_relative_to(REPO_ROOT.resolve()) else script.name


def say_waiting(holder: str) -> None:
    """The note a command prints (stderr) before it waits for the lock ``holder`` holds."""
    print(f"note: another command holds this checkout or its --results folder ({holder}); this one waits for it "
          "to finish: a run's file vault takes whatever else is written into the checkout meanwhile for the "
          "judged solution's tampering (harness/run_lock.py). Several GPUs: one run with --gpus.",
          file=sys.stderr)


def inside_checkout(paths: Iterable[Path | str | None], repo_root: Path = REPO_ROOT) -> bool:
    """Whether any of ``paths`` (None entries ignored) lies inside the checkout at ``repo_root``."""
    root = Path(repo_root).resolve()
    return any(p is not None and Path(p).resolve().is_relative_to(root) for p in paths)


@contextmanager
def writing_into(paths: Iterable[Path | str | None]) -> Iterator[None]:
    """For a tool's ``with`` block that writes ``paths``: under the checkout's lock where one lies
    inside the checkout (so never while a run's vault is watching it: the note of
    :func:`say_waiting`, then the wait), else as it is.

    Raises:
        SystemExit: 130, after :data:`STOPPED_WHILE_WAITING` on stderr, for a Ctrl-C while waiting
            (nothing of the block ran).
    """
    if not inside_checkout(paths):
        yield
        return
    try:
        with checkout_lock(on_wait=say_waiting):
            yield
    except WaitInterrupted:
        print(STOPPED_WHILE_WAITING, file=sys.stderr)
        raise SystemExit(130) from None


def exclusively(work: Callable[[], int], results: Path | None = None) -> int:
    """``work()``'s exit code, run under the checkout's lock (:func:`checkout_lock`, the note of
    :func:`say_waiting` if it must wait): the judging run, whose vault covers the checkout
    whatever ``--results`` says, and, for a ``results`` folder outside the checkout, that folder's
    lock too (:func:`folder_lock_path`: another checkout's run may write there).

    Returns:
        ``work()``'s code, or 130 after :data:`STOPPED_WHILE_WAITING` on stderr when a Ctrl-C
        (SIGINT, or SIGTERM under the run's handlers) came while waiting: nothing ran.
    """
    also = [folder_lock_path(results)] if results is not None and not inside_checkout([results]) else []
    try:
        with checkout_lock(on_wait=say_waiting, also=also):
            return work()
    except WaitInterrupted:
        print(STOPPED_WHILE_WAITING, file=sys.stderr)
        return 130
