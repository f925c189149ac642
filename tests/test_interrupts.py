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
    interrupts.install(watch_senders=False)  # the watching thread is for the judge's process (tested below, apart)
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


WATCHED = """
import os, signal, sys, time
from harness import interrupts
interrupts.install()
child = os.fork()
if child == 0:  # a worker of the judge's, or what it started: its signal is refused
    os.kill(os.getppid(), signal.SIGINT)
    time.sleep(0.5)  # alive while the judge reads who sent it
    os._exit(0)
time.sleep(1.0)
os.waitpid(child, 0)
print("refused:", [name for name, pid in interrupts.take_refused() if pid == child], flush=True)
try:
    os.kill(os.getpid(), signal.SIGTERM)  # anyone else's (here the process itself, as a shell's kill is)
    time.sleep(2)
    print("not stopped", flush=True)
except KeyboardInterrupt as stop:
    print("stopped by", stop, flush=True)
"""


def test_a_stop_signal_from_a_descendant_is_refused_and_anyone_elses_stops():
    done = subprocess.run([sys.executable, "-c", WATCHED], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["refused: ['SIGINT']", "stopped by SIGTERM"], done.stdout + done.stderr


def test_a_solution_that_signals_the_judge_does_not_end_the_run(tmp_path):
    """``kill(judge, SIGINT)`` at import ended a run with exit 130 and left the later solutions unjudged
    (docs/judging.md, promise 7). The judge's pid is in every worker's environment (the run lock's name)."""
    import shutil

    from conftest import FIXTURE_SOLUTIONS, write_small_dataset

    solutions = tmp_path / "solutions"
    for name in ("signals-judge", "good"):
        shutil.copytree(FIXTURE_SOLUTIONS / "good", solutions / name, symlinks=False)
        toml = solutions / name / "solution.toml"
        toml.write_text(toml.read_text().replace('name = "good"', f'name = "{name}"'))
    main = solutions / "signals-judge" / "main.py"
    main.write_text("import os, signal\nos.kill(int(os.environ['GDN_BENCH_LOCK_HELD_BY']), signal.SIGINT)\n"
                    + main.read_text())
    dataset = write_small_dataset(tmp_path / "dataset", batch_sizes=(1,), scales=(0.0,))
    done = subprocess.run([sys.executable, "run_local.py", "--algo", "signals-judge,good", "--device", "cpu", "-n", "1",
                           "--budget", "0.2", "--workloads", str(dataset), "--solutions", str(solutions),
                           "--results", str(tmp_path / "r"), "--no-progress"], cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "solution x workload: 2 passed" in done.stdout and "refused, as a solution does not stop the run" in done.stderr
