"""One judging run per checkout at a time: a second run waits for the first.

A run's file vault (:mod:`harness.judge.vault`) puts back every file under the
checkout's ``harness/`` and ``results/`` trees, the solutions' folders and their
builds after each worker, and reports any change there as that worker's
tampering. A second run in the same checkout writes exactly there (its run
folder, its summary, bytecode, a build), so two runs at once each blame the
other's writes on the solution they are judging and delete them. Measured
2026-11-26 (two ``run_local.py --algo pt-reference --device cpu`` started 3 s
apart in one clone): 0 of 20 passed in each run, every trace "tampering", where
one run alone passes 20 of 20.

So the command-line run (:func:`harness.cli.main`) holds an exclusive lock
(``flock``) on a file of its checkout, kept under the cache root, and a second
run waits for it, after saying so. The lanes of one ``--gpus`` run are one
run: their parent holds the lock and starts them with :data:`LANE_ENV` set.
Where ``fcntl`` is missing (not Linux or macOS) there is no lock.
"""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from harness.paths import REPO_ROOT, cache_dir

try:
    import fcntl
except ImportError:  # no flock here: runs are not serialized
    fcntl = None

#: Set (to the parent's pid) in the environment of a ``--gpus`` run's lanes: the parent holds the lock.
LANE_ENV = "GDN_BENCH_LANE_OF"


class WaitInterrupted(Exception):
    """Ctrl-C (or SIGINT/SIGTERM under the CLI's handlers) while waiting for another run's lock:
    nothing was judged."""


def lock_path(repo_root: Path = REPO_ROOT) -> Path:
    """The lock file of the checkout at ``repo_root``: ``<cache root>/run-locks/<16 hex digits>.lock``,
    named by the checkout's resolved path (outside the checkout, so no run writes into it)."""
    digest = hashlib.sha256(str(Path(repo_root).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "run-locks" / f"{digest}.lock"


@contextmanager
def checkout_lock(on_wait: Callable[[str], None] = lambda holder: None,
                  path: Path | None = None) -> Iterator[None]:
    """Hold the checkout's run lock for the ``with`` block.

    Args:
        on_wait: called once, before waiting, with what the holder wrote into the lock file
            (``"pid N since HH:MM:SS UTC"``), when another run holds the lock.
        path: the lock file (default :func:`lock_path` of this checkout).

    Raises:
        WaitInterrupted: a KeyboardInterrupt while waiting, ``on_wait`` included (one in the ``with``
            block is the block's).
    """
    if fcntl is None or os.environ.get(LANE_ENV):
        yield
        return
    path = Path(path) if path else lock_path()
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
        handle.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S UTC', time.gmtime())}")
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
        on_wait(handle.read().strip() or "a run that wrote nothing yet")
        fcntl.flock(handle, fcntl.LOCK_EX)
