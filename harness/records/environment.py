"""The hardware and software a trace was measured on (flashinfer-bench ``Environment``)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from functools import lru_cache

import torch

#: Distributions whose versions every trace records (absent ones are skipped).
TRACKED_PACKAGES = ("torch", "triton", "nvidia-cutlass-dsl", "flashinfer-python", "apache-tvm-ffi",
                    "cupti-python", "fla-core", "numpy")


def hardware_name(device: str) -> str:
    """GPU name (e.g. ``NVIDIA H100 80GB HBM3``) or ``CPU <processor>``."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU {platform.processor() or platform.machine()}"


@lru_cache(maxsize=1)
def driver_version() -> str:
    """NVIDIA driver version from nvidia-smi, or '' where there is none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def git_commit() -> str:
    """Commit of the code being run: ``$GDN_BENCH_COMMIT`` when set (for a
    copy of the tree whose own git history is not the source's, e.g. a
    benchmark machine that receives the working tree), else ``git rev-parse``
    with ``-dirty`` appended when tracked files differ from it; '' outside a
    git checkout."""
    from harness.paths import REPO_ROOT

    if os.environ.get("GDN_BENCH_COMMIT"):
        return os.environ["GDN_BENCH_COMMIT"]
    try:
        out = subprocess.run(["git", "describe", "--always", "--abbrev=12", "--dirty"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def libs() -> dict[str, str]:
    """Versions of the tracked packages installed here, plus CUDA and driver."""
    versions = {}
    for dist in TRACKED_PACKAGES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    if driver_version():
        versions["driver"] = driver_version()
    return versions


def environment(device: str) -> dict:
    """The trace's ``environment`` object."""
    return {"hardware": hardware_name(device), "libs": libs()}
