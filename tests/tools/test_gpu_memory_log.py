"""The GPU memory log (tools/gpu_memory_log.py) on the CPU, with a stand-in nvidia-smi on PATH: it logs each
process it is told of with its command line until stopped, and sums the log up by process."""

import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from tools import gpu_clock_log, gpu_memory_log


@pytest.fixture
def stand_in_smi(tmp_path, monkeypatch):
    """An nvidia-smi that reports this test's process at 1,500 MiB and pid 1 at 30 MiB, plus a line that is not
    a reading, as the compute-apps query prints them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{os.getpid()}, 1500'\necho '1, 30'\necho 'No devices were found'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return smi


def test_it_logs_every_process_with_its_command_line_until_stopped(stand_in_smi, tmp_path):
    path = tmp_path / "gpu_memory.csv"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    logger = subprocess.Popen([sys.executable, "-m", "tools.gpu_memory_log", "log", str(path), "--every", "0.05"],
                              env=env, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(gpu_memory_log.read(path) if path.exists() else []) < 4:
        time.sleep(0.05)
    gpu_clock_log.stop(logger)
    assert logger.returncode == 0  # SIGTERM ends the loop, not the process mid-row
    table = {e["pid"]: e for e in gpu_memory_log.by_process(gpu_memory_log.read(path))}
    assert set(table) == {os.getpid(), 1}
    assert table[os.getpid()]["max_mib"] == 1500 and table[os.getpid()]["readings"] >= 2
    assert "pytest" in table[os.getpid()]["command"] or "python" in table[os.getpid()]["command"]


def test_each_process_reads_its_most_and_when_it_was_seen(tmp_path):
    path = tmp_path / "gpu_memory.csv"
    path.write_text("time,pid,mib,command\n100.0,7,500,python run_local.py\n100.5,7,4200,python run_local.py\n"
                    "101.0,9,2300,python -m harness.judge.worker\n101.5,7,3900,python run_local.py\n102.0,9,x,cut\n")
    judge, worker = gpu_memory_log.by_process(gpu_memory_log.read(path))
    assert (judge["pid"], judge["max_mib"], judge["first_s"], judge["last_s"], judge["readings"]) == (7, 4200, 0, 1.5, 3)
    assert (worker["pid"], worker["max_mib"], worker["first_s"], worker["readings"]) == (9, 2300, 1.0, 1)
    assert worker["command"] == "python -m harness.judge.worker"


def test_without_nvidia_smi_the_logger_says_why_and_exits_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_memory_log.shutil, "which", lambda name: None)
    assert gpu_memory_log.main(["log", str(tmp_path / "gpu_memory.csv")]) == 2
    assert "nvidia-smi" in capsys.readouterr().err
    assert gpu_memory_log.main(["summary", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in capsys.readouterr().err


def test_a_file_that_is_no_such_log_is_named_and_exits_2(tmp_path, capsys):
    other = tmp_path / "summary.csv"  # a run's summary, say: a CSV without the log's columns
    other.write_text("solution,workload\na,b\n")
    binary = tmp_path / "log.csv.gz"
    binary.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    for path, said in ((other, "no time, pid, mib, command column"), (binary, "not text")):
        assert gpu_memory_log.main(["summary", str(path)]) == 2
        assert f"{path}: not a GPU memory log ({said})" in capsys.readouterr().err


def test_a_log_whose_header_is_not_written_yet_has_no_rows(tmp_path):
    """The logger creates its file before its header lands: a reader polling it (the logging test above, under a
    loaded machine) must see no rows, not an error."""
    (tmp_path / "gpu_memory.csv").write_text("")
    assert gpu_memory_log.read(tmp_path / "gpu_memory.csv") == []
