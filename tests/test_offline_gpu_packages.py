"""scripts/offline_gpu_packages.sh without a GPU or an index: its install step puts the wheels into the site
folder without their dependencies and compiles the bytecode of that folder and of the image's torch, triton and
einops (a stand-in python records what it is asked), and a wrong step is exit 2 with its usage."""

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "offline_gpu_packages.sh"

STAND_IN = """#!/bin/sh
echo "$@" >> "$CALLS"
case "$*" in *"import os, einops"*) echo /img/torch /img/triton /img/einops ;; esac
"""


def test_install_takes_the_wheels_without_dependencies_and_compiles_the_bytecode(tmp_path):
    python, calls = tmp_path / "python", tmp_path / "calls"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "pydantic-2.13.4-py3-none-any.whl").write_bytes(b"")
    done = subprocess.run(["bash", str(SCRIPT), "install", str(tmp_path / "w"), str(tmp_path / "site")],
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(python), "CALLS": str(calls)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pip, _, compileall = calls.read_text().splitlines()
    assert pip.startswith("-m pip install") and "--no-deps" in pip and "--no-index" in pip
    assert f"--target {tmp_path / 'site'}" in pip and pip.endswith("pydantic-2.13.4-py3-none-any.whl")
    assert compileall.startswith("-m compileall")
    assert compileall.endswith(f"{tmp_path / 'site'} /img/torch /img/triton /img/einops")


def test_an_unknown_step_is_exit_2_with_the_usage():
    done = subprocess.run(["bash", str(SCRIPT), "fetch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage" in done.stderr
