"""The main job, as the README runs it, on a machine without a GPU."""

import json
import subprocess
import sys

import pytest

from conftest import REPO


def test_run_local_pt_reference_on_cpu_passes(tmp_path):
    """The README's quick start without a GPU (``--device cpu``), for one solution on a two-workload
    dataset (the default set's tensors are checked by tests/data/test_generator.py; its 20 workloads
    would only repeat these two)."""
    from conftest import write_small_dataset

    dataset = write_small_dataset(tmp_path / "dataset")
    results = tmp_path / "results"
    cmd = [sys.executable, "run_local.py", "--algo", "pt-reference", "--device", "cpu", "-n", "2",
           "--budget", "0.2", "--workloads", str(dataset), "--results", str(results), "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = [json.loads(l) for l in next(results.glob("runs/*/traces.jsonl")).read_text().splitlines()]
    ours = [t for t in traces if t["solution"] == "pt-reference"]
    assert len(ours) == 2 and all(t["evaluation"]["status"] == "PASSED" for t in ours)
    assert all(t["evaluation"]["performance"]["headline_tier"] == "wallclock" for t in ours)
    timers = {t["evaluation"]["performance"]["tiers"]["wallclock"]["timer"] for t in ours}  # which timer, how set
    assert len(timers) == 1 and timers.pop().startswith("timing core: the host's monotonic clock")
    assert "2 passed, 0 failed" in proc.stdout
    assert next(results.glob("runs/*/summary.csv")).exists()
    written = {p.relative_to(results).parts[0] for p in results.rglob("*") if p.is_file()}
    assert written == {"runs"}  # the run folder only: no leaderboard.csv, no plots
    assert "2/2" in proc.stdout  # the one-row-per-solution summary


def test_a_solution_json_that_cannot_be_read_is_named_and_exits_2(capsys, tmp_path):
    from conftest import write_small_dataset

    (tmp_path / "entry.json").write_text('{"name": "x", "definition": "gdn_decode_qk4_v8_d128_k_last"}')
    status, err = _main(["--solutions", str(tmp_path / "entry.json"), "--device", "cpu", "--no-progress",
                         "--workloads", str(write_small_dataset(tmp_path / "dataset")),
                         "--results", str(tmp_path / "r")], capsys)
    assert status == 2 and f"{tmp_path / 'entry.json'}: field 'author': Field required" in err


def test_bad_arguments_exit_nonzero(tmp_path):
    proc = subprocess.run([sys.executable, "run_local.py", "--algo", "nope", "--device", "cpu", "--results",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unknown solution(s) nope; available: cuda-v1, cuda-v4," in proc.stderr


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


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_ctrl_c_writes_what_finished_kills_the_worker_and_exits_130(tmp_path, stop):
    import os
    import signal
    import time

    from conftest import FIXTURE_SOLUTIONS, write_small_dataset

    dataset = write_small_dataset(tmp_path / "dataset")
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the judge's private folders land here: findable below
    cmd = [sys.executable, "run_local.py", "--algo", "good,hangs", "--device", "cpu", "-n", "1", "--budget", "0.2",
           "--workloads", str(dataset), "--solutions", str(FIXTURE_SOLUTIONS), "--results", str(tmp_path / "r"),
           "--no-progress"]
    # started with SIGINT ignored, as a background job of a script is: the judge must still stop on it
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 240
    while not any("hangs" in p.name for p in tmp_path.glob("gdn-judge-*/*")):  # the hanging worker started
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)  # into its hang, or still loading: either way the judge must stop and keep what finished
    proc.send_signal(getattr(signal, stop))
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # show where the judge was stuck (SIGUSR1 dumps its stacks), then fail
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the judge did not exit within 60 s of Ctrl-C; stderr: {err[-3000:]}; stdout: {out[-2000:]}")
    assert proc.returncode == 130, err[-2000:]
    traces = [json.loads(l) for l in next(tmp_path.glob("r/runs/*/traces.jsonl")).read_text().splitlines()]
    assert [t["evaluation"]["status"] for t in traces if t["solution"] == "good"] == ["PASSED", "PASSED"]
    assert "interrupted" in err
    time.sleep(0.5)
    assert _workers_of(str(tmp_path / "gdn-judge-")) == []


# ------------------------------------------------------------- bad command lines: exit 2, a message, no traceback

def _main(argv, capsys):
    """``harness.cli.main(argv)``: (exit status, stderr); argparse's errors exit through SystemExit."""
    from harness.cli import main

    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


@pytest.mark.parametrize("argv, words", [
    (["--device", "gpu"], "choose cpu, cuda or cuda:N"),
    (["--device", "cpu:0"], "choose cpu, cuda or cuda:N"),
    (["-n", "0"], "--trials: 0 must be >= 1"),
    (["-n", "-1"], "--trials: -1 must be >= 1"),
    (["--iters", "0"], "--iters: 0 must be >= 1"),
    (["--warmup", "-1"], "--warmup: -1 must be >= 0"),
    (["--budget", "-2"], "--budget: -2 must be > 0"),
    (["--budget", "nan"], "--budget: nan must be > 0"),
    (["--atol", "-0.1"], "--atol: -0.1 must be >= 0"),
    (["--rtol", "x"], "--rtol: 'x' is not a number"),
    (["--min-iters", "0"], "--min-iters: 0 must be >= 1"),
    (["--sync-trials", "0"], "--sync-trials: 0 must be >= 1"),
    (["--warm-seconds", "-1"], "--warm-seconds: -1 must be >= 0"),
    (["--keep-warm-seconds", "-0.1"], "--keep-warm-seconds: -0.1 must be >= 0"),
    (["--max-noise", "nan"], "--max-noise: nan must be >= 0"),
    (["--workload-timeout", "0"], "--workload-timeout: 0 must be > 0"),
    # past any sensible run: these used to pass here and crash the run later (OverflowError, struct.error)
    (["--budget", "inf"], "--budget: inf must be <= 86400"),
    (["--budget", "1e300"], "--budget: 1e300 must be <= 86400"),
    (["--startup-timeout", "1e10"], "--startup-timeout: 1e10 must be <= 86400"),
    (["--iters", "10000001"], "--iters: 10000001 must be <= 1e+06"),
    (["--algo", " , "], "--algo ' , ' names no solution; available: all, "),
    (["--tiers", "cupti,fast"], "unknown tier(s) fast; choose from cupti, contest, events, sync, wallclock"),
    (["--solutions", "/no/such/folder"], "--solutions /no/such/folder: no such folder or file"),
    (["--rules", "lenient"], "argument --rules: invalid choice: 'lenient'"),
    (["--workloads", "contest-v9"], "neither a workload set"),
])
def test_a_bad_option_is_named_and_exits_2(argv, words, capsys, tmp_path):
    status, err = _main(argv + ["--results", str(tmp_path / "r"), "--no-progress"], capsys)
    assert status == 2 and words in err


def test_cuda_asked_where_there_is_none_is_named_and_exits_2(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    status, err = _main(["--device", "cuda", "--results", str(tmp_path)], capsys)
    assert status == 2 and "no such CUDA device here" in err


def test_results_that_is_a_file_or_cannot_be_written_exits_2(capsys, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("")
    status, err = _main(["--results", str(file)], capsys)
    assert status == 2 and "is a file, not a folder" in err
    status, err = _main(["--results", str(file / "below")], capsys)
    assert status == 2 and "cannot be created" in err


def test_results_whose_runs_is_a_file_exits_2(capsys, tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "runs").write_text("")
    status, err = _main(["--algo", "pt-reference", "--device", "cpu", "--results", str(tmp_path / "r")], capsys)
    assert status == 2 and "its runs is a file, not a folder" in err


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_workload_file_is_named_and_exits_2(content, capsys, tmp_path):
    from conftest import write_small_dataset

    dataset = write_small_dataset(tmp_path / "dataset")
    jsonl = next(dataset.glob("workloads/*/*.jsonl"))
    jsonl.write_text(content)
    status, err = _main(["--algo", "pt-reference", "--device", "cpu", "--workloads", str(dataset),
                         "--results", str(tmp_path / "r"), "--no-progress"], capsys)
    assert status == 2 and str(jsonl) in err and "no workloads" in err


def test_help_documents_every_option_and_lists_the_solutions(capsys):
    from harness.cli import build_parser
    from harness.judge.solutions import discover

    parser = build_parser()
    undocumented = [a.dest for a in parser._actions if not a.help]
    assert not undocumented
    text = parser.format_help()
    assert all(name in text for name in discover())


def test_a_run_writes_where_git_does_not_look():
    """A newcomer's first run must leave `git status` clean: the default run folder is ignored
    (and the run writes nothing else: see the end-to-end test above)."""
    import shutil

    from harness.cli import build_parser
    from harness.paths import LOCAL_RESULTS_DIR

    assert build_parser().parse_args([]).results == LOCAL_RESULTS_DIR
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    probe = (LOCAL_RESULTS_DIR / "runs" / "20260101T000000Z_CPU_contest-v1" / "traces.jsonl").relative_to(REPO)
    assert subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=REPO).returncode == 0
