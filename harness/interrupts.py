"""Ctrl-C and SIGTERM for the judge's own process: the first one stops the run, none loses what finished.

A run that is stopped writes what finished and exits 130 (README). Three things used to break that
(2026-11-28, an audit that sent signals at chosen moments):

* a signal that landed while a solution's worker was being cleaned up (its files put back, its
  traces added to the run) interrupted that step, and every trace of that solution was lost;
* a second Ctrl-C, 30-60 ms after the first, did the same to the steps that write the run folder
  and print the table (and printed tracebacks);
* a signal before the handlers were installed (while torch imports) printed a traceback, or left
  with 143 instead of 130.

So: :func:`install` is the first thing ``run_local.py`` does; the first signal raises
:class:`KeyboardInterrupt` where the run is, later ones are ignored (the run is already stopping);
and the steps that must finish whole run inside :func:`deferred`, where a signal is held and raised
when the step is done. Only signals, never a solution's doing: a worker that exits or hangs is the
judge's business (harness/judge/session.py).
"""

from __future__ import annotations

import signal
import threading

#: The signals that stop a run: Ctrl-C, ``kill``, and the terminal closing (SIGHUP's default ended the judge
#: at once: the running solution's traces lost, its worker's children left running).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_state = {"stopping": False, "deferring": 0, "held": None}


def _on_signal(signum, frame) -> None:
    if _state["stopping"]:  # already on its way out: a second Ctrl-C changes nothing
        return
    if _state["deferring"]:
        _state["held"] = signum
        return
    _state["stopping"] = True
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install() -> None:
    """SIGINT, SIGTERM and SIGHUP stop the run as Ctrl-C does, also where the process started with SIGINT
    ignored (a background job of a script, where Python installs no KeyboardInterrupt)."""
    _state.update(stopping=False, deferring=0, held=None)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


def stopping() -> bool:
    """Whether a signal has stopped the run."""
    return _state["stopping"]


class deferred:
    """``with deferred(): ...``: a SIGINT or SIGTERM that arrives inside is held, and raised as
    :class:`KeyboardInterrupt` when the block ends (unless the block ends by an exception: the run is
    stopping anyway). Where :func:`install` did not run (a test calling the judge directly) it puts
    its own handler in place for the block, on the main thread; on another thread it holds nothing."""

    def __enter__(self) -> "deferred":
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not _on_signal:
                    self.previous[signum] = signal.signal(signum, _on_signal)
        if self.previous and not _state["deferring"]:  # not a run install() set up: no stop carried over
            _state.update(stopping=False, held=None)
        _state["deferring"] += 1
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        _state["deferring"] -= 1
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        held, _state["held"] = (_state["held"], None) if not _state["deferring"] else (None, _state["held"])
        if held is not None and exc_type is None:
            _state["stopping"] = True
            raise KeyboardInterrupt(signal.Signals(held).name)
        return False
