"""harness.interrupts: the first Ctrl-C or SIGTERM stops a run, later ones change nothing, and a step that
must finish whole holds a signal until it is done (an audit lost a solution's traces to a signal that
landed while its worker was being cleaned up, 2026-11-28)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from harness import interrupts


@pytest.fixture
def installed():
    before = {s: signal.getsignal(s) for s in interrupts.STOP_SIGNALS}
    interrupts.install()
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_a_signal_inside_a_deferred_step_is_raised_when_the_step_is_done(installed):
    finished = []
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs between bytecodes: here, inside the step
            finished.append("the whole step")
    assert finished == ["the whole step"] and interrupts.stopping()


def test_once_stopping_a_second_signal_changes_nothing(installed):
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    written = []
    with interrupts.deferred():  # what the run writes after the first Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        written.append("the run folder")
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    assert written == ["the run folder"]


def test_without_install_a_deferred_step_still_holds_the_signal_and_puts_the_handler_back():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_while_the_judge_still_imports_is_exit_130_without_a_traceback(tmp_path):
    proc = subprocess.Popen([sys.executable, "run_local.py", "--algo", "pt-reference", "--device", "cpu",
                             "--results", str(tmp_path / "r"), "--no-progress"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # torch's import takes about a second: the signal lands during it, or soon after
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert "interrupted" in err


def test_the_terminal_closing_stops_the_run_as_ctrl_c_does(installed):
    with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.05)
