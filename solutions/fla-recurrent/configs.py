"""Launch configurations of the fla-recurrent kernel: per GPU, a table keyed by batch size.

The kernel has no loop, so its speed depends only on how the [B, HV, V, K]
state is cut into programs (``bv`` V rows of one head per program) and on how
many warps share one program. Small batches want many small programs to fill
the SMs (latency bound); large batches want programs that keep enough bytes
in flight per SM (bandwidth bound).

Each GPU it was tuned on has a file ``launch_tables/<device slug>.json``
written by ``python -m tools.tune --algo fla-recurrent`` on that GPU: its
device name (``torch.cuda.get_device_name``), the commit, command, date and
timing tier that produced it, the tuner's report, and ``tables[state dtype]``
= ``[[largest batch | null, {LaunchConfig fields}], ...]`` (first match
wins; null matches any batch). The run picks the table whose device name is
the current GPU's, exactly; a GPU without one gets :func:`model_config`, the
default model (docs/tuning.md). The choice is made once per device, never
autotuned on the hot path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import torch

HEAD_K = 128  # K: state columns, contiguous in memory (k-last)
HEAD_V = 128  # V: state rows
STATE_DTYPE = "float32"  # the only state this kernel serves: its tables' key
#: One file per GPU: ``<device slug>.json`` (the name is for people; the key is its ``device`` field).
TABLES_DIR = Path(__file__).with_name("launch_tables")


class LaunchConfig(NamedTuple):
    """One launch configuration of ``kernel.gdn_decode_kernel``.

    bv: V rows per program (power of two dividing 128).
    num_warps: warps per program.
    lanes_per_row: lanes that share one state row, 4 K columns each a piece
        (:data:`LANES_PER_ROW_CHOICES`; the kernel's ``KL = 4 * lanes_per_row``):
        32 is one row across the warp, the only layout of the tables tuned
        before the knob (2026-11-26); fewer lanes a row leave each lane more of
        the row's sum to add itself and fewer shuffle steps (kernel.py's module doc).
    (num_stages is not a knob: the kernel has no loop to pipeline.)
    """

    bv: int
    num_warps: int
    lanes_per_row: int = 32


#: Lanes per state row the kernel can be launched with (KL = 16 ... 128 K columns a piece).
LANES_PER_ROW_CHOICES = (32, 16, 8, 4)


#: ``(largest batch | None, config)`` pairs, first match wins; None matches any batch.
Table = tuple[tuple[int | None, LaunchConfig], ...]

#: The default model (docs/tuning.md): rho = state bytes of the batch / (bandwidth x L), L
#: below; the last ``(smallest rho, config)`` rung with rho >= its smallest rho wins.
#: Fitted to the H100 table (tools/tune/model_check.py compares it with every GPU's).
DEFAULT_LADDER: tuple[tuple[float, LaunchConfig], ...] = (
    (0.0, LaunchConfig(bv=4, num_warps=1)),  # latency bound: the most, smallest programs
    (2.0, LaunchConfig(bv=8, num_warps=1)),  # twice the state in flight: 8 rows per warp (fla's shape)
)
MEMORY_LATENCY_S = 0.9e-6  # L: DRAM latency the bytes in flight must cover, fitted
STATE_BYTES_PER_BATCH = 4 * 8 * HEAD_V * HEAD_K  # fp32 state of one batch element (HV = 8)
#: Bandwidth the model assumes off a CUDA device (the Triton interpreter): an H100's.
REFERENCE_BANDWIDTH = 3.352e12


# Above this many fp32 tile elements per thread the [bv, 128] tile no longer
# fits in registers and the compiler spills to local memory.
MAX_TILE_ELEMS_PER_THREAD = 128


def is_valid(cfg: LaunchConfig, head_v: int = HEAD_V, head_k: int = HEAD_K) -> bool:
    """Whether ``cfg`` tiles the state exactly and keeps the tile in registers; with fewer than 32
    lanes a row, also whether its warps have rows enough for every lane (``32 / lanes_per_row``
    rows a warp: fewer, and Triton gives lanes copies of other lanes' work)."""
    power_of_two = cfg.bv > 0 and cfg.bv & (cfg.bv - 1) == 0
    if not power_of_two or head_v % cfg.bv != 0 or cfg.lanes_per_row not in LANES_PER_ROW_CHOICES:
        return False
    if cfg.lanes_per_row < 32 and cfg.bv < cfg.num_warps * (32 // cfg.lanes_per_row):
        return False
    elems_per_thread = cfg.bv * head_k // (32 * cfg.num_warps)
    return 1 <= elems_per_thread <= MAX_TILE_ELEMS_PER_THREAD


def read_table_file(path: Path) -> tuple[str, Table]:
    """``(device name, fp32 table)`` of one ``launch_tables/*.json`` file.

    Raises:
        ValueError: no fp32 table, an invalid config, or a last entry that does not cover every batch
            (at import: a bad file fails there, not at launch).
    """
    data = json.loads(path.read_text())
    table = tuple((limit, LaunchConfig(**fields)) for limit, fields in data["tables"].get(STATE_DTYPE, ()))
    bad = [cfg for _, cfg in table if not is_valid(cfg)]
    if not table or bad or table[-1][0] is not None:
        raise ValueError(f"{path}: the {STATE_DTYPE} table must be valid configs whose last limit is null, "
                         f"not {table}")
    return data["device"], table


def read_tables(folder: Path = TABLES_DIR) -> dict[str, Table]:
    """Device name -> table, from every ``*.json`` in ``folder``."""
    return dict(read_table_file(path) for path in sorted(folder.glob("*.json")))


#: Every GPU's table, by device name.
LAUNCH_TABLES: dict[str, Table] = read_tables()


def model_config(batch: int, bandwidth: float) -> LaunchConfig:
    """The default model's config for ``batch`` on a GPU of ``bandwidth`` bytes/s (docs/tuning.md)."""
    rho = batch * STATE_BYTES_PER_BATCH / (bandwidth * MEMORY_LATENCY_S)
    return [cfg for smallest, cfg in DEFAULT_LADDER if rho >= smallest][-1]


class Selection(NamedTuple):
    """What one GPU uses: its table (``table`` not None) or the default model at ``bandwidth`` bytes/s."""

    source: str  # "table <device name>" or "default model (<bandwidth> GB/s)"
    table: Table | None
    bandwidth: float

    def config(self, batch: int) -> LaunchConfig:
        """The config for ``batch``: the first table entry whose limit covers it, else the model's."""
        if self.table is None:
            return model_config(batch, self.bandwidth)
        return next(cfg for largest, cfg in self.table if largest is None or batch <= largest)


def select(device: str, bandwidth: float) -> Selection:
    """What a GPU named ``device`` with ``bandwidth`` bytes/s of peak DRAM bandwidth uses:
    the table of that exact device name, else the default model."""
    table = LAUNCH_TABLES.get(device)
    if table is not None:
        return Selection(f"table {device}", table, bandwidth)
    return Selection(f"default model ({bandwidth / 1e9:.0f} GB/s)", None, bandwidth)


def device_selection(device) -> Selection:
    """:func:`select` for a torch device, from its name and memory clock and bus width
    (peak bandwidth = 2 x clock x bus width: double data rate); made once per device.
    A non-CUDA device (the Triton interpreter) gets the model at :data:`REFERENCE_BANDWIDTH`."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device not in _selections:
        if device.type != "cuda":
            _selections[device] = select(f"{device.type} (no GPU)", REFERENCE_BANDWIDTH)
        else:
            props = torch.cuda.get_device_properties(device)
            bandwidth = 2.0 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8
            _selections[device] = select(props.name, bandwidth)
    return _selections[device]


_selections: dict = {}  # torch.device -> Selection


def pick(batch: int, device="cuda") -> LaunchConfig:
    """Config for batch size ``batch`` on ``device`` (a torch device or its name; default the
    current CUDA device): that GPU's table, else the default model."""
    return device_selection(device).config(batch)


def launch_source(device="cuda") -> str:
    """``"table <device name>"`` or ``"default model (<bandwidth> GB/s)"``: what ``device`` uses."""
    return device_selection(device).source
