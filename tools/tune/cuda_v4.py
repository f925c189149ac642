"""Tuning adapter of cuda-v4 (CUDA C++): block shape and cache policy per batch size.

Search space: every variant kernel.cu's all-variants build
(``-DGDN_V4_ALL_VARIANTS``) instantiates, i.e. ``main.LaunchConfig(rows per
warp, cache policy, lanes per row, warps per block)`` over main.py's choices
that ``LaunchConfig.is_compiled`` accepts (tests/test_tuning_driver.py checks
this against the build's own kernels). A variant runs through
``main.run_with_config`` (kernel.cu's ``gdn_decode_config``). The table is
kernel.cu's ``GDN_V4_LAUNCH_TABLE``, the one place it lives, read back from the
build (``gdn_decode_launch_config``) and printed in its macro form.
"""

from __future__ import annotations

import itertools
import re
from types import ModuleType
from typing import Callable

from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR

#: cuda-v4's kernel.cu compiles only its launch table's variants unless this macro is defined.
ALL_VARIANTS = "GDN_V4_ALL_VARIANTS"
#: one entry of kernel.cu's GDN_V4_LAUNCH_TABLE: X(largest batch, rows, CachePolicy, lanes, warps)
_TABLE_ENTRY = re.compile(r"X\((\w+), (\d+), k(\w+), (\d+), (\d+)\)")
#: kernel.cu's CachePolicy enumerators, by cache policy name
_ENUMERATORS = {"stream": "Stream", "nc": "Nc", "plain": "Plain", "noalloc": "NoAlloc"}


def config_name(config) -> str:
    """``r4/stream``, ``r4/nc``, ``r4/plain/l16``, ``r8/nc/l16/w2``: rows per
    warp, cache policy, then the lanes per row unless 32 (a whole warp per
    row) and the warps per block unless 8. (Tuning files of 2026-11-23 name
    them ``cuda-v4/<name>``, some with ``/rs``: the reduce-scatter form, now
    the only one, where the names without ``rs`` are the all-reduce form it replaced.)"""
    name = f"r{config.rows_per_warp}/{config.cache_policy}"
    if config.lanes_per_row != 32:
        name += f"/l{config.lanes_per_row}"
    return name if config.warps_per_block == 8 else f"{name}/w{config.warps_per_block}"


def kernel_table(source: str) -> list[list]:
    """kernel.cu's ``GDN_V4_LAUNCH_TABLE`` as ``[[largest batch | None, (rows, policy, lanes, warps)]]``
    (the last entry, ``INT64_MAX``, as None).

    Raises:
        ValueError: no table, or one whose last entry does not cover every batch.
    """
    start = source.find("#define GDN_V4_LAUNCH_TABLE(X)")
    if start < 0:
        raise ValueError("kernel.cu defines no GDN_V4_LAUNCH_TABLE")
    body = source[start:source.index("\n\n", start)]
    names = {enumerator: name for name, enumerator in _ENUMERATORS.items()}
    table = [[None if limit == "INT64_MAX" else int(limit), (int(rows), names[policy], int(lanes), int(warps))]
             for limit, rows, policy, lanes, warps in _TABLE_ENTRY.findall(body)]
    if not table or table[-1][0] is not None:
        raise ValueError("GDN_V4_LAUNCH_TABLE's last entry must be INT64_MAX (every batch)")
    return table


def table_macro(table: list[list]) -> str:
    """``[[largest batch | None, (rows, policy, lanes, warps)]]`` as kernel.cu's
    ``GDN_V4_LAUNCH_TABLE``, to paste (:func:`kernel_table` reads it back)."""
    entries = [f"  X({'INT64_MAX' if limit is None else limit}, {rows}, k{_ENUMERATORS[policy]}, {lanes}, {warps})"
               for limit, (rows, policy, lanes, warps) in table]
    return "#define GDN_V4_LAUNCH_TABLE(X) \\\n" + " \\\n".join(entries)


class CudaV4:
    """The :class:`tools.tune.protocol.Adapter` of cuda-v4."""

    name = "cuda-v4"
    baselines = ("cuda-v1",)  # its predecessor, as the earlier tunes recorded it

    def __init__(self, solution: ModuleType | None = None):
        """``solution``: its entry module, already loaded (tests); else :meth:`load` builds it."""
        self.solution = solution

    def load(self) -> None:
        """Build kernel.cu with every variant (the harness's builder, cached) and load it."""
        if self.solution is None:
            self.solution = load_solution(load_meta(SOLUTIONS_DIR / self.name), defines=(ALL_VARIANTS,))
        self.solution.load()

    def state_dtypes(self) -> tuple[str, ...]:
        """fp32 state only."""
        return ("float32",)

    def configs(self, state_dtype: str) -> dict[str, object]:
        """Every variant kernel.cu compiles, by name."""
        v4 = self.solution
        grid = itertools.product(v4.ROWS_PER_WARP_CHOICES, v4.CACHE_POLICIES, v4.LANES_PER_ROW_CHOICES,
                                 v4.WARPS_PER_BLOCK_CHOICES)
        return {config_name(config): config for config in itertools.starmap(v4.LaunchConfig, grid)
                if config.is_compiled()}

    def call(self, config, inputs: dict) -> Callable[[], object]:
        """``run_with_config(inputs, config)``."""
        return lambda: self.solution.run_with_config(inputs, config)

    def run(self, inputs: dict) -> object:
        """The solution's ``run``: kernel.cu's contest entry ``gdn_decode`` and its table."""
        return self.solution.run(inputs)

    def in_use(self, inputs: dict) -> str:
        """The launch table's variant for B, read from the build."""
        return config_name(self.solution.launch_config(inputs["q"].shape[0]))

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``table`` as kernel.cu's ``GDN_V4_LAUNCH_TABLE`` macro."""
        configs = self.configs(state_dtype)
        return table_macro([[limit, tuple(configs[name])] for limit, name in table])
