"""Tuning adapter of cuda-v4 (CUDA C++): block shape and cache policy per batch size.

Search space: every variant kernel.cu's all-variants build
(``-DGDN_V4_ALL_VARIANTS``) instantiates, i.e. ``main.LaunchConfig(rows per
warp, cache policy, lanes per row, warps per block, passes, staged)`` over main.py's choices
that ``LaunchConfig.is_compiled`` accepts for the state dtype (tests/tools/test_tune_driver.py checks this
against the build's own kernels). A variant runs through
``main.run_with_config`` (kernel.cu's ``gdn_decode_config``).

``--defines`` (:mod:`tools.tune.cli`) adds macros to that build: a candidate
(``GDN_V4_CANDIDATE=<flags>``, the same results by other code) tuned to set
beside the shipped kernel's tune, never installed.

A GPU's tables are the C++ header ``launch_table.<device slug>.cuh`` in the
solution folder: one ``GDN_V4_GPU("<device name>", X(...) ...)`` entry (the fp32
state's table) after ``// key: value`` provenance lines, and, once the bf16 state
is tuned there, one ``GDN_V4_GPU_BF16`` entry of the same form (after ``// bf16 key: value`` lines
where another tune chose it); ``launch_tables.cuh`` includes every such
file (C++ cannot list a folder), and kernel.cu includes that index both to
choose a GPU's table at run time and to compile the variants the tables name.
The tune writes the header and adds its line to the index.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from types import ModuleType
from typing import Callable

from harness.judge.protocol import dtype_name
from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR
from tools.tune.table_files import PROVENANCE_FIELDS, table_stem

#: cuda-v4's kernel.cu compiles only its launch tables' (and default model's) variants unless this macro is defined.
ALL_VARIANTS = "GDN_V4_ALL_VARIANTS"
#: ... and, for the bf16 state, unless this one is (every variant of both state dtypes).
BF16_ALL_VARIANTS = "GDN_V4_BF16_ALL_VARIANTS"
#: kernel.cu's fp32-state kernels by their mangled names: gdn_decode_v4_kernel<WARPS, ROWS, POLICY, LANES,
#: PASSES, STAGED, float> (STAGED a bool, ``Lb0E`` or ``Lb1E``; the last template argument is the state's
#: element type: ``f`` float, ``t`` the bf16 state's uint16_t, :data:`KERNEL_NAME_BF16`). Groups: the
#: six numbers, in that order.
KERNEL_NAME = r"gdn_decode_v4_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])EfE"
#: ... and its bf16-state kernels.
KERNEL_NAME_BF16 = r"gdn_decode_v4_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])EtE"
#: The header that includes every GPU's table file.
INDEX = "launch_tables.cuh"
#: one entry of a table: X(largest batch, rows, CachePolicy, lanes, warps, passes, staged)
_TABLE_ENTRY = re.compile(r"X\((\w+), (\d+), k(\w+), (\d+), (\d+), (\d+), ([01])\)")
_GPU = re.compile(r'^GDN_V4_GPU\("([^"]+)",', re.MULTILINE)
_GPU_BF16 = re.compile(r'^GDN_V4_GPU_BF16\("([^"]+)",', re.MULTILINE)
_INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)
#: kernel.cu's CachePolicy enumerators, by cache policy name
_ENUMERATORS = {"stream": "Stream", "nc": "Nc", "plain": "Plain", "noalloc": "NoAlloc"}


def table_file_name(device: str) -> str:
    """``launch_table.<device slug>.cuh``: the file of a GPU's table."""
    return f"launch_table.{table_stem(device)}.cuh"


def read_table_header(text: str) -> tuple[str, list[list], dict]:
    """``(device name, [[largest batch | None, (rows, policy, lanes, warps, passes, staged)]], provenance)`` of a
    table header (the last entry, ``INT64_MAX``, as None).

    Raises:
        ValueError: no ``GDN_V4_GPU`` entry, or a table whose last entry does not cover every batch.
    """
    gpu = _GPU.search(text)
    if gpu is None:
        raise ValueError('no GDN_V4_GPU("<device name>", ...) entry')
    bf16 = _GPU_BF16.search(text)
    table = _entries_of(gpu.group(1), text[gpu.end():bf16.start() if bf16 else len(text)])
    origin = dict(re.findall(rf"^// ({'|'.join(PROVENANCE_FIELDS)}): (.*)$", text, re.MULTILINE))
    return gpu.group(1), table, origin


def read_bf16_origin(text: str) -> dict:
    """Provenance of a table header's bf16 table: its ``// bf16 key: value`` lines where another tune
    chose it than the fp32 table's, else the header's own (:func:`read_table_header`)."""
    own = dict(re.findall(rf"^// bf16 ({'|'.join(PROVENANCE_FIELDS)}): (.*)$", text, re.MULTILINE))
    return own or read_table_header(text)[2]


def read_bf16_table(text: str) -> list[list] | None:
    """The bf16 state's table of a table header (as :func:`read_table_header` gives the fp32 one),
    or None where the header has none (the kernel then takes the fp32 entry of ceil(B / 2)).

    Raises:
        ValueError: a bf16 table whose last entry does not cover every batch.
    """
    bf16 = _GPU_BF16.search(text)
    return _entries_of(bf16.group(1), text[bf16.end():]) if bf16 else None


def _entries_of(device: str, text: str) -> list[list]:
    """The X(...) entries in ``text``, the last as None (``INT64_MAX``).

    Raises:
        ValueError: none, or a last entry that does not cover every batch.
    """
    names = {enumerator: name for name, enumerator in _ENUMERATORS.items()}
    table = [[None if limit == "INT64_MAX" else int(limit),
              (int(rows), names[policy], int(lanes), int(warps), int(passes), staged == "1")]
             for limit, rows, policy, lanes, warps, passes, staged in _TABLE_ENTRY.findall(text)]
    if not table or table[-1][0] is not None:
        raise ValueError(f"the table of {device} must end with INT64_MAX (every batch)")
    return table


def _table_texts(folder: Path) -> list[str]:
    """The text of every file the index (``launch_tables.cuh``) includes."""
    return [(Path(folder) / name).read_text() for name in indexed_files((Path(folder) / INDEX).read_text())]


def _table_headers(folder: Path) -> list[tuple[str, list[list], dict]]:
    """:func:`read_table_header` of every file the index includes."""
    return [read_table_header(text) for text in _table_texts(folder)]


def gpu_tables(folder: Path = SOLUTIONS_DIR / "cuda-v4") -> dict[str, list[list]]:
    """Device name -> table, of every file the index includes."""
    return {device: table for device, table, _ in _table_headers(folder)}


def bf16_gpu_tables(folder: Path = SOLUTIONS_DIR / "cuda-v4") -> dict[str, list[list]]:
    """Device name -> bf16 table, of every file the index includes that has one."""
    return {read_table_header(text)[0]: table for text in _table_texts(folder)
            if (table := read_bf16_table(text)) is not None}


def gpu_table_reports(folder: Path = SOLUTIONS_DIR / "cuda-v4") -> dict[str, list[str]]:
    """Device name -> the tuning reports its file's tables come from (the fp32 table's first; a bf16
    table's where another tune chose it), of every file the index includes."""
    reports = {}
    for text in _table_texts(folder):
        device, _, origin = read_table_header(text)
        found = [origin.get("report")]
        if read_bf16_table(text) is not None:
            found.append(read_bf16_origin(text).get("report"))
        reports[device] = list(dict.fromkeys(r for r in found if r))
    return reports


def indexed_files(index: str) -> list[str]:
    """The files an index includes, in order."""
    return _INCLUDE.findall(index)


def with_file(index: str, name: str) -> str:
    """``index`` with an ``#include`` of ``name`` at its end, unless it has one."""
    return index if name in indexed_files(index) else index.rstrip("\n") + f'\n#include "{name}"\n'


def table_entries(table: list[list]) -> str:
    """``[[largest batch | None, (rows, policy, lanes, warps, passes, staged)]]`` as X(...) lines
    (:func:`read_table_header` reads them)."""
    return "\n".join(f"  X({'INT64_MAX' if limit is None else limit}, {rows}, k{_ENUMERATORS[policy]}, {lanes}, {warps}, "
                     f"{passes}, {int(staged)})" for limit, (rows, policy, lanes, warps, passes, staged) in table)


def table_header(origin: dict, table: list[list], bf16_table: list[list] | None = None,
                 bf16_origin: dict | None = None) -> str:
    """The text of a GPU's table header: provenance (:func:`tools.tune.table_files.provenance`), then the
    fp32 state's entry and, where given, the bf16 state's, after its own provenance (``// bf16 key:
    value``) where ``bf16_origin`` names another tune than ``origin``."""
    lines = ["// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard)."]
    lines += [f"// {field}: {origin[field]}" for field in PROVENANCE_FIELDS]
    lines += ["// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes, staged); the first entry",
              "// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.",
              f'GDN_V4_GPU("{origin["device"]}",', table_entries(table) + ")"]
    if bf16_table is not None:
        other = bf16_origin is not None and any(bf16_origin[f] != origin[f] for f in PROVENANCE_FIELDS)
        lines += ["// The bf16 state's table, of the same form" + (", from another tune:" if other else ".")]
        lines += [f"// bf16 {field}: {bf16_origin[field]}" for field in PROVENANCE_FIELDS] if other else []
        lines += [f'GDN_V4_GPU_BF16("{origin["device"]}",', table_entries(bf16_table) + ")"]
    return "\n".join(lines) + "\n"


def config_name(config) -> str:
    """``r4/stream``, ``r4/nc``, ``r4/plain/l16``, ``r8/nc/l16/w2``, ``r16/nc/l8/w2/p2``,
    ``r16/stream/l16/w1/p2s``: rows per warp, cache policy, then the lanes per row unless 32 (a
    whole warp per row), the warps per block unless 8 and the passes unless 1, with ``s`` where the
    second pass's rows are staged in shared memory. (Tuning files of 2026-11-23 name
    them ``cuda-v4/<name>``, some with ``/rs``: the reduce-scatter form, now
    the only one, where the names without ``rs`` are the all-reduce form it replaced.)"""
    name = f"r{config.rows_per_warp}/{config.cache_policy}"
    if config.lanes_per_row != 32:
        name += f"/l{config.lanes_per_row}"
    if config.warps_per_block != 8:
        name += f"/w{config.warps_per_block}"
    return name if config.passes == 1 else f"{name}/p{config.passes}{'s' if config.staged else ''}"


class CudaV4:
    """The :class:`tools.tune.protocol.Adapter` of cuda-v4."""

    name = "cuda-v4"
    baselines = ("cuda-v1",)  # its predecessor, as the earlier tunes recorded it
    takes_defines = True  # the tuner's --defines reach its build (the other adapters refuse them)

    def __init__(self, solution: ModuleType | None = None, source_dir: Path | None = None,
                 defines: tuple[str, ...] = ()):
        """``solution``: its entry module, already loaded (tests); else :meth:`load` builds it.
        ``source_dir``: the folder its table files are written to (default ``solutions/cuda-v4``).
        ``defines``: preprocessor macros (``NAME`` or ``NAME=VALUE``) built beside
        :data:`ALL_VARIANTS`."""
        self.solution = solution
        self.source_dir = Path(source_dir) if source_dir else SOLUTIONS_DIR / self.name
        self.defines = tuple(defines)

    def load(self) -> None:
        """Build kernel.cu with every variant and :attr:`defines` (the harness's builder, cached
        per set of macros) and load it."""
        if self.solution is None:
            bf16 = (BF16_ALL_VARIANTS,) if "bfloat16" in self.state_dtypes() else ()
            defines = tuple(dict.fromkeys((ALL_VARIANTS, *bf16, *self.defines)))
            self.solution = load_solution(load_meta(SOLUTIONS_DIR / self.name), defines=defines)
        self.solution.load()

    def state_dtypes(self) -> tuple[str, ...]:
        """The state dtypes its ``solution.toml`` declares (fp32 and bf16), each with its own table."""
        return load_meta(SOLUTIONS_DIR / self.name).state_dtypes

    def configs(self, state_dtype: str) -> dict[str, object]:
        """Every variant kernel.cu compiles for a state of ``state_dtype``, by name."""
        v4 = self.solution
        grid = itertools.product(v4.ROWS_PER_WARP_CHOICES, v4.CACHE_POLICIES, v4.LANES_PER_ROW_CHOICES,
                                 v4.WARPS_PER_BLOCK_CHOICES, v4.PASSES_CHOICES, v4.STAGED_CHOICES)
        return {config_name(config): config for config in itertools.starmap(v4.LaunchConfig, grid)
                if config.is_compiled(state_dtype)}

    def call(self, config, inputs: dict) -> Callable[[], object]:
        """``run_with_config(inputs, config)``."""
        return lambda: self.solution.run_with_config(inputs, config)

    def run(self, inputs: dict) -> object:
        """The solution's ``run``: kernel.cu's contest entry ``gdn_decode`` and its table."""
        return self.solution.run(inputs)

    def in_use(self, inputs: dict) -> str:
        """The variant ``run`` launches for B and the state's dtype on this GPU (its table, or the
        default model), read from the build."""
        return config_name(self.solution.launch_config(inputs["q"].shape[0], dtype_name(inputs["state"].dtype)))

    def gpu_tables(self) -> dict[str, dict[str, list[list]]]:
        """The table headers' tables by config name: fp32, and bf16 where a header has one."""
        v4 = self.solution
        named = lambda table: [[limit, config_name(v4.LaunchConfig(*config))] for limit, config in table]
        bf16 = bf16_gpu_tables(self.source_dir)
        return {device: {"float32": named(table), **({"bfloat16": named(bf16[device])} if device in bf16 else {})}
                for device, table in gpu_tables(self.source_dir).items()}

    def model_config_name(self, batch: int, state_dtype: str, bandwidth: float) -> str:
        """The build's default-model choice (asked for a device name no table has: "")."""
        return config_name(self.solution.launch_config_for("", bandwidth, batch, state_dtype))

    def _entries(self, table: list[list], state_dtype: str) -> list[list]:
        configs = self.configs(state_dtype)
        return [[limit, tuple(configs[name])] for limit, name in table]

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``table`` as the X(...) lines of its table header."""
        return table_entries(self._entries(table, state_dtype))

    def table_files(self, tables: dict[str, list[list]], origin: dict) -> dict[str, str]:
        """``launch_table.<device slug>.cuh`` and the index with its ``#include``. A state dtype this
        tune left out keeps the table the GPU's file already holds, and that table's provenance.

        Raises:
            ValueError: no fp32 table, tuned or held (a header's first entry is the fp32 one).
        """
        name = table_file_name(origin["device"])
        index = (self.source_dir / INDEX).read_text()
        held_file = self.source_dir / name
        held, held_origins = {}, {}
        if held_file.exists():
            text = held_file.read_text()
            _, fp32, fp32_origin = read_table_header(text)
            held = {"float32": fp32, "bfloat16": read_bf16_table(text)}
            held_origins = {"float32": fp32_origin, "bfloat16": read_bf16_origin(text)}
        written = {**held, **{dtype: self._entries(table, dtype) for dtype, table in tables.items()}}
        origins = {**held_origins, **{dtype: origin for dtype in tables}}  # each table keeps the tune that chose it
        if written.get("float32") is None:
            raise ValueError(f"{origin['device']}: a table file needs the fp32 table; tune float32 too")
        return {name: table_header(origins["float32"], written["float32"], written.get("bfloat16"),
                                   origins.get("bfloat16")),
                INDEX: with_file(index, name)}
