"""Tuning adapter of fla-recurrent (Triton): ``(bv, num_warps)`` per batch size.

Search space: every ``configs.LaunchConfig(bv, num_warps)`` of
:data:`BV_CHOICES` x :data:`WARP_CHOICES` that the solution's own
``configs.is_valid`` accepts; a config runs through ``main.run_with_config``.
The table is ``configs.LAUNCH_TABLE``.
"""

from __future__ import annotations

import itertools
from typing import Callable

from tools.tune.protocol import LoadedByTheHarness

BV_CHOICES = (4, 8, 16, 32, 64, 128)
WARP_CHOICES = (1, 2, 4, 8)


def config_name(cfg) -> str:
    """``bv8/w4``: V rows per program, warps per program."""
    return f"bv{cfg.bv}/w{cfg.num_warps}"


class FlaRecurrent(LoadedByTheHarness):
    """The :class:`tools.tune.protocol.Adapter` of fla-recurrent."""

    name = "fla-recurrent"
    baselines: tuple[str, ...] = ()  # fla-upstream, its lineage, is a common baseline

    def state_dtypes(self) -> tuple[str, ...]:
        """fp32 state only."""
        return ("float32",)

    def configs(self, state_dtype: str) -> dict[str, object]:
        """Every valid ``(bv, num_warps)`` by name."""
        configs = self.solution.configs
        grid = (configs.LaunchConfig(bv, warps) for bv, warps in itertools.product(BV_CHOICES, WARP_CHOICES))
        return {config_name(cfg): cfg for cfg in grid if configs.is_valid(cfg)}

    def call(self, config, inputs: dict) -> Callable[[], object]:
        """``run_with_config(inputs, config)`` (Triton compiles at the first call, the check's)."""
        return lambda: self.solution.run_with_config(inputs, config)

    def run(self, inputs: dict) -> object:
        """The solution's ``run``."""
        return self.solution.run(inputs)

    def in_use(self, inputs: dict) -> str:
        """``configs.pick(B)``'s name."""
        return config_name(self.solution.configs.pick(inputs["q"].shape[0]))

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``table`` as ``configs.LAUNCH_TABLE``'s assignment."""
        configs = self.configs(state_dtype)
        entries = "".join(f"    ({limit}, {configs[name]!r}),\n" for limit, name in table)
        return f"LAUNCH_TABLE: tuple[tuple[int | None, LaunchConfig], ...] = (\n{entries})"
