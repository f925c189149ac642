"""The maps are true: every file path and ``harness`` module that the README, ``docs/`` and the
packages' ``__init__`` docstrings name exists, so a newcomer following them never lands nowhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAPS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "harness").rglob("__init__.py"))]
#: Paths the maps name that a clone does not hold: an example to create, the folder a run writes.
NOT_IN_A_CLONE = ("solutions/my-kernel", "results/local")
PATH = re.compile(r"(?<![\w/.-])((?:harness|tools|scripts|tests|solutions|docs|workloads|results)/[\w./-]*\w)")
MODULE = re.compile(r"(?<![\w.])(harness(?:\.\w+)+)")


def named_paths(text: str) -> set[str]:
    return {m.group(1) for m in PATH.finditer(text)
            if "*" not in m.group(1) and not m.group(1).startswith(NOT_IN_A_CLONE)}


def module_exists(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the harness, or a name after one (``harness.judge.run.run_benchmark``);
    a name after a package must be one of its modules (the packages' ``__init__`` define nothing)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:n])
        if base.with_suffix(".py").is_file():
            return True
        if (base / "__init__.py").is_file():
            return n == len(parts)
    return False


def test_every_path_the_maps_name_exists():
    missing = [(doc.relative_to(REPO).as_posix(), path) for doc in MAPS for path in sorted(named_paths(doc.read_text()))
               if not (REPO / path).exists()]
    assert missing == []


def test_every_harness_module_the_maps_name_exists():
    missing = [(doc.relative_to(REPO).as_posix(), name) for doc in MAPS
               for name in sorted({m.group(1) for m in MODULE.finditer(doc.read_text())}) if not module_exists(name)]
    assert missing == []


def test_the_checker_sees_a_module_that_is_gone():
    assert not module_exists("harness.judge.orchestrate.run_benchmark")
    assert module_exists("harness.judge.run.run_benchmark") and module_exists("harness.judge")
    assert named_paths("see harness/judge/run.py and tools/x.py, solutions/my-kernel, results/local/runs") == {
        "harness/judge/run.py", "tools/x.py"}
