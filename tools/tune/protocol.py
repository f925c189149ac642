"""What the tuner needs to know about one solution: its adapter.

An adapter lives in ``tools/tune/`` (a solution never imports it) and uses
only hooks the solution already exposes: fla-recurrent's ``run_with_config``,
cuda-v4's variant entry in its all-variants build, cutedsl-bf16's launch-table
override in ``kernel_key``. The driver (:mod:`tools.tune.driver`) does the
rest the same way for every family: inputs, checks, timing, the choice of one
config per batch size and the report.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Callable, Protocol

from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR


class Adapter(Protocol):
    """One tunable solution.

    Attributes:
        name: the solution's folder under ``solutions/`` (``--algo`` name).
        source_dir: the folder :meth:`table_files` are written to (``solutions/<name>``).
        baselines: other solutions timed beside it at every batch size, besides
            the ones every tune times (:data:`tools.tune.driver.COMMON_BASELINES`).

    An adapter whose class sets ``takes_defines = True`` (cuda-v4's) also takes
    ``defines=`` (preprocessor macros for its build) in its constructor: the
    tuner's ``--defines``, refused for every other solution.
    """

    name: str
    baselines: tuple[str, ...]
    source_dir: Path

    def load(self) -> None:
        """Import (and build) the solution through the harness's loader, once.

        Raises:
            Exception: the solution cannot be built or imported here.
        """

    def state_dtypes(self) -> tuple[str, ...]:
        """The state dtypes it has a launch table for (``"float32"``, ``"bfloat16"``)."""

    def configs(self, state_dtype: str) -> dict[str, object]:
        """The search space: config name -> config, only the valid ones (its validity rule)."""

    def call(self, config: object, inputs: dict) -> Callable[[], object]:
        """A zero-argument call running the solution with ``config`` on ``inputs``
        (the contract's dict with its destinations). Compiles here, if it must,
        so that the timed call is the launch alone.

        Raises:
            Exception: a config that does not compile (recorded as failed by the driver).
        """

    def run(self, inputs: dict) -> object:
        """The solution's own ``run(inputs)``: the launch table in use."""

    def in_use(self, inputs: dict) -> str:
        """Name of the config ``run`` picks for these inputs (its table in use)."""

    def format_table(self, table: list[list], state_dtype: str) -> str:
        """``[[largest batch | None, config name]]`` in the form its table file holds it."""

    def gpu_tables(self) -> dict[str, dict[str, list[list]]]:
        """Every GPU's tables the solution holds: device name -> state dtype -> ``[[largest batch |
        None, config name]]``."""

    def model_config_name(self, batch: int, state_dtype: str, bandwidth: float) -> str:
        """Name of the default model's config for ``batch`` on a GPU without a table, of
        ``bandwidth`` bytes/s (docs/tuning.md)."""

    def table_files(self, tables: dict[str, list[list]], origin: dict) -> dict[str, str]:
        """The files that hold this GPU's tables (state dtype -> ``[[largest batch | None, config
        name]]``; ``origin``: :func:`tools.tune.table_files.provenance`), as path relative to the
        solution folder -> new text: the GPU's table file, and any file that must name it."""


class LoadedByTheHarness:
    """What most adapters share: the solution's entry module, loaded as the judge loads it."""

    name: str

    def __init__(self, solution: ModuleType | None = None, source_dir: Path | None = None):
        """``solution``: its entry module, already loaded (tests); else :meth:`load` loads it.
        ``source_dir``: the folder its table files are written to (default ``solutions/<name>``)."""
        self.solution = solution
        self.source_dir = Path(source_dir) if source_dir else SOLUTIONS_DIR / self.name

    def load(self) -> None:
        """Import the solution through the harness's loader (a private copy of its folder)."""
        if self.solution is None:
            self.solution = load_solution(load_meta(SOLUTIONS_DIR / self.name))
