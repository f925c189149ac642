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
