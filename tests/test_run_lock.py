"""One judging run per checkout at a time (harness/run_lock.py): a second run waits, is told who
holds the lock, and both runs' verdicts are their solutions' own."""

import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from harness.paths import cache_dir
from harness.run_lock import (LOCK_HELD_ENV, STOPPED_WHILE_WAITING, checkout_lock, exclusively, folder_lock_path,
                               lock_path, writing_into)

pytest.importorskip("fcntl")

#: A process that holds the lock at PATH, says so on stdout, then holds it until a line comes on its
#: stdin or SECONDS pass.
HOLDER = """
import select, sys
from pathlib import Path
from harness.run_lock import checkout_lock
with checkout_lock(path=Path(sys.argv[1])):
    print("held", flush=True)
    select.select([sys.stdin], [], [], float(sys.argv[2]))
"""


def _holder(path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_lock_file_is_per_checkout_and_outside_it(tmp_path):
    assert lock_path(REPO) == lock_path(REPO / "." / "harness" / "..")  # by the resolved path
    assert lock_path(REPO) != lock_path(tmp_path)
    assert lock_path(REPO).parent == cache_dir() / "run-locks" and not lock_path(REPO).is_relative_to(REPO)


def test_a_second_run_waits_for_the_first_and_is_told_who_holds_it(tmp_path):
    path = tmp_path / "checkout.lock"
    holder = _holder(path, 1.0)
    told = []
    start = time.monotonic()
    with checkout_lock(on_wait=told.append, path=path):
        waited = time.monotonic() - start
        assert holder.poll() is not None or waited >= 0.5  # the holder let go first
        assert path.read_text().startswith(f"pid {os.getpid()} since ")
    holder.wait(timeout=30)
    assert len(told) == 1 and told[0].startswith(f"pid {holder.pid} since ") and waited >= 0.5
    assert path.read_text() == ""  # nothing left claiming the lock


def test_a_run_of_another_checkout_into_the_same_results_folder_is_waited_for(tmp_path, monkeypatch):
    """The lock of a --results folder outside the checkout: the other checkout's run holds it here (its
    checkout lock is another file), and this run waits for it before judging anything."""
    from harness import run_lock

    monkeypatch.setattr(run_lock, "lock_path", lambda repo_root=REPO: tmp_path / "this-checkout.lock")
    results = tmp_path / "shared-results"
    assert folder_lock_path(results) == folder_lock_path(tmp_path / "." / "shared-results")
    assert folder_lock_path(results) not in (lock_path(REPO), lock_path(results))
    holder = _holder(folder_lock_path(results), 1.0)  # the other checkout's run
    start = time.monotonic()
    assert exclusively(lambda: int((time.monotonic() - start) * 1000), results=results) >= 500
    holder.wait(timeout=30)


def test_a_run_that_finds_the_lock_free_is_told_nothing(tmp_path):
    told = []
    with checkout_lock(on_wait=told.append, path=tmp_path / "checkout.lock"):
        pass
    with checkout_lock(on_wait=told.append, path=tmp_path / "checkout.lock"):
        pass
    assert told == []


def test_a_ctrl_c_that_lands_while_the_note_is_printed_is_a_ctrl_c_while_waiting(tmp_path):
    """CI 2026-11-26: the SIGINT a user (or the test below) sends on reading the note can arrive
    before the note's print returns; that must still end as WaitInterrupted, not a traceback."""
    from harness.run_lock import WaitInterrupted

    def interrupted_while_telling(holder: str) -> None:
        raise KeyboardInterrupt("SIGINT")

    path = tmp_path / "checkout.lock"
    holder = _holder(path, 30.0)
    try:
        with pytest.raises(WaitInterrupted):
            with checkout_lock(on_wait=interrupted_while_telling, path=path):
                pytest.fail("the block ran without the lock")
    finally:
        holder.kill()
        holder.wait()


def test_a_lane_of_a_gpus_run_runs_under_its_parents_lock(tmp_path):
    """The lanes are the holder's children: started under the lock, they take it without waiting."""
    path = tmp_path / "checkout.lock"
    lane = f"""
import time
from pathlib import Path
from harness.run_lock import checkout_lock
start = time.monotonic()
with checkout_lock(on_wait=lambda holder: print("waited"), path=Path({str(path)!r})):
    print("lane", round(time.monotonic() - start))
"""
    with checkout_lock(path=path):
        done = subprocess.run([sys.executable, "-c", lane], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["lane", "0"], done.stdout + done.stderr


def test_a_live_process_named_that_did_not_start_this_one_holds_nothing(tmp_path, monkeypatch):
    """A name kept by a shell, or a pid reused, must not let a run past another's lock."""
    path = tmp_path / "checkout.lock"
    holder = _holder(path, 1.0)
    try:
        monkeypatch.setenv(LOCK_HELD_ENV, str(holder.pid))  # alive, but a child of this one, not its parent
        told, start = [], time.monotonic()
        with checkout_lock(on_wait=told.append, path=path):
            assert time.monotonic() - start >= 0.5 and len(told) == 1
    finally:
        holder.kill()
        holder.wait()


def test_the_holder_is_named_in_its_environment_so_what_it_calls_or_starts_does_not_wait_for_itself(tmp_path):
    path = tmp_path / "checkout.lock"
    with checkout_lock(path=path):
        assert os.environ[LOCK_HELD_ENV] == str(os.getpid())
        start = time.monotonic()
        with checkout_lock(path=path):  # in process: would wait for itself forever without the name
            pass
        child = subprocess.run([sys.executable, "-c", HOLDER, str(path), "0"], cwd=REPO, capture_output=True,
                               text=True, timeout=30)  # a child: the lanes of a --gpus run
        assert child.stdout.strip() == "held" and time.monotonic() - start < 20
    assert LOCK_HELD_ENV not in os.environ


def test_a_name_left_by_a_process_that_is_gone_holds_nothing(tmp_path, monkeypatch):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    monkeypatch.setenv(LOCK_HELD_ENV, gone.stdout.strip())
    holder = _holder(tmp_path / "checkout.lock", 1.0)
    told, start = [], time.monotonic()
    with checkout_lock(on_wait=told.append, path=tmp_path / "checkout.lock"):
        assert time.monotonic() - start >= 0.5  # it waited for the live holder, not for the name
    holder.wait(timeout=30)
    assert len(told) == 1


def test_a_tool_writes_into_the_checkout_only_under_the_lock_and_elsewhere_at_once(tmp_path, monkeypatch, capsys):
    """A tune's report, a probe's report, the leaderboard: written into the checkout while a run's
    vault watches it, the run would take them for its solution's tampering and delete them (measured
    2026-11-26: a file copied into results/tuning/ during a CPU run of pt-reference; 0 of 20 passed)."""
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "cache"))  # this test's lock file only
    monkeypatch.delenv(LOCK_HELD_ENV, raising=False)
    holder = _holder(lock_path(REPO), 1.5)
    try:
        start = time.monotonic()
        with writing_into([tmp_path / "report", None]):  # outside the checkout: no wait
            assert time.monotonic() - start < 1.0 and holder.poll() is None
        with writing_into([tmp_path / "report", REPO / "results" / "tuning" / "new"]):
            assert time.monotonic() - start >= 1.0  # the holder let go first (it held 1.5 s)
    finally:
        holder.kill()
        holder.wait()
    assert f"another command holds this checkout or its --results folder (pid {holder.pid} since " in capsys.readouterr().err


def test_a_ctrl_c_while_a_tool_waits_to_write_exits_130_having_written_nothing(tmp_path, monkeypatch, capsys):
    def interrupted(holder: str) -> None:
        raise KeyboardInterrupt("SIGINT")

    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(LOCK_HELD_ENV, raising=False)
    monkeypatch.setattr("harness.run_lock.say_waiting", interrupted)
    holder = _holder(lock_path(REPO), 30.0)
    try:
        with pytest.raises(SystemExit) as stopped:
            with writing_into([REPO / "results" / "tuning" / "new"]):
                pytest.fail("wrote without the lock")
    finally:
        holder.kill()
        holder.wait()
    assert stopped.value.code == 130 and STOPPED_WHILE_WAITING in capsys.readouterr().err


def test_the_command_line_run_waits_for_the_lock_says_so_and_then_judges(tmp_path, monkeypatch):
    """run_local.py under the lock: while another run holds this checkout's lock it waits, naming
    the holder; once the lock is free it judges as usual. (Before the lock, two CPU runs of
    pt-reference started together marked each other's workloads as tampering: 0 of 20 passed.)"""
    from conftest import write_small_dataset

    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "cache"))  # this test's lock file only
    monkeypatch.delenv(LOCK_HELD_ENV, raising=False)
    holder = _holder(lock_path(REPO), 120.0)
    dataset = write_small_dataset(tmp_path / "dataset")
    run = subprocess.Popen([sys.executable, "run_local.py", "--algo", "pt-reference", "--device", "cpu", "-n", "2",
                            "--budget", "0.2", "--workloads", str(dataset), "--results", str(tmp_path / "r"),
                            "--no-progress"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        note = run.stderr.readline()  # the run's first word on stderr: that it waits
        assert f"another command holds this checkout or its --results folder (pid {holder.pid} since " in note, note
        assert run.poll() is None  # still waiting
    finally:
        holder.communicate("go\n", timeout=30)  # let go of the lock
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err[-2000:]
    assert "2 passed, 0 failed" in out


def test_ctrl_c_while_waiting_for_the_lock_stops_the_run_with_130_and_judges_nothing(tmp_path, monkeypatch):
    import signal

    from conftest import write_small_dataset

    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(LOCK_HELD_ENV, raising=False)
    holder = _holder(lock_path(REPO), 120.0)
    run = subprocess.Popen([sys.executable, "run_local.py", "--algo", "pt-reference", "--device", "cpu",
                            "--workloads", str(write_small_dataset(tmp_path / "dataset")), "--results",
                            str(tmp_path / "r"), "--no-progress"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert "another command holds this checkout" in run.stderr.readline()
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        holder.communicate("go\n", timeout=30)
    assert run.returncode == 130, err[-2000:]
    assert STOPPED_WHILE_WAITING in err and "Traceback" not in err
    assert not list((tmp_path / "r").glob("runs/*"))  # the folder is checked writable up front; no run in it
