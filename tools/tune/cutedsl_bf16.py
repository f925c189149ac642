"""Tuning adapter of cutedsl-bf16 (CuTe DSL): launch configuration per state dtype and batch size.

Search space: ``gdn_cute_build.valid_configs`` for the definition's shape and
each state dtype (tile height, rows per stage, load path and its register
rows, cache policy, parts per lane). A config is compiled through the
solution's launch-table override (``main.kernel_key(inputs, config)``, then
``gdn_cute_build.compile_kernel``) and called with ``main.launch``. A GPU's
tables (one per state dtype) are its file ``launch_tables/<device slug>.json``
in the solution folder (``gdn_cute_build.LAUNCH_TABLES``), which the tune writes.
"""

from __future__ import annotations

import json
from typing import Callable

from harness.data.definition import TORCH_DTYPES
from harness.judge.protocol import dtype_name
from harness.judge.solutions import load_meta
from harness.paths import SOLUTIONS_DIR
from tools.tune.protocol import LoadedByTheHarness
from tools.tune.table_files import json_entries, json_table_file
from tools.tune.measure import HEAD_K, HEAD_V


class CuteDslBf16(LoadedByTheHarness):
    """The :class:`tools.tune.protocol.Adapter` of cutedsl-bf16."""

    name = "cutedsl-bf16"
    baselines: tuple[str, ...] = ()  # FlashInfer's kernel of each state dtype is a common baseline

    def state_dtypes(self) -> tuple[str, ...]:
        """The state dtypes its ``solution.toml`` declares (fp32 and bf16), each with its own table."""
        return load_meta(SOLUTIONS_DIR / self.name).state_dtypes

    def configs(self, state_dtype: str) -> dict[str, object]:
        """Every config the kernel compiles with for this state dtype, by ``LaunchConfig.name``."""
        build = self.solution.build
        return {config.name: config for config in build.valid_configs(HEAD_V, HEAD_K, TORCH_DTYPES[state_dtype])}

    def call(self, config, inputs: dict) -> Callable[[], object]:
        """Compile ``config`` for these inputs now; the call is ``launch`` alone.

        Raises:
            ValueError: a config the kernel refuses; or what the CuTe DSL compiler raises.
        """
        compiled = self.solution.build.compile_kernel(self.solution.kernel_key(inputs, config))
        return lambda: self.solution.launch(compiled, inputs)

    def run(self, inputs: dict) -> object:
        """The solution's ``run``."""
        return self.solution.run(inputs)

    def in_use(self, inputs: dict) -> str:
        """The name of the config ``run`` compiles for these inputs (the launch table's)."""
        return self.solution.kernel_key(inputs).config.name

    def gpu_tables(self) -> dict[str, dict[str, list[list]]]:
        """``gdn_cute_build.LAUNCH_TABLES`` by config name."""
        return {device: {dtype_name(dtype): [[limit, config.name] for limit, config in table]
                         for dtype, table in tables.items()}
                for device, tables in self.solution.build.LAUNCH_TABLES.items()}

    def model_config_name(self, batch: int, state_dtype: str, bandwidth: float) -> str:
        """``gdn_cute_build.model_config``'s name."""
        return self.solution.build.model_config(batch, TORCH_DTYPES[state_dtype], bandwidth).name

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``table`` as its table file's entries for this state dtype (JSON)."""
        return json.dumps(json_entries(table, self.configs(state_dtype)))

    def table_files(self, tables: dict[str, list[list]], origin: dict) -> dict[str, str]:
        """``launch_tables/<device slug>.json``, one table per state dtype tuned."""
        entries = {dtype: json_entries(table, self.configs(dtype)) for dtype, table in tables.items()}
        return dict([json_table_file(self.name, origin, entries)])
