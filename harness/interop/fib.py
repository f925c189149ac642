"""flashinfer-bench, imported on demand with a clear error when it is missing.

flashinfer-bench (the contest's package, pinned in ``pyproject.toml``'s
``interop`` extra) is optional: only packing, exporting and trace conversion
need it. Its data models and builders import without a GPU and without
flashinfer-python (docs/interop.md).
"""

from __future__ import annotations

from types import ModuleType

from harness.errors import HarnessInputError
from harness.facts import FIB_VERSION  # noqa: F401  (re-exported: the release the contest used)


def import_fib(module: str = "flashinfer_bench.data") -> ModuleType:
    """``import module`` (a flashinfer-bench module).

    Raises:
        HarnessInputError: flashinfer-bench is not installed (the message says how to install it).
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise HarnessInputError("flashinfer-bench", None, (
            f"cannot import {module} ({exc}); install the contest's package: "
            f"pip install 'flashinfer-bench=={FIB_VERSION}' (or pip install -e '.[interop]')")) from exc
