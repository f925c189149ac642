"""Tuning adapter of fla-recurrent (Triton): ``(bv, num_warps, lanes_per_row)`` per batch size.

Search space: every ``configs.LaunchConfig(bv, num_warps, lanes_per_row)`` of
:data:`BV_CHOICES` x :data:`WARP_CHOICES` x the solution's own
``configs.LANES_PER_ROW_CHOICES`` that its ``configs.is_valid`` accepts; a
config runs through ``main.run_with_config``.
A GPU's table is its file ``launch_tables/<device slug>.json`` in the solution
folder (``configs.LAUNCH_TABLES``), which the tune writes.
"""

from __future__ import annotations

import itertools
import json
from typing import Callable

from tools.tune.protocol import LoadedByTheHarness
from tools.tune.table_files import json_entries, json_table_file

BV_CHOICES = (4, 8, 16, 32, 64, 128)
WARP_CHOICES = (1, 2, 4, 8)


def config_name(cfg) -> str:
    """``bv8/w4``: V rows per program, warps per program; ``bv8/w1/l8`` where a row has fewer than 32 lanes."""
    return f"bv{cfg.bv}/w{cfg.num_warps}" + (f"/l{cfg.lanes_per_row}" if cfg.lanes_per_row != 32 else "")


class FlaRecurrent(LoadedByTheHarness):
    """The :class:`tools.tune.protocol.Adapter` of fla-recurrent."""

    name = "fla-recurrent"
    baselines: tuple[str, ...] = ()  # fla-upstream, its lineage, is a common baseline

    def state_dtypes(self) -> tuple[str, ...]:
        """fp32 state only."""
        return ("float32",)

    def configs(self, state_dtype: str) -> dict[str, object]:
        """Every valid ``(bv, num_warps, lanes_per_row)`` by name."""
        configs = self.solution.configs
        grid = (configs.LaunchConfig(bv, warps, lanes)
                for bv, warps, lanes in itertools.product(BV_CHOICES, WARP_CHOICES, configs.LANES_PER_ROW_CHOICES))
        return {config_name(cfg): cfg for cfg in grid if configs.is_valid(cfg)}

    def call(self, config, inputs: dict) -> Callable[[], object]:
        """``run_with_config(inputs, config)`` (Triton compiles at the first call, the check's)."""
        return lambda: self.solution.run_with_config(inputs, config)

    def run(self, inputs: dict) -> object:
        """The solution's ``run``."""
        return self.solution.run(inputs)

    def in_use(self, inputs: dict) -> str:
        """The name of ``configs.pick(B, device)``: the device's table, else the default model."""
        q = inputs["q"]
        return config_name(self.solution.configs.pick(q.shape[0], q.device))

    def gpu_tables(self) -> dict[str, dict[str, list[list]]]:
        """``configs.LAUNCH_TABLES`` by config name (fp32 only)."""
        return {device: {"float32": [[limit, config_name(cfg)] for limit, cfg in table]}
                for device, table in self.solution.configs.LAUNCH_TABLES.items()}

    def model_config_name(self, batch: int, state_dtype: str, bandwidth: float) -> str:
        """``configs.model_config``'s name."""
        return config_name(self.solution.configs.model_config(batch, bandwidth))

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``table`` as its table file's entries (JSON)."""
        return json.dumps(json_entries(table, self.configs(state_dtype)))

    def table_files(self, tables: dict[str, list[list]], origin: dict) -> dict[str, str]:
        """``launch_tables/<device slug>.json``."""
        entries = {dtype: json_entries(table, self.configs(dtype)) for dtype, table in tables.items()}
        return dict([json_table_file(self.name, origin, entries)])
