"""Import a solution the way the judge runs it, without building anything.

The folder is copied into a directory of the caller's and the copy is
imported as a package, so the entry's relative imports resolve inside the
copy and nothing outside it is reachable through ``__file__``. Unlike
:func:`harness.judge.solutions.load_solution` this compiles no CUDA
``sources`` (a CPU test that only reads a launch table needs no nvcc), and
each copy gets a package name of its own (``gdn_copy_<n>_<name>``), so a
solution cannot rely on the name the judge gives it, and a copy never
replaces a solution another test loaded through the harness.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import itertools
import re
import shutil
import sys
from pathlib import Path, PurePosixPath
from types import ModuleType

from harness.judge.solutions import load_meta

_COPIES = itertools.count()


def import_copy(folder: str | Path, root: str | Path, hide_gpu: bool = False) -> ModuleType:
    """Copy ``folder`` under ``root`` and import the copy's entry module as a
    submodule of a fresh package; returns the entry module. ``hide_gpu``: import it as if no GPU
    were visible (``torch.cuda.is_available()`` False while it imports), for a test that reads
    what an entry declares on a GPU machine too: cuda-v4's loads its built library at import
    wherever a GPU is visible, and a copy has none."""
    meta = load_meta(Path(folder))
    package = f"gdn_copy_{next(_COPIES)}_{re.sub(r'[^0-9a-zA-Z_]', '_', meta.name)}"
    target = Path(root) / package
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    init = target / "__init__.py"
    if init.is_file():  # a package of its own: run its __init__.py as the judge does
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(target)])
    else:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [str(target)]
    entry = ".".join(PurePosixPath(meta.entry).with_suffix("").parts)
    try:
        sys.modules[package] = importlib.util.module_from_spec(spec)
        if init.is_file():
            spec.loader.exec_module(sys.modules[package])
        if not hide_gpu:
            return importlib.import_module(f"{package}.{entry}")
        from unittest import mock

        with mock.patch("torch.cuda.is_available", return_value=False):
            return importlib.import_module(f"{package}.{entry}")
    except BaseException:
        _forget_package(package)
        raise


def forget(module: ModuleType) -> None:
    """Drop a copy's package and all its modules from ``sys.modules``."""
    _forget_package(module.__name__.split(".")[0])


def _forget_package(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
