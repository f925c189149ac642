"""scripts/gpu_judge_check.sh's start:/wait: pair, without a GPU: a background step runs from a copy
of the tree, and wait: comes back at once when there is nothing to wait for.

Both were learnt on an H200 on 2026-11-27: the device runner's copy of the working tree at a later
call broke a running step's fresh processes, and a wait: for a step that never started sat out its
whole WAIT_S."""

import shutil
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_judge_check.sh"


def check(tmp_path: Path, *steps: str, deadline_in_s: int | None = None, path: tuple = ("/usr/bin", "/bin")) -> str:
    """The script's console for ``steps``, with its start: files under ``tmp_path``; CALL_DEADLINE (a device
    call's end) ``deadline_in_s`` from now where given; ``path``: the PATH's folders, a stand-in's first."""
    env = {"PATH": ":".join(map(str, path)), "BG_DIR": str(tmp_path), "WAIT_S": "60", "GDN_BENCH_COMMIT": "test"}
    if deadline_in_s is not None:
        env["CALL_DEADLINE"] = str(int(time.time()) + deadline_in_s)
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), *steps], cwd=SCRIPT.parents[1], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_wait_without_start_returns_at_once(tmp_path):
    began = time.monotonic()
    console = check(tmp_path, "wait:parity")
    assert "no start:parity on this machine" in console
    assert time.monotonic() - began < 10


def test_started_step_runs_from_a_copy_and_wait_sees_it_end(tmp_path):
    check(tmp_path, "start:no-such-step")
    tree = tmp_path / "gdn-tree-no-such-step"
    assert (tree / "scripts" / "gpu_judge_check.sh").read_bytes() == SCRIPT.read_bytes()
    assert not (tree / ".git").exists()
    began = time.monotonic()
    console = check(tmp_path, "wait:no-such-step")
    assert "unknown step no-such-step" in console  # the step's own log, shown by wait:
    assert "no-such-step ended without packing" in console
    assert time.monotonic() - began < 30  # it ended: wait: did not sit out WAIT_S


def test_a_pack_appears_under_its_name_only_once_written(tmp_path):
    """wait:STEP copies STEP.tgz as soon as it exists, so tar writes the pack under another name and it
    is renamed when whole (on 2026-11-27 an H200 cross-check's pack was copied while tar was still
    writing it: 0 bytes came back)."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "report.md").write_text("figures\n")
    (tmp_path / "out").mkdir()
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "tar").write_text(f'#!/bin/bash\necho "$2" >> {tmp_path / "written"}\nexec {shutil.which("tar")} "$@"\n')
    (stub / "tar").chmod(0o755)
    script = (f'export PATH={stub}:$PATH; eval "$(grep "^pack()" {SCRIPT})"; OUT={tmp_path / "out"}; '
              f'pack step {tmp_path / "work"}')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "written").read_text().split()
    assert written and all(Path(path).name != "step.tgz" for path in written)  # never under the name wait: takes
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["step.tgz"]
    listed = subprocess.run(["tar", "tzf", str(tmp_path / "out" / "step.tgz")], capture_output=True, text=True)
    assert "./report.md" in listed.stdout.split()


def test_wait_stops_before_the_calls_deadline(tmp_path):
    """A step still running: wait: sits out WAIT_S, or stops 20 s before CALL_DEADLINE (a device call's limit,
    set at its start), whichever comes first, and says how to wait again."""
    bg = tmp_path / "gdn-bg-slow"
    bg.mkdir()
    (tmp_path / "gdn-bg-slow.log").write_text("running\n")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "gdn-bg-slow.pid").write_text(str(sleeper.pid))
        began = time.monotonic()
        console = check(tmp_path, "wait:slow", deadline_in_s=22)
        assert "slow still running" in console and "call wait:slow again" in console
        assert time.monotonic() - began < 15  # 22 s to the deadline, less its 20 s margin: not WAIT_S's 60
    finally:
        sleeper.kill()


def slow_probe(tmp_path: Path) -> tuple:
    """PATH folders for :func:`check` with a stand-in ``python`` (a step's probe) first, which prints a line and
    sleeps 30 s."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python").write_text("#!/bin/bash\necho probing\nexec sleep 30\n")
    (stub / "python").chmod(0o755)
    return stub, "/usr/bin", "/bin"


def test_start_hands_back_the_callers_pipe_at_once(tmp_path):
    """start:STEP returns while STEP runs, even when its console is read through a pipe (on 2026-11-28 a
    `start:parity | tail -3` on an H200 sat until the cross-check ended, 9 minutes, and the steps after it
    in that call lost their time): nothing the started step runs may keep the caller's stdout open. And the
    started step outlives the call: the call's CALL_DEADLINE does not cut it."""
    path = slow_probe(tmp_path)
    began = time.monotonic()
    console = check(tmp_path, "start:idle-start", deadline_in_s=31, path=path)
    took = time.monotonic() - began
    pid_file = tmp_path / "gdn-bg-idle-start.pid"
    for _ in range(50):
        if pid_file.exists():
            break
        time.sleep(0.1)
    time.sleep(max(0.0, began + 4 - time.monotonic()))  # past the 1 s a deadline-cut step would have had
    still_running = subprocess.run(["kill", "-0", pid_file.read_text().strip()]).returncode == 0
    if pid_file.exists() and shutil.which("pkill"):  # best effort: the stub's sleep ends by itself in 30 s
        subprocess.run(["pkill", "-s", pid_file.read_text().strip()])  # the started session, sleep and all
    assert "started idle-start" in console
    assert took < 20  # the step's 30-s sleep ran on without holding the caller
    assert still_running


def test_a_step_stops_before_the_calls_deadline_and_packs(tmp_path):
    """With CALL_DEADLINE set, a step's own limit (idle-start: 300 s) is cut to 30 s before it, so the step is
    stopped, writes its console and packs it before the device call's limit ends the command with nothing back."""
    path = slow_probe(tmp_path)
    began = time.monotonic()
    console = check(tmp_path, "idle-start", deadline_in_s=32, path=path)
    assert time.monotonic() - began < 20  # 32 s to the deadline less the 30-s margin, not the probe's 300 s
    assert "probing" in console and "packed" in console
    assert (tmp_path / "out" / "idle-start.tgz").exists()
