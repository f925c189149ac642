"""The main job, as the README runs it, on a machine without a GPU."""

import json
import subprocess
import sys

from conftest import REPO


def test_run_local_pt_reference_on_cpu_passes_contest_v1(tmp_path):
    cmd = [sys.executable, "run_local.py", "--algo", "pt-reference", "--device", "cpu", "-n", "2",
           "--budget", "0.2", "--results", str(tmp_path), "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = [json.loads(l) for l in next(tmp_path.glob("runs/*/traces.jsonl")).read_text().splitlines()]
    ours = [t for t in traces if t["solution"] == "pt-reference"]
    assert len(ours) == 20 and all(t["evaluation"]["status"] == "PASSED" for t in ours)
    assert all(t["evaluation"]["performance"]["headline_tier"] == "wallclock" for t in ours)
    assert "20 passed, 0 failed" in proc.stdout
    assert next(tmp_path.glob("runs/*/summary.csv")).exists()


def test_bad_arguments_exit_nonzero(tmp_path):
    proc = subprocess.run([sys.executable, "run_local.py", "--algo", "nope", "--device", "cpu", "--results",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unknown solution" in proc.stderr


def _workers_of(marker: str) -> list[int]:
    """Live processes whose command line mentions ``marker`` (the run's own temp path)."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace") + str((proc / "cwd").resolve()):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_ctrl_c_writes_what_finished_kills_the_worker_and_exits_130(tmp_path):
    import os
    import signal
    import time

    from conftest import FIXTURE_SOLUTIONS, write_small_dataset

    dataset = write_small_dataset(tmp_path / "dataset")
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the judge's private folders land here: findable below
    cmd = [sys.executable, "run_local.py", "--algo", "good,hangs", "--device", "cpu", "-n", "1", "--budget", "0.2",
           "--workloads", str(dataset), "--solutions", str(FIXTURE_SOLUTIONS), "--results", str(tmp_path / "r"),
           "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not any("hangs" in p.name for p in tmp_path.glob("gdn-judge-*/*")):  # the hanging worker started
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    traces = [json.loads(l) for l in next(tmp_path.glob("r/runs/*/traces.jsonl")).read_text().splitlines()]
    assert [t["evaluation"]["status"] for t in traces if t["solution"] == "good"] == ["PASSED", "PASSED"]
    assert "interrupted" in err
    time.sleep(0.5)
    assert _workers_of(str(tmp_path / "gdn-judge-")) == []
