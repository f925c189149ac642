"""The process tree, read from ``/proc`` (Linux): which processes a given one descends from.

Two parts of the judge ask it: the run lock (is the process that holds it this one or one it descends
from?) and the stop-signal watcher (did a process of the judge's own tree send this signal?).
"""

from __future__ import annotations

import os
from pathlib import Path


def ancestors(pid: int | None = None) -> set[int] | None:
    """``pid`` (this process by default) and its parents' pids up to init, from ``/proc``; None where
    ``/proc`` has no such process (it is gone, or there is no ``/proc``). A parent that cannot be read
    ends the walk there."""
    start = os.getpid() if pid is None else pid
    pids, pid = set(), start
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None if pid == start else pids
        pid = int(stat[stat.rindex(")") + 2:].split()[1])  # the field after the state: the parent's pid
    return pids
