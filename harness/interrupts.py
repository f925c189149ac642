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
when the step is done.

**A solution cannot stop the run.** Its process may send the judge a signal like anyone of the same
user (``kill(getppid(), SIGINT)`` at import ended a run with exit 130 and left the later solutions
unjudged, 2026-11-28). So the stop signals are blocked in the judge, and a thread takes each with
``sigwaitinfo``, which says who sent it: one sent by a process that descends from the judge (its
workers and what they start; orphans are re-parented to the judge, a subreaper) is refused and
recorded (:func:`take_refused`); any other (the terminal's Ctrl-C, ``kill`` from a shell, ``timeout``)
is passed to the main thread with :data:`RELAY_SIGNAL`, a real signal, so that a blocking call
(``flock``, ``waitpid``) returns. The children inherit the blocked signals: the judge's own Python
children unblock them first thing (:func:`unblock_in_child`), and other tools (nvcc) keep them blocked,
so a Ctrl-C during a build waits for that build. A sender that has exited and been reaped by the time
its signal is read cannot be placed, and counts as the user's: a race of microseconds.
"""

from __future__ import annotations

import os
import signal
import threading

from harness import processes

#: The signals that stop a run: Ctrl-C, ``kill``, and the terminal closing (SIGHUP's default ended the judge
#: at once: the running solution's traces lost, its worker's children left running).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: The signal the watching thread passes a stop on with, to the main thread. Anyone may send it, so it
#: acts only on a stop the watcher recorded.
RELAY_SIGNAL = signal.SIGUSR2

_state = {"stopping": False, "deferring": 0, "held": None, "watching": False, "relayed": None, "refused": []}


def _on_signal(signum, frame) -> None:
    if _state["stopping"]:  # already on its way out: a second Ctrl-C changes nothing
        return
    if _state["deferring"]:
        _state["held"] = signum
        return
    _state["stopping"] = True
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install(watch_senders: bool = True) -> None:
    """SIGINT, SIGTERM and SIGHUP stop the run as Ctrl-C does, also where the process started with SIGINT
    ignored (a background job of a script, where Python installs no KeyboardInterrupt). With
    ``watch_senders`` (on the main thread, before any other thread starts; once a process) a signal sent by
    a descendant of this process is refused (module doc)."""
    _state.update(stopping=False, deferring=0, held=None)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)
    if (watch_senders and not _state["watching"] and hasattr(signal, "sigwaitinfo")
            and threading.current_thread() is threading.main_thread()):
        signal.signal(RELAY_SIGNAL, _on_relay)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        threading.Thread(target=_watch, name="stop-signals", daemon=True).start()
        _state["watching"] = True


def unblock_in_child() -> None:
    """For the judge's own Python children (the zygote, a worker) first thing: take back the stop signals
    the judge blocks (a child inherits its mask), so that they behave as any process's."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def take_refused() -> list[tuple[str, int]]:
    """``(signal name, sender pid)`` of each stop signal refused since the last call (module doc)."""
    refused, _state["refused"] = _state["refused"], []
    return [(signal.Signals(signum).name, pid) for signum, pid in refused]


def descends_from_this_process(pid: int) -> bool:
    """Whether ``pid`` is a process below this one (not this one), from ``/proc``'s parent links; False
    where it is gone (or there is no ``/proc``)."""
    above = processes.ancestors(pid)
    return pid != os.getpid() and above is not None and os.getpid() in above


def _watch() -> None:
    """The watching thread: every stop signal, with its sender (module doc)."""
    main = threading.main_thread().ident
    while True:
        info = signal.sigwaitinfo(set(STOP_SIGNALS))
        if info.si_pid > 0 and descends_from_this_process(info.si_pid):
            _state["refused"].append((info.si_signo, info.si_pid))
            continue
        _state["relayed"] = info.si_signo
        signal.pthread_kill(main, RELAY_SIGNAL)


def _on_relay(signum, frame) -> None:
    relayed, _state["relayed"] = _state["relayed"], None
    if relayed is not None:  # else someone else sent the relay signal: nothing to do
        _on_signal(relayed, frame)


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
