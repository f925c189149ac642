"""Host side: launch configuration, compilation and the compiled-kernel cache.

Kernels are compiled ahead of the first call from *fake* tensors (shapes,
dtypes, alignment; no data, no GPU needed to compile) with the TVM-FFI
calling convention, so the compiled function takes torch tensors directly and
reads the current torch stream itself: no Python-side DLPack conversion, no
host allocation and no stream query on the hot path (TVM-FFI checks the
tensors' shapes, dtypes, devices and alignment in C++ on every call).

What a compiled kernel depends on, and so its cache key (:class:`KernelKey`):
the state dtype, the head counts H and HV, the head sizes K and V, the
launch configuration (:class:`LaunchConfig`: tile height ``tile_v``, rows per
pipeline stage, load path and its register rows, cache policy, parts per
lane) and the target arch. The
batch size is a *dynamic* extent (one kernel serves every B; only the launch
grid depends on it) and ``scale`` is a runtime argument, so neither is in the
key. There is no q/k L2-normalization option: this definition has none.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import cutlass
import cutlass.cute as cute
import torch

from .gdn_cute_kernel import SMEM_SLACK_BYTES, THREADS, gdn_decode_launch, smem_tile_bytes

SUPPORTED_STATE_DTYPES = (torch.float32, torch.bfloat16)
#: tile heights the heuristic picks from (rows of V per CTA), largest first
TILE_CHOICES = (128, 64, 32, 16, 8)
#: a tile's shared memory must fit the 48 KiB a kernel gets without an opt-in
MAX_TILE_SMEM_BYTES = 48 * 1024
#: launch at least this many CTAs per SM where the tile height allows it
MIN_CTAS_PER_SM = 2
#: the ``regs`` load path holds a thread's whole share of the tile in
#: registers: at most this many bytes of state per thread (64 registers)
MAX_REG_TILE_BYTES_PER_THREAD = 256
MAX_ROWS_PER_STAGE = 4
#: the ``mixed`` path is compiled for as many resident CTAs per SM as its
#: shared memory allows, up to this many (128 threads x 64 registers x 8 =
#: the 64K-register file): its point is to hold more state per SM than
#: registers or shared memory alone
MAX_MIXED_CTAS_PER_SM = 8
#: shared memory per SM a kernel can use, and what the driver reserves per CTA
#: (H100 / B200: 227 KiB and 1 KiB; CUDA programming guide, compute capabilities)
SMEM_PER_SM_BYTES = 227 * 1024
SMEM_RESERVED_PER_CTA_BYTES = 1024
DEFAULT_ARCH = "sm_90a"
LOAD_PATHS = ("smem", "regs", "mixed")


class LaunchConfig(NamedTuple):
    """How the kernel cuts and moves the state (gdn_cute_kernel's docstring).

    tile_v: V rows per CTA.
    rows_per_stage: rows a thread reduces together (independent shuffles).
    load: ``"smem"`` (cp.async into shared memory), ``"regs"`` (ld.global
        straight into registers) or ``"mixed"`` (a thread's first
        ``reg_rows`` rows into registers, the rest into shared memory).
    streaming: ``.cs`` (evict-first) cache operator on the state stores, and
        on the loads into registers.
    parts: 16-byte pieces of a row per lane (1, or 2: half the lanes per
        row, one shuffle step less per reduction).
    reg_rows: rows per thread in registers on the ``mixed`` path (0 otherwise).
    """

    tile_v: int
    rows_per_stage: int
    load: str = "smem"
    streaming: bool = False
    parts: int = 1
    reg_rows: int = 0

    @property
    def name(self) -> str:
        """``t64/s1``, ``t64/s1/regs``, ``t64/s1/regs/cs/p2``, ``t128/s2/mix4``: how the tuner (``python -m tools.tune``) names it."""
        load = {"smem": [], "regs": ["regs"], "mixed": [f"mix{self.reg_rows}"]}[self.load]
        return "/".join([f"t{self.tile_v}", f"s{self.rows_per_stage}"] + load
                        + (["cs"] if self.streaming else []) + ([f"p{self.parts}"] if self.parts != 1 else []))

    @classmethod
    def from_name(cls, name: str) -> "LaunchConfig":
        """Inverse of :attr:`name`."""
        tile, stage, *flags = name.split("/")
        parts = next((int(flag[1:]) for flag in flags if flag.startswith("p")), 1)
        reg_rows = next((int(flag[3:]) for flag in flags if flag.startswith("mix")), 0)
        load = "mixed" if reg_rows else "regs" if "regs" in flags else "smem"
        return cls(int(tile[1:]), int(stage[1:]), load, "cs" in flags, parts, reg_rows)


@dataclass(frozen=True)
class KernelKey:
    """Everything a compiled kernel is specialized on: the problem shape, the
    state dtype, the launch configuration and the target arch."""

    state_dtype: torch.dtype
    num_q_heads: int
    num_v_heads: int
    head_k: int
    head_v: int
    config: LaunchConfig
    arch: str


def _state_bits(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits


def lanes_per_row(head_k: int, state_dtype: torch.dtype, parts: int = 1) -> int:
    """Threads sharing one V row: K / (``parts`` 16-byte pieces of state per lane)."""
    return head_k * _state_bits(state_dtype) // (128 * parts)


def row_groups(head_k: int, state_dtype: torch.dtype, parts: int = 1) -> int:
    """Rows a CTA works on at once (one per group of ``lanes_per_row`` threads)."""
    return THREADS // lanes_per_row(head_k, state_dtype, parts)


def validate_shapes(num_q_heads: int, num_v_heads: int, head_k: int, head_v: int, state_dtype: torch.dtype) -> None:
    """Raise ValueError for a problem shape this kernel design cannot serve."""
    if state_dtype not in SUPPORTED_STATE_DTYPES:
        raise ValueError(f"state dtype must be one of {SUPPORTED_STATE_DTYPES}, got {state_dtype}")
    if num_q_heads <= 0 or num_v_heads % num_q_heads:
        raise ValueError(f"HV ({num_v_heads}) must be a positive multiple of H ({num_q_heads})")
    lanes = lanes_per_row(head_k, state_dtype)
    if head_k * _state_bits(state_dtype) % 128 or lanes < 1 or lanes > 32 or lanes & (lanes - 1):
        raise ValueError(f"K={head_k} must give a power-of-two lanes per row <= 32 "
                         f"(K * bits / 128), got {lanes}")
    if not valid_tiles(head_v, head_k, state_dtype):
        raise ValueError(f"no tile height in {TILE_CHOICES} divides V={head_v} and is a multiple of "
                         f"{row_groups(head_k, state_dtype)} row groups")


def valid_tiles(head_v: int, head_k: int, state_dtype: torch.dtype, parts: int = 1) -> list[int]:
    """Tile heights (largest first) that divide V, give every row group whole
    rows and fit :data:`MAX_TILE_SMEM_BYTES` of shared memory."""
    groups = row_groups(head_k, state_dtype, parts)
    row_bytes = head_k * _state_bits(state_dtype) // 8
    return [t for t in TILE_CHOICES
            if head_v % t == 0 and t % groups == 0 and t * row_bytes <= MAX_TILE_SMEM_BYTES]


def choose_tile_v(batch: int, num_v_heads: int, head_k: int, head_v: int, state_dtype: torch.dtype,
                  num_sms: int) -> int:
    """Tile height: the largest that still launches ``MIN_CTAS_PER_SM`` CTAs
    per SM, else the smallest valid one (small batches need many CTAs to pull
    the state through enough SMs; large ones want fewer, longer pipelines)."""
    validate_shapes(1, num_v_heads, head_k, head_v, state_dtype)
    valid = valid_tiles(head_v, head_k, state_dtype)
    for tile in valid:
        if batch * num_v_heads * (head_v // tile) >= MIN_CTAS_PER_SM * num_sms:
            return tile
    return valid[-1]


def rows_per_stage(tile_v: int, head_k: int, state_dtype: torch.dtype, parts: int = 1) -> int:
    """Rows one thread processes per pipeline stage (independent work for ILP)."""
    return min(tile_v // row_groups(head_k, state_dtype, parts), MAX_ROWS_PER_STAGE)


def valid_parts(head_k: int, state_dtype: torch.dtype) -> list[int]:
    """16-byte pieces per lane and row that leave a power-of-two number of
    lanes per row, at least 8 (a row is then at least 128 contiguous bytes
    per access)."""
    return [p for p in (1, 2) if lanes_per_row(head_k, state_dtype, p) >= 8
            and head_k * _state_bits(state_dtype) % (128 * p) == 0]


def fits_registers(tile_v: int, head_k: int, state_dtype: torch.dtype) -> bool:
    """Whether a thread's share of a ``tile_v``-row tile fits the ``regs`` path's budget."""
    return tile_v * head_k * _state_bits(state_dtype) // 8 // THREADS <= MAX_REG_TILE_BYTES_PER_THREAD


def rows_per_thread(tile_v: int, head_k: int, state_dtype: torch.dtype, parts: int = 1) -> int:
    """State rows each thread owns in a ``tile_v``-row tile."""
    return tile_v // row_groups(head_k, state_dtype, parts)


def register_rows(config: LaunchConfig, head_k: int, state_dtype: torch.dtype) -> int:
    """Rows per thread ``config`` loads into registers (the kernel's ``reg_rows``)."""
    if config.load == "mixed":
        return config.reg_rows
    return rows_per_thread(config.tile_v, head_k, state_dtype, config.parts) if config.load == "regs" else 0


def mixed_register_rows(tile_v: int, head_k: int, state_dtype: torch.dtype, parts: int, stage_rows: int) -> list[int]:
    """``reg_rows`` choices of the ``mixed`` path: powers of two, a multiple
    of ``stage_rows``, below the rows a thread owns, within the register budget."""
    rows = rows_per_thread(tile_v, head_k, state_dtype, parts)
    row_bytes = head_k * _state_bits(state_dtype) // 8 // lanes_per_row(head_k, state_dtype, parts)
    return [r for r in (1, 2, 4, 8, 16) if r < rows and r % stage_rows == 0
            and r * row_bytes <= MAX_REG_TILE_BYTES_PER_THREAD]


def mixed_smem_bytes(config: LaunchConfig, head_k: int, state_dtype: torch.dtype) -> int:
    """Shared memory of one CTA on the ``mixed`` path: the rows not in registers
    (the kernel launch's own formula, less the alignment slack)."""
    return smem_tile_bytes(config.tile_v, head_k, _state_bits(state_dtype), config.parts, config.reg_rows)


def min_ctas_per_sm(config: LaunchConfig, head_k: int, state_dtype: torch.dtype) -> int:
    """Resident CTAs per SM the kernel is compiled for (0: the compiler's choice).

    Only the ``mixed`` path asks: as many CTAs as its shared memory allows,
    at most :data:`MAX_MIXED_CTAS_PER_SM`, so that registers never cap the
    occupancy below that (ptxas fits the registers to the bound).
    """
    if config.load != "mixed":
        return 0
    per_cta = mixed_smem_bytes(config, head_k, state_dtype) + SMEM_SLACK_BYTES + SMEM_RESERVED_PER_CTA_BYTES
    return max(1, min(SMEM_PER_SM_BYTES // per_cta, MAX_MIXED_CTAS_PER_SM))


def valid_configs(head_v: int, head_k: int, state_dtype: torch.dtype) -> list[LaunchConfig]:
    """Every :class:`LaunchConfig` the kernel can be compiled with (``python -m tools.tune`` times them)."""
    configs = []
    for parts in valid_parts(head_k, state_dtype):
        for tile in valid_tiles(head_v, head_k, state_dtype, parts):
            rows = rows_per_thread(tile, head_k, state_dtype, parts)
            loads = ["smem", "regs"] if fits_registers(tile, head_k, state_dtype) else ["smem"]
            for stage_rows in (r for r in (1, 2, 4) if r <= rows and rows % r == 0):
                for streaming in (False, True):
                    configs += [LaunchConfig(tile, stage_rows, load, streaming, parts) for load in loads]
                    configs += [LaunchConfig(tile, stage_rows, "mixed", streaming, parts, reg_rows)
                                for reg_rows in mixed_register_rows(tile, head_k, state_dtype, parts, stage_rows)]
    return configs


#: Measured launch tables for this definition's shape (H=4, HV=8, K=V=128), one file per GPU:
#: ``launch_tables/<device slug>.json``, written by ``python -m tools.tune --algo cutedsl-bf16``
#: on that GPU, with its device name (``torch.cuda.get_device_name``), the commit, command,
#: date, timing tier and report that produced it, and ``tables[state dtype]`` =
#: ``[[largest batch | null, {LaunchConfig fields}], ...]`` (first match wins, null: any batch).
TABLES_DIR = Path(__file__).with_name("launch_tables")
TUNED_SHAPE = (4, 8, 128, 128)  # (H, HV, K, V) the tables and the default model are for

#: ``(largest batch | None, config)`` pairs, first match wins.
Table = tuple[tuple[int | None, LaunchConfig], ...]

#: The default model of a GPU without a table, or of a state dtype its table lacks
#: (docs/tuning.md): rho = state bytes of the batch / (bandwidth x L); the last
#: ``(smallest rho, config)`` rung with rho >= its smallest rho wins. One config per octave of rho,
#: fitted to the H100 tune of 2026-11-26 with the fast gates (``python -m tools.tune.model_check
#: --algo cutedsl-bf16 --fit "NVIDIA H100 80GB HBM3"``); the H200's tables test it
#: (tools/tune/model_check.py compares it with every GPU's).
DEFAULT_LADDER: dict[torch.dtype, tuple[tuple[float, LaunchConfig], ...]] = {
    torch.float32: (
        (0.0, LaunchConfig(16, 1, "regs", True, 2)),
        (0.5, LaunchConfig(16, 1, "mixed", False, 2, 1)),
        (1.0, LaunchConfig(16, 1, "mixed", True, 2, 1)),
        (2.0, LaunchConfig(32, 1, "mixed", True, 2, 2)),
        (4.0, LaunchConfig(32, 2, "mixed", True, 2, 2)),
        (8.0, LaunchConfig(64, 1, "mixed", True, 2, 4)),
        (16.0, LaunchConfig(64, 4, "smem", False, 2)),
        (32.0, LaunchConfig(64, 2, "smem", False, 2)),
        (64.0, LaunchConfig(32, 4, "smem", False, 2)),
    ),
    torch.bfloat16: (
        (0.0, LaunchConfig(16, 2, "regs", True)),
        (0.5, LaunchConfig(16, 1, "regs", True)),
        (1.0, LaunchConfig(32, 1, "mixed", True, 2, 1)),
        (2.0, LaunchConfig(64, 4, "regs", True, 2)),
        (4.0, LaunchConfig(64, 2, "mixed", True, 1, 2)),
        (8.0, LaunchConfig(128, 4, "mixed", True, 1, 4)),
        (16.0, LaunchConfig(128, 4, "smem", False)),
        (32.0, LaunchConfig(64, 2, "smem", False)),
    ),
}
MEMORY_LATENCY_S = 0.9e-6  # L: DRAM latency the bytes in flight must cover, fitted
#: Bandwidth the model assumes off a CUDA device (compiling without a GPU): an H100's.
REFERENCE_BANDWIDTH = 3.352e12


def read_table_file(path: Path) -> tuple[str, dict[torch.dtype, Table]]:
    """``(device name, {state dtype: table})`` of one ``launch_tables/*.json`` file.

    Raises:
        ValueError: an invalid config or a table whose last entry does not cover every batch
            (at import: a bad file fails there, not at launch); KeyError: an unknown dtype name.
    """
    data = json.loads(path.read_text())
    tables = {}
    for name, entries in data["tables"].items():
        dtype = {str(d).removeprefix("torch."): d for d in SUPPORTED_STATE_DTYPES}[name]
        tables[dtype] = tuple((limit, LaunchConfig(**fields)) for limit, fields in entries)
        for _, config in tables[dtype]:
            validate_config(config, TUNED_SHAPE[3], TUNED_SHAPE[2], dtype)
        if not tables[dtype] or tables[dtype][-1][0] is not None:
            raise ValueError(f"{path}: the {name} table's last limit must be null (every batch)")
    return data["device"], tables


def read_tables(folder: Path = TABLES_DIR) -> dict[str, dict[torch.dtype, Table]]:
    """Device name -> its tables, from every ``*.json`` in ``folder``."""
    return dict(read_table_file(path) for path in sorted(folder.glob("*.json")))


def model_config(batch: int, state_dtype: torch.dtype, bandwidth: float) -> LaunchConfig:
    """The default model's config for ``batch`` on a GPU of ``bandwidth`` bytes/s (docs/tuning.md)."""
    _, num_v_heads, head_k, head_v = TUNED_SHAPE
    state_bytes = batch * num_v_heads * head_v * head_k * _state_bits(state_dtype) // 8
    rho = state_bytes / (bandwidth * MEMORY_LATENCY_S)
    return [config for smallest, config in DEFAULT_LADDER[state_dtype] if rho >= smallest][-1]


class Selection(NamedTuple):
    """What one GPU uses: its tables by state dtype (maybe none), else the default model at
    ``bandwidth`` bytes/s."""

    device: str
    tables: dict
    bandwidth: float

    def config(self, batch: int, state_dtype: torch.dtype) -> LaunchConfig:
        """The table's first entry whose limit covers ``batch``, else the model's config."""
        table = self.tables.get(state_dtype)
        if table is None:
            return model_config(batch, state_dtype, self.bandwidth)
        return next(config for limit, config in table if limit is None or batch <= limit)

    def source(self, state_dtype: torch.dtype) -> str:
        """``"table <device name>"`` or ``"default model (<bandwidth> GB/s)"``."""
        if state_dtype in self.tables:
            return f"table {self.device}"
        return f"default model ({self.bandwidth / 1e9:.0f} GB/s)"


def select(device: str, bandwidth: float) -> Selection:
    """What a GPU named ``device`` with ``bandwidth`` bytes/s of peak DRAM bandwidth uses:
    the tables of that exact device name, else (per state dtype) the default model."""
    return Selection(device, LAUNCH_TABLES.get(device, {}), bandwidth)


def device_selection(device: torch.device) -> Selection:
    """:func:`select` for a torch device, from its name and its memory clock and bus width
    (peak bandwidth = 2 x clock x bus width: double data rate). A non-CUDA device gets the
    model at :data:`REFERENCE_BANDWIDTH`."""
    if device.type != "cuda":
        return select(f"{device.type} (no GPU)", REFERENCE_BANDWIDTH)
    props = torch.cuda.get_device_properties(device)
    return select(props.name, 2.0 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8)


def choose_config(batch: int, num_q_heads: int, num_v_heads: int, head_k: int, head_v: int,
                  state_dtype: torch.dtype, num_sms: int, selection: Selection) -> LaunchConfig:
    """For the tuned shape, ``selection``'s config (the GPU's table, else the default model);
    for any other shape the heuristic (:func:`choose_tile_v`, shared-memory path)."""
    if (num_q_heads, num_v_heads, head_k, head_v) == TUNED_SHAPE:
        return selection.config(batch, state_dtype)
    tile = choose_tile_v(batch, num_v_heads, head_k, head_v, state_dtype, num_sms)
    return LaunchConfig(tile, rows_per_stage(tile, head_k, state_dtype))


def target_arch() -> str:
    """``CUTE_DSL_ARCH`` if set, else the current CUDA device's ``sm_XYa``, else sm_90a."""
    env = os.environ.get("CUTE_DSL_ARCH")
    if env:
        return env
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return DEFAULT_ARCH


def _fake_tensors(key: KernelKey):
    """Fake cute tensors for the 10 tensor arguments, sharing one dynamic batch extent."""
    state_type = cutlass.Float32 if key.state_dtype == torch.float32 else cutlass.BFloat16
    batch = cute.sym_int()

    def fake(dtype, shape, align=16):
        # Row-major compact (torch contiguous); only mode 0 (batch) is dynamic.
        return cute.runtime.make_fake_compact_tensor(dtype, shape, stride_order=tuple(reversed(range(len(shape)))),
                                                     assumed_align=align)

    h, hv, dk, dv = key.num_q_heads, key.num_v_heads, key.head_k, key.head_v
    return dict(
        q=fake(cutlass.BFloat16, (batch, 1, h, dk)),
        k=fake(cutlass.BFloat16, (batch, 1, h, dk)),
        v=fake(cutlass.BFloat16, (batch, 1, hv, dv)),
        state_in=fake(state_type, (batch, hv, dv, dk)),
        state_out=fake(state_type, (batch, hv, dv, dk)),
        A_log=fake(cutlass.Float32, (hv,), 4),
        a=fake(cutlass.BFloat16, (batch, 1, hv), 2),
        dt_bias=fake(cutlass.Float32, (hv,), 4),
        b=fake(cutlass.BFloat16, (batch, 1, hv), 2),
        out=fake(cutlass.BFloat16, (batch, 1, hv, dv)),
    )


def validate_config(config: LaunchConfig, head_v: int, head_k: int, state_dtype: torch.dtype) -> None:
    """Raise ValueError, naming the field, for a launch configuration the
    kernel cannot be compiled with (the ones :func:`valid_configs` lists pass)."""
    if config.parts not in valid_parts(head_k, state_dtype):
        raise ValueError(f"parts={config.parts} is not one of {valid_parts(head_k, state_dtype)} "
                         f"for K={head_k} and {state_dtype}")
    tiles = valid_tiles(head_v, head_k, state_dtype, config.parts)
    if config.tile_v not in tiles:
        raise ValueError(f"tile_v={config.tile_v} is not one of {tiles} for parts={config.parts}")
    rows = rows_per_thread(config.tile_v, head_k, state_dtype, config.parts)
    if config.rows_per_stage < 1 or rows % config.rows_per_stage:
        raise ValueError(f"rows_per_stage={config.rows_per_stage} does not divide the {rows} rows "
                         f"a thread owns (tile_v={config.tile_v}, parts={config.parts})")
    if config.load not in LOAD_PATHS:
        raise ValueError(f"load path must be one of {LOAD_PATHS}, got {config.load!r}")
    if config.load == "regs" and not fits_registers(config.tile_v, head_k, state_dtype):
        raise ValueError(f"tile_v={config.tile_v} holds more than {MAX_REG_TILE_BYTES_PER_THREAD} B of state "
                         "per thread: too many registers for the regs load path")
    if config.load == "mixed":
        choices = mixed_register_rows(config.tile_v, head_k, state_dtype, config.parts, config.rows_per_stage)
        if config.reg_rows not in choices:
            raise ValueError(f"reg_rows={config.reg_rows} is not one of {choices} for the mixed path of {config.name}")
    elif config.reg_rows:
        raise ValueError(f"reg_rows={config.reg_rows} is only for the mixed load path, not {config.load!r}")


@lru_cache(maxsize=None)
def compile_kernel(key: KernelKey):
    """Compile (once per key) and return the TVM-FFI callable.

    The callable's arguments: ``(q, k, v, state_in, state_out, A_log, a,
    dt_bias, b, out, scale)`` as torch tensors plus a Python float; it
    launches on the current torch CUDA stream.

    Raises:
        ValueError: a shape this design cannot serve, or an invalid
            launch configuration (:func:`validate_config`).
        Exception: whatever the CuTe DSL compiler raises (left unwrapped so
            its diagnostics reach the caller).
    """
    validate_shapes(key.num_q_heads, key.num_v_heads, key.head_k, key.head_v, key.state_dtype)
    validate_config(key.config, key.head_v, key.head_k, key.state_dtype)
    args = _fake_tensors(key)
    stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
    config = key.config
    return cute.compile(gdn_decode_launch, *args.values(), cutlass.Float32(1.0), stream,
                        config.tile_v, config.rows_per_stage, register_rows(config, key.head_k, key.state_dtype),
                        config.streaming, config.parts, min_ctas_per_sm(config, key.head_k, key.state_dtype),
                        options=f"--gpu-arch {key.arch} --enable-tvm-ffi")


#: Every GPU's tables, by device name (read last: reading validates with :func:`validate_config`).
LAUNCH_TABLES: dict[str, dict[torch.dtype, Table]] = read_tables()
