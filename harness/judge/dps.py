"""The positional destination-passing entry: the one form in which a solution is judged and shipped.

The contest calls a solution in destination-passing style (DPS) with positional arguments in
definition order, ``run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state)``,
and reads the destinations afterwards; whatever ``run`` returns is not looked at. This
project's solutions are written as ``run(inputs)`` on one dict (docs/solutions.md). So that
what is judged is what is submitted, the judge calls every solution only through the entry
:func:`entry_source` generates, and ``python -m harness pack`` ships that same entry
(:mod:`harness.interop.pack`):

* a Python, Triton or CuTe DSL solution gets :data:`ENTRY_FILE`, whose ``run`` takes the
  positional arguments and calls the solution's ``run(inputs)`` (an in-place solution gets the
  state copied into ``new_state`` first, inside the call, as the contest would time it);
* a CUDA solution that names its ``ffi_function`` is called as the contest's TVM-FFI builder
  calls it: the generated entry loads the library the harness built from its ``sources`` and
  ``run`` *is* the exported function; the solution's Python entry is not used by the judge.
  (Packing ships the sources and ``<first source>::<ffi_function>``; the contest builds them.)
  A CUDA solution without ``ffi_function`` has no contest form and is called like a Python one;
* a contest entry (a flashinfer-bench Solution or starter-kit folder, :mod:`harness.judge.entries`)
  is called as flashinfer-bench calls it: a destination-passing function *is* ``run`` (Python, or a
  TVM-FFI library's exported function); a value-returning one is timed as flashinfer-bench's
  evaluator times it, the function on the inputs and no copy: ``run`` returns its results' data
  pointers and the timing core copies them into the destinations after its timer has stopped
  (``HANDS_OVER``; ``contest_call`` and ``deliver`` serve the contest tier and the worker's
  untimed calls, :data:`ENTRY_DEFAULTS`); a ``torch``-binding entry's function comes from the
  PyTorch extension the harness built.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.data.definition import Definition
from harness.judge.solutions import (SolutionLoadError, SolutionMeta, build_library, import_package, materialize,
                                     snapshot_files)

#: The generated entry's file in a solution's private copy and in a packed submission.
ENTRY_FILE = "dps_entry.py"
#: Its module name inside the solution's package.
ENTRY_MODULE = "dps_entry"
#: Languages whose sources the harness compiles (a contest entry's ``cuda`` or ``cpp``; ours: ``cuda``).
COMPILED_LANGUAGES = ("cuda", "cpp")


def argument_order(definition: Definition) -> list[str]:
    """The positional arguments of the entry: the definition's inputs, then its outputs."""
    return [*definition.inputs, *definition.outputs]


def calls_ffi_directly(meta: SolutionMeta) -> bool:
    """Whether the entry is the CUDA library's exported function itself (see module doc)."""
    return meta.language == "cuda" and bool(meta.ffi_function)


def entry_source(meta: SolutionMeta, definition: Definition) -> str:
    """The text of :data:`ENTRY_FILE` for ``meta`` (see module doc)."""
    if meta.calling != "dict":
        return _contest_entry(meta, definition)
    if calls_ffi_directly(meta):
        return _ffi_entry(meta)
    return _dict_entry(meta, definition)


def torch_extension_name(meta: SolutionMeta) -> str:
    """The module name a ``torch``-binding entry's extension is built and imported under (its
    ``PyInit_`` symbol: ``TORCH_EXTENSION_NAME`` at the build)."""
    return f"{meta.package_name}_torch"


def with_entry(meta: SolutionMeta, definition: Definition, files: dict[str, bytes]) -> dict[str, bytes]:
    """A solution snapshot (relative path -> bytes) with the generated entry added.

    Raises:
        SolutionLoadError: the folder already has a file named :data:`ENTRY_FILE`.
    """
    if ENTRY_FILE in files:
        raise SolutionLoadError(meta.directory / ENTRY_FILE, None,
                                "is the name of the entry the harness generates; rename it")
    return {**files, ENTRY_FILE: entry_source(meta, definition).encode()}


def load_entry(meta: SolutionMeta, definition: Definition, workdir: Path):
    """The entry's ``run`` in this process, from a copy of the solution (CUDA: with the harness's
    build) written into ``workdir``: what the judge's worker calls, for tools and tests that call
    it directly (a value-returning contest entry's ``run`` leaves its results to its module's
    ``deliver``). Exceptions from the solution's code propagate.

    Raises:
        SolutionLoadError: see :func:`with_entry`.
        harness.judge.build.CompileError: a CUDA build failed.
    """
    files = with_entry(meta, definition, snapshot_files(meta.directory))
    return import_package(meta.package_name, ENTRY_MODULE, materialize(meta, files, workdir, build_library(meta))).run


def _dict_entry(meta: SolutionMeta, definition: Definition) -> str:
    arguments = argument_order(definition)
    body = []
    if meta.inplace_state:
        body += ["    if state is None:  # the optional state left out: a zero state",
                 "        new_state.zero_()",
                 "    else:",
                 "        new_state.copy_(state)",
                 "    state = new_state"]
    items = ", ".join(f"{json.dumps(n)}: {n}" for n in arguments)
    body.append(f"    _run_dict({{{items}}})")
    return "\n".join([
        f'"""Positional destination-passing entry of {meta.name}, generated by the harness.',
        "",
        "The contest (and the judge) call a solution with the definition's inputs, then its",
        "outputs, as positional arguments; this solution's own entry is run(inputs) on one dict",
        f'({meta.entry}). This file only repacks the arguments."""',
        "",
        f"from .{meta.entry_module} import run as _run_dict",
        "",
        "",
        f"def run({', '.join(arguments)}):",
        *body,
        "",
    ])


def _ffi_entry(meta: SolutionMeta) -> str:
    return "\n".join([
        f'"""Positional destination-passing entry of {meta.name}, generated by the harness: the',
        f"function {meta.ffi_function} that {meta.sources[0]} exports, loaded from the library the harness",
        'built as the contest\'s TVM-FFI builder loads it (the solution\'s Python entry is not used)."""',
        "",
        *_tvm_ffi_lines(meta.library_name, meta.ffi_function, "run"),
        "",
    ])


def _tvm_ffi_lines(library_name: str, function: str, bound_as: str) -> list[str]:
    """Lines that bind ``bound_as`` to ``function`` of the TVM-FFI library the harness built beside
    the entry, loaded as the contest's TVM-FFI builder loads it."""
    return ["from pathlib import Path",
            "",
            "import tvm_ffi",
            "",
            f"{bound_as} = getattr(tvm_ffi.load_module(str(Path(__file__).with_name({json.dumps(library_name)}))),",
            f"{' ' * (len(bound_as) + 11)}{json.dumps(function)})"]


def _loader_lines(meta: SolutionMeta) -> list[str]:
    """Lines that bind ``_fn``, the contest entry's function (see :func:`_contest_entry`)."""
    library = json.dumps(meta.library_name)
    function = json.dumps(meta.function)
    if meta.language in COMPILED_LANGUAGES and meta.binding == "torch":
        return ["import importlib.machinery",
                "import importlib.util",
                "from pathlib import Path",
                "",
                "import torch  # noqa: F401  (the extension links against the libraries torch loads)",
                "",
                f"_LOADER = importlib.machinery.ExtensionFileLoader({json.dumps(torch_extension_name(meta))},",
                f"                                                  str(Path(__file__).with_name({library})))",
                "_MODULE = importlib.util.module_from_spec(importlib.util.spec_from_loader(_LOADER.name, _LOADER))",
                "_LOADER.exec_module(_MODULE)",
                f"_fn = getattr(_MODULE, {function})"]
    if meta.language in COMPILED_LANGUAGES:
        return _tvm_ffi_lines(meta.library_name, meta.function, "_fn")
    return [f"from .{meta.entry_module} import {meta.function} as _fn"]


#: The generated entry's own code for a contest entry (``@NAME@`` slots filled by
#: :func:`_contest_entry`): the arity check is flashinfer-bench's build-time one (a function that
#: cannot take the definition's arguments is refused when it is loaded: COMPILE_ERROR).
_ARITY_CHECK = '''
def _check_arity(fn, expected):
    """Refuse a function that cannot take the definition's @COUNT@ arguments, as flashinfer-bench's
    builder does; a signature Python cannot read is not checked."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    fixed = sum(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
    variadic = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if fixed > expected or (fixed != expected and not variadic):
        raise TypeError(f"the @STYLE@ entry @FUNCTION@ takes {fixed} parameters; the definition gives it "
                        f"{expected} (@NAMES@)")


_check_arity(_fn, @COUNT@)
'''

#: A value-returning entry's ``run``: the function on the inputs and nothing else timed, as
#: flashinfer-bench times it; its results reach the destinations after the timer (:data:`HANDS_OVER`).
_VALUE_RUN = '''

#: What the last call returned and the destinations it was given, held until the next call so that
#: the memory the timing core copies from stays allocated until it has copied it.
_last = []


def _checked(results, destinations):
    """What the function returned, one tensor per output (a single output may come bare), each of
    its destination's shape and dtype; moved to the destination's device and made contiguous where
    it is not (inside the call: flashinfer-bench would not pay that, no such entry is known)."""
    results = results if isinstance(results, tuple) else (results,)
    if len(results) != len(destinations):
        raise ValueError(f"@FUNCTION@ returned {len(results)} values; the definition has @OUTPUT_COUNT@ "
                         "outputs (@OUTPUTS@)")
    checked = []
    for name, result, destination in zip(@OUTPUT_NAMES@, results, destinations):
        if not hasattr(result, "shape") or tuple(result.shape) != tuple(destination.shape) \\
                or result.dtype != destination.dtype:
            got = (tuple(result.shape), result.dtype) if hasattr(result, "shape") else type(result).__name__
            raise ValueError(f"@FUNCTION@ returned {got} as {name}; the definition's {name} is "
                             f"{(tuple(destination.shape), destination.dtype)}")
        checked.append(result.to(destination.device).contiguous())
    return tuple(checked)


def run(@ARGUMENTS@):
    """The timed call: the function on the inputs, no copy. Returns each result's data pointer (0
    where the result is its destination): the timing core copies them into the destinations once
    its timer has stopped; :func:`deliver` does it for the worker's own calls."""
    destinations = (@OUTPUTS@,)
    results = _checked(_fn(@INPUTS@), destinations)
    _last[:] = [results, destinations]
    return tuple(0 if r.data_ptr() == d.data_ptr() else r.data_ptr() for r, d in zip(results, destinations))


def contest_call(@ARGUMENTS@):
    """flashinfer-bench's timed call of a value-returning entry: the function on the inputs alone,
    its results held (unchecked, uncopied) for :func:`deliver`."""
    _last[:] = [_fn(@INPUTS@), (@OUTPUTS@,)]


def deliver():
    """Copy what the last call returned into its destinations, outside any timer."""
    if _last:
        results, destinations = _checked(*_last), _last[1]
        for result, destination in zip(results, destinations):
            if result.data_ptr() != destination.data_ptr():
                destination.copy_(result)


HANDS_OVER = True
'''

#: The names the worker reads from every generated entry beside ``run``, and what they are where an
#: entry does not define them (a destination-passing one): the function flashinfer-bench's timer
#: calls (``contest_call``), the step that puts a call's results in its destinations after the
#: timer (``deliver``), and whether ``run`` returns data pointers for the timing core to copy.
ENTRY_DEFAULTS = {"contest_call": None, "deliver": None, "HANDS_OVER": False}


def _fill(template: str, slots: dict[str, str]) -> str:
    """``template`` with every ``@KEY@`` replaced by ``slots[KEY]``."""
    for key, value in slots.items():
        template = template.replace(f"@{key}@", value)
    return template


def _contest_entry(meta: SolutionMeta, definition: Definition) -> str:
    """A contest entry's positional entry: its function as ``run`` (destination-passing), or a
    ``run`` that calls it with the inputs and copies what it returns into the destinations."""
    inputs, outputs = list(definition.inputs), list(definition.outputs)
    dps = meta.calling == "dps"
    taken = inputs + outputs if dps else inputs
    slots = {"FUNCTION": meta.function, "STYLE": "destination-passing" if dps else "value-returning",
             "COUNT": str(len(taken)), "NAMES": ", ".join(taken), "OUTPUT_COUNT": str(len(outputs)),
             "OUTPUTS": ", ".join(outputs), "OUTPUT_NAMES": repr(tuple(outputs)),
             "ARGUMENTS": ", ".join(inputs + outputs), "INPUTS": ", ".join(inputs)}
    lines = [
        f'"""Positional destination-passing entry of the contest entry {meta.name}, generated by the',
        f"harness: its {slots['STYLE']} function {meta.function} ({meta.entry or meta.sources[0]}), called",
        'as flashinfer-bench calls it (harness/judge/dps.py)."""',
        "",
        "import inspect",
        "",
        *_loader_lines(meta),
        "",
        _fill(_ARITY_CHECK, slots),
    ]
    body = "run = _fn\n" if dps else _fill(_VALUE_RUN, slots)
    return "\n".join(lines) + body
