"""Importing flashinfer-bench, the contest's package, the one way every part of the harness does:
the judge reading a contest entry (:mod:`harness.judge.entries`) and the interop commands
(:mod:`harness.interop`) alike. Without it, a clear error that says how to install it."""

from __future__ import annotations

import importlib
from types import ModuleType

from harness.errors import HarnessInputError
from harness.facts import FIB_VERSION


def import_fib(module: str = "flashinfer_bench.data", needed_for: str = "") -> ModuleType:
    """``import module`` (a flashinfer-bench module).

    Args:
        module: the module's dotted name.
        needed_for: what needs it, said in the error (``"reading a contest entry"``).

    Raises:
        HarnessInputError: flashinfer-bench is not installed (the message says how to install it).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why = f"{needed_for} needs the contest's package" if needed_for else "install the contest's package"
        raise HarnessInputError("flashinfer-bench", None, (
            f"cannot import {module} ({exc}); {why}: pip install 'flashinfer-bench=={FIB_VERSION}' "
            "(or pip install -e '.[interop]')")) from exc
