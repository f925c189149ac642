"""The hardware and software a trace was measured on (flashinfer-bench ``Environment``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import subprocess
import tomllib
from functools import lru_cache
from pathlib import Path

import torch

#: Distributions whose versions every trace records (absent ones are skipped).
TRACKED_PACKAGES = ("torch", "triton", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu13", "flashinfer-python",
                    "apache-tvm-ffi", "cupti-python", "fla-core", "flashinfer-bench", "numpy")
#: The pyproject extra that pins the versions GPU results were measured with (run_modal's image installs it).
PINNED_EXTRA = "gpu"


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
    """The trace's ``environment`` object (the device named as ``cuda:N`` or ``cpu``)."""
    if str(device) == "cuda" and torch.cuda.is_available():
        device = f"cuda:{torch.cuda.current_device()}"
    return {"hardware": hardware_name(device), "libs": libs(), "device": str(device)}


def requirement_name(requirement: str) -> str:
    """The distribution a requirement string names, normalized (``torch`` of ``torch==2.11.0``,
    ``nvidia-cutlass-dsl`` of ``nvidia_cutlass_dsl[cu13]>=4``)."""
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def pinned_versions(pyproject: Path | None = None) -> dict[str, str]:
    """``{distribution: version}`` of the exact (``==``) pins in pyproject.toml's
    :data:`PINNED_EXTRA` extra; {} where there is no pyproject.toml (an installed copy)."""
    from harness.paths import REPO_ROOT

    path = pyproject or REPO_ROOT / "pyproject.toml"
    if not path.is_file():
        return {}
    extra = tomllib.loads(path.read_text())["project"]["optional-dependencies"].get(PINNED_EXTRA, [])
    return {requirement_name(r): r.split("==", 1)[1].split(";")[0].strip() for r in extra if "==" in r}


def version_drift(installed: dict[str, str], pins: dict[str, str] | None = None) -> list[str]:
    """``"<distribution> <installed> (pinned <version>)"`` for every pinned distribution that is
    installed at another version (``installed``: :func:`libs`). A GPU run says so: its figures
    may not compare with the results measured at the pins."""
    pins = pinned_versions() if pins is None else pins
    # a local version label names the build, not the release: 2.11.0+cu130 is torch 2.11.0
    return [f"{name} {installed[name]} (pinned {pin})" for name, pin in pins.items()
            if name in installed and installed[name].split("+")[0] != pin]


#: How many of a package's source files :func:`without_bytecode` looks at (enough to tell a
#: package installed without bytecode from one whose bytecode a few modules lack).
BYTECODE_SAMPLE = 200


def without_bytecode(modules) -> dict[str, str]:
    """``{module: its folder}`` for every importable top-level package among ``modules`` most of
    whose ``.py`` files (of the first :data:`BYTECODE_SAMPLE`, sorted) have no bytecode cached for
    this interpreter (``importlib.util.cache_from_source``). Nothing is imported (``find_spec`` of
    a top-level name reads no module); single-file modules, built-in, frozen and missing ones are
    left out.

    Why a run says so: the judge's workers write no bytecode (``PYTHONDONTWRITEBYTECODE``; a
    solution must not leave bytecode for a later worker to load), so a package installed without
    it (``pip install --no-compile``, a wheel unzipped) is compiled from source by every worker
    that imports it: on an H100, 4.4 s more for FlashInfer's import, 5.4 s for fla's and 1.7 s for
    the CuTe DSL's, in each worker: about 23 s of contest-v1's ``--algo all``
    (results/judge-check/20261127-H100-v1-all-b08646d).
    """
    found = {}
    for name in dict.fromkeys(modules):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations or not spec.origin or not spec.origin.endswith(".py"):
            continue
        folder = Path(spec.origin).parent
        sources = sorted(folder.rglob("*.py"))[:BYTECODE_SAMPLE]
        missing = sum(not Path(importlib.util.cache_from_source(str(source))).exists() for source in sources)
        if sources and missing * 2 > len(sources):
            found[name] = str(folder)
    return found

