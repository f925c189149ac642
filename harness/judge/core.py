"""The judge's side of the timing core (``harness/judge/core/gdn_core.c``).

The core is a C extension the worker imports before the solution: it makes each timed call's
inputs from a key only the judge and the core hold, runs the call under its own timer and
copies the destinations into a capture area right after it (docs/judging.md, "The timed
call"). This module is everything the judge needs of it, and the one other place its binary
layouts are written down:

* :func:`build_core` compiles it (host C compiler, CPython headers; cached by source hash);
* :class:`CoreLink` holds the key (it reaches the worker through a pipe the core reads, never
  through Python) and the capture area, signs the commands and checks the signed results;
* :func:`random_inputs` reproduces, bit for bit, the inputs the core made for a call, and
  :func:`captured_outputs` reads a call's outputs back out of the capture area.

Layouts (little-endian; every command and result ends with its HMAC-SHA256 under the key):

* command: ``magic u32, kind u32, seq u64`` then, for a workload (kind 1): ``nonce u64,
  scale_kind u8 (0 the definition has no scalar, 1 given, 2 left out: None), scale f64, n_in u8,
  n_out u8``, per input ``name_len u16, name, kind u8 (0 none, 1 random, 2 stored), dtype u8
  (1 f32, 2 bf16), ndim u8, dims u64...``,
  per output the same with ``stride u32`` after ``ndim`` (one row of the last dimension in
  ``stride`` is captured); for a chunk (kind 2): ``tier u32, mode u32 (0 warm, 1 timed),
  first u64, count u32, warmup u32, warm_ns u64, max_calls u32``.
* result: ``magic u32, seq u64, tier u32, mode u32, first u64, count u32, calls u32,
  stopped u32 (1: run() raised after ``count`` calls), wall_ns f64, capture_bytes u64``, then
  ``count`` each of: samples (f64 µs), host times of ``run`` (f64 ns), and for the CUPTI tier (0
  for the others) spans (f64 µs), records counted (f64; :data:`UNTIMED_CHUNK` for every call of a
  chunk CUPTI could not time) and the CUDA events' bracket of each call
  (f64 µs); then ``count`` x
  :data:`WORDS_PER_CALL` captured words (u64).
* seeds: the first 8 bytes of HMAC(key, ``<5Q``: domain, a, b, c, d): domain 1 a random
  input ``(nonce, tier, call, input index)``, 2 a capture's row phase ``(nonce, tier, call,
  output index)``, 3 the sampled words of a result ``(seq, call in chunk, 0, 0)``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import struct
import subprocess
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness.data.definition import TORCH_DTYPES
from harness.facts import Tier
from harness.paths import cache_dir

SOURCE = Path(__file__).parent / "core" / "gdn_core.c"
#: The module name the worker imports (the file carries the interpreter's extension suffix).
MODULE = "_gdn_core"
#: Tiers whose calls the core makes and times (the CUPTI tier with libcupti, which it loads
#: itself), and their codes in a command. The contest and sync tiers are the contest libraries'
#: own timers (FlashInfer's; flashinfer-bench 0.1.2's loop), called in the worker; the judge
#: bounds their figures by the core's CUPTI figure (docs/judging.md). Code 2 was the core's copy
#: of the sync loop: left unused, so the other tiers' codes (and the seeds made from them) stay.
TIER_CODES = {Tier.WALLCLOCK: 0, Tier.EVENTS: 1, Tier.CUPTI: 3}
CORE_TIERS = frozenset(TIER_CODES)
MODE_WARM, MODE_TIMED = 0, 1
#: The definition's scalar input (the scale) in a workload command: the definition has none, the
#: workload gives its value, or leaves it out (the entry gets None).
SCALE_NONE, SCALE_GIVEN, SCALE_LEFT_OUT = 0, 1, 2
KIND_WORKLOAD, KIND_CHUNK = 1, 2
DTYPE_CODES = {"float32": 1, "bfloat16": 2}
SOURCE_CODES = {"none": 0, "random": 1, "stored": 2}
#: As in gdn_core.c: most calls of a chunk, and the captured words each call's result carries.
MAX_CHUNK, WORDS_PER_CALL = 64, 256
#: As in gdn_core.c: the records count of every call of a CUPTI chunk in which CUPTI delivered a
#: record without timestamps (CUpti_ActivityKernel: 0 for both when none could be collected) or
#: unfinished: which call it belongs to is unknown, so the chunk has no figures and is timed again.
UNTIMED_CHUNK = -1.0
#: f64 figures a result carries per call: sample, host time, CUPTI span, CUPTI records, events' bracket.
PER_CALL_FIGURES = 5
MAGIC = 0x43444E47
#: As in gdn_core.c (``MAX_SETS``, ``SET_BYTES``; a test reads them there): a workload's calls take
#: up to 8 buffer sets in turn, all within 2 GiB, so a figure is a median over as many placements
#: (where a buffer lies moves a B <= 8 figure by 2-8 %, docs/timing.md).
MAX_SETS, SET_BYTES = 8, 2 << 30
#: As in gdn_core.c (``POOL_ALIGN``; a test reads it there): within a set's one allocation each tensor starts at a
#: multiple of this, as PyTorch's caching allocator rounds its blocks (:func:`pooled_bytes`).
POOL_ALIGN = 512


def pooled_bytes(nbytes: int) -> int:
    """Bytes a tensor of ``nbytes`` takes in its buffer set's allocation: at least one, rounded up to
    :data:`POOL_ALIGN` (gdn_core.c's ``pooled_bytes``)."""
    return -(-max(1, nbytes) // POOL_ALIGN) * POOL_ALIGN


def buffer_sets(nbytes_per_set: int, on_gpu: bool = True) -> int:
    """How many buffer sets the timing core takes in turn for calls that move ``nbytes_per_set``
    bytes of buffers (every input and output of one call): as many as fit :data:`SET_BYTES`, at
    most :data:`MAX_SETS`, at least one; one on the CPU (no placement to vary) or for no bytes.
    gdn_core.c's ``sets_for_workload``, which the copy floor and ``tools.tier_parity`` follow so
    that every median they compare is over as many placements."""
    if not on_gpu or nbytes_per_set <= 0:
        return 1
    return max(1, min(MAX_SETS, SET_BYTES // nbytes_per_set))


def buffer_sets_for(values: Iterable) -> int:
    """:func:`buffer_sets` for calls on ``values``: the bytes of the tensors among them (anything
    else moves none), one set where none of them is off the CPU. What :func:`placement_copies`
    counts by."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    return buffer_sets(sum(t.numel() * t.element_size() for t in tensors),
                       on_gpu=any(t.device.type != "cpu" for t in tensors))


def placement_copies(values: tuple | dict, count: int | None = None) -> list:
    """``values`` (a call's arguments, a tuple, or its named inputs, a dict), then copies of it with
    every tensor cloned into an allocation of its own (on its device, so a GPU copy) and anything
    else shared: ``count`` in all, by default :func:`buffer_sets_for` its tensors (as many as the
    timing core takes: up to 8 within 2 GiB, one on a CPU).

    For the timers outside the core (the copy floor, the tuner, ``tools.tier_parity``'s plain
    process): where a buffer lies moves a B <= 8 figure by 2-8 % on an H100 or H200
    (docs/timing.md, "The offset is where the buffers lie"), so a median compared with the core's
    is taken over calls on as many placements, in turn."""
    named = values if isinstance(values, dict) else dict(enumerate(values))
    count = buffer_sets_for(named.values()) if count is None else count
    copies = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in named.items()} for _ in range(count - 1)]
    return [values, *(c if isinstance(values, dict) else tuple(c.values()) for c in copies)]


_RESULT_HEAD = struct.Struct("<IQIIQIIIdQ")


class CoreError(RuntimeError):
    """The core cannot be built here, or a result is not what the core signed for the command sent."""


# ------------------------------------------------------------------ building


def extension_file_name() -> str:
    """``_gdn_core`` with this interpreter's extension suffix (what ``import _gdn_core`` finds)."""
    return MODULE + sysconfig.get_config_var("EXT_SUFFIX")


def build_core() -> bytes:
    """The compiled core for this interpreter: built once per source text and Python version
    into ``<cache>/core/<key>/`` with the host C compiler (``$CC``, else ``cc``).

    Raises:
        CoreError: no C compiler or no CPython headers here, or the source did not compile.
    """
    source = SOURCE.read_bytes()
    include = sysconfig.get_paths()["include"]
    compiler = os.environ.get("CC", "cc")
    key = hashlib.sha256(source + extension_file_name().encode() + include.encode() + compiler.encode()).hexdigest()[:16]
    target = cache_dir() / "core" / key / extension_file_name()
    if target.is_file():
        return target.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    command = [compiler, "-O2", "-pthread", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{include}", str(SOURCE), "-o",
               str(partial), "-ldl"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CoreError(f"cannot run the C compiler {compiler!r} to build the timing core: {exc}") from exc
    if done.returncode != 0:
        raise CoreError(f"the timing core did not compile ({' '.join(command)}):\n{done.stderr[-3000:]}")
    os.replace(partial, target)
    return target.read_bytes()


def cupti_library() -> str:
    """The libcupti the core loads when this process has none loaded yet ("" when none is found):
    one already mapped here, else the one beside torch's CUDA libraries (the ``nvidia`` wheels),
    else the CUDA toolkit's (``$CUDA_HOME`` or /usr/local/cuda). Without one the CUPTI tier is
    reported unavailable, with the reason (never timed another way)."""
    try:
        mapped = [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                  if "/libcupti.so" in line]
    except OSError:
        mapped = []
    if mapped:
        return mapped[0]
    roots = [Path(torch.__file__).parent.parent / "nvidia"]
    roots += [Path(home) for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda") if home]
    patterns = ("*/lib/libcupti.so*", "lib64/libcupti.so*", "lib/libcupti.so*", "extras/CUPTI/lib64/libcupti.so*")
    for root in roots:
        for pattern in patterns:
            found = sorted(root.glob(pattern))
            if found:
                return str(found[0])
    return ""


# ------------------------------------------------------------------ the workload's layout


@dataclass(frozen=True)
class TensorSlot:
    """One input or output as the core lays it out: ``source`` (inputs: none, random, stored),
    the dtype the solution gets, the shape, and for outputs the capture stride."""

    name: str
    source: str
    dtype: str
    shape: tuple[int, ...]
    stride: int = 1

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor (the core's allocation for it, before its pool's rounding)."""
        return int(np.prod(self.shape)) * _itemsize(self.dtype)

    @property
    def row_bytes(self) -> int:
        return (self.shape[-1] if self.shape else 1) * _itemsize(self.dtype)

    @property
    def rows(self) -> int:
        return max(1, self.nbytes // self.row_bytes)

    @property
    def captured_row_slots(self) -> int:
        """Rows a call's capture of this output takes in the area (its layout, see gdn_core.c)."""
        return -(-self.rows // self.stride)


def _itemsize(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def capture_bytes_per_call(outputs: list[TensorSlot]) -> int:
    """Bytes of the capture area one timed call fills."""
    return sum(o.captured_row_slots * o.row_bytes for o in outputs)


# ------------------------------------------------------------------ the link


@dataclass
class ChunkResult:
    """What the core signed for one chunk: samples (µs), host time of each ``run`` (ns), for the
    CUPTI tier each call's span (µs), the records counted in it and the CUDA events' bracket of
    the call (µs), the calls made (a warm-up's count), its wall time (ns) and the captured words
    it sampled."""

    samples_us: list[float]
    host_ns: list[float]
    spans_us: list[float]
    records: list[float]
    brackets_us: list[float]
    calls: int
    wall_ns: float
    words: np.ndarray  # [count, WORDS_PER_CALL] uint64
    stopped: bool  # run() raised after the calls above (the worker sends its traceback beside the result)

    @property
    def untimed(self) -> bool:
        """CUPTI could not time this chunk (:data:`UNTIMED_CHUNK`): its samples are no figures."""
        return any(n == UNTIMED_CHUNK for n in self.records)


class CoreLink:
    """The judge's end of one worker's core: the key, the sequence of signed commands, the
    capture area (see module doc). The key leaves this process only through :attr:`key_fd`'s
    pipe, which the core reads before the solution is imported."""

    def __init__(self, area_bytes: int):
        from harness.judge.protocol import PayloadArea  # the same sealed memfd as the channel's areas

        self.key = secrets.token_bytes(32)
        self.seq = 0
        read_end, write_end = os.pipe()
        os.write(write_end, self.key)
        os.close(write_end)
        self.key_fd = read_end
        self.area = PayloadArea.create(area_bytes, "gdn-judge-capture")

    def seed(self, domain: int, a: int, b: int, c: int, d: int) -> int:
        mac = hmac.new(self.key, struct.pack("<5Q", domain, a, b, c, d), hashlib.sha256).digest()
        return int.from_bytes(mac[:8], "little")

    def _sign(self, kind: int, body: bytes) -> bytes:
        message = struct.pack("<IIQ", MAGIC, kind, self.seq) + body
        self.seq += 1
        return message + hmac.new(self.key, message, hashlib.sha256).digest()

    def workload_command(self, nonce: int, scale_kind: int, scale: float | None, inputs: list[TensorSlot],
                         outputs: list[TensorSlot]) -> bytes:
        """The signed command that lays out a workload's buffers in the core (``scale_kind``: one of
        :data:`SCALE_NONE`, :data:`SCALE_GIVEN`, :data:`SCALE_LEFT_OUT`)."""
        body = struct.pack("<QBdBB", nonce, scale_kind, float(scale or 0.0), len(inputs), len(outputs))
        for slot, is_output in [(s, False) for s in inputs] + [(s, True) for s in outputs]:
            name = slot.name.encode()
            body += struct.pack("<H", len(name)) + name
            body += struct.pack("<BBB", SOURCE_CODES[slot.source], DTYPE_CODES[slot.dtype], len(slot.shape))
            if is_output:
                body += struct.pack("<I", slot.stride)
            body += struct.pack(f"<{len(slot.shape)}Q", *slot.shape)
        return self._sign(KIND_WORKLOAD, body)

    def chunk_command(self, tier: str, mode: int, first: int = 0, count: int = 0, warmup: int = 0,
                      warm_s: float = 0.0, max_calls: int = 1) -> tuple[bytes, int]:
        """A signed chunk command and its sequence number (what the result must name)."""
        seq = self.seq
        body = struct.pack("<IIQIIQI", TIER_CODES[tier], mode, first, count, warmup, int(warm_s * 1e9), max_calls)
        return self._sign(KIND_CHUNK, body), seq

    def open_result(self, data: bytes, seq: int, tier: str, mode: int, first: int, count: int,
                    capture_bytes: int) -> ChunkResult:
        """The fields of a result the core signed for exactly this command.

        Raises:
            CoreError: a bad signature (not the core's), or fields that are not the command's.
        """
        if len(data) < _RESULT_HEAD.size + 32:
            raise CoreError("a core result too short to be one")
        body, mac = data[:-32], data[-32:]
        if not hmac.compare_digest(mac, hmac.new(self.key, body, hashlib.sha256).digest()):
            raise CoreError("a timing result the core did not sign (forged in the solution's process)")
        magic, got_seq, got_tier, got_mode, got_first, got_count, calls, stopped, wall_ns, got_capture = \
            _RESULT_HEAD.unpack_from(body)
        expected = (MAGIC, seq, TIER_CODES[tier], mode, first, count if mode == MODE_TIMED else 0)
        if stopped and got_count < count:  # run() raised: the calls before it
            expected = expected[:-1] + (got_count,)
        if (magic, got_seq, got_tier, got_mode, got_first, got_count) != expected:
            raise CoreError(f"a core result for another command: {(got_seq, got_tier, got_mode, got_first, got_count)}"
                            f", expected {expected[1:]}")
        if mode == MODE_TIMED and got_capture != capture_bytes:
            raise CoreError(f"the core captured {got_capture} bytes a call, the judge laid out {capture_bytes}")
        at, n = _RESULT_HEAD.size, got_count
        if len(body) != at + 8 * n * (PER_CALL_FIGURES + WORDS_PER_CALL):
            raise CoreError("a core result of the wrong length")
        figures = np.frombuffer(body, "<f8", PER_CALL_FIGURES * n, at).reshape(-1, n).tolist() if n \
            else [[] for _ in range(PER_CALL_FIGURES)]
        words = np.frombuffer(body, "<u8", n * WORDS_PER_CALL, at + 8 * PER_CALL_FIGURES * n)
        return ChunkResult(*figures, calls, wall_ns, words.reshape(n, WORDS_PER_CALL), bool(stopped))

    def read_capture(self, count: int, capture_bytes: int) -> np.ndarray:
        """A copy of the first ``count`` calls' captures (the worker can write the area again)."""
        return np.frombuffer(self.area.map, np.uint8, count * capture_bytes).copy().reshape(count, capture_bytes)

    def check_words(self, seq: int, capture: np.ndarray, words: np.ndarray) -> list[int]:
        """Calls (in the chunk) whose captured bytes differ from the words the core signed."""
        n_words = capture.shape[1] // 8
        if not n_words:
            return []
        seeds = [self.seed(3, seq, k, 0, 0) for k in range(capture.shape[0])]
        bits = _stream(seeds, WORDS_PER_CALL).numpy().view(np.uint64)  # every call's positions at once
        positions = (bits % np.uint64(n_words)).astype(np.int64)
        seen = np.take_along_axis(capture[:, : n_words * 8].view("<u8"), positions, axis=1)
        return [k for k in range(capture.shape[0]) if not np.array_equal(seen[k], words[k])]

    def close(self) -> None:
        self.area.close()


# ------------------------------------------------------------------ the core's inputs and captures, mirrored


def _as_signed(value: int) -> int:
    """A u64 as the int64 of the same bits (torch has no unsigned 64-bit arithmetic)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of u64 bits held in int64 (``>>`` on int64 is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


_GOLDEN = _as_signed(0x9E3779B97F4A7C15)
_MIX = (_as_signed(0xBF58476D1CE4E5B9), _as_signed(0x94D049BB133111EB))


def _stream(seeds: list[int], n: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """splitmix64 outputs 1..n of each seed (gdn_core.c: mix64(seed + j * golden)), one row per
    seed, as int64 holding the u64 bits: ``[len(seeds), n]``. int64 products wrap like u64 ones,
    so on a GPU this makes a B = 64 state in about a millisecond where numpy took 0.15-0.5 s, the
    cost that made verifying every timed call the judge's slowest step at large B."""
    z = torch.arange(1, n + 1, dtype=torch.int64, device=device).mul_(_GOLDEN)
    z = z + torch.tensor([_as_signed(s) for s in seeds], dtype=torch.int64, device=device)[:, None]
    z ^= _shift_right(z, 30)
    z *= _MIX[0]
    z ^= _shift_right(z, 27)
    z *= _MIX[1]
    z ^= _shift_right(z, 31)
    return z


def random_values(seeds: list[int], shape: tuple[int, ...], device: str | torch.device = "cpu") -> torch.Tensor:
    """The float32 values the core draws for a random input of ``shape`` from each of ``seeds``
    (Irwin-Hall of four 16-bit uniforms, as ``normal_of`` in gdn_core.c, bit for bit: every step
    is exact in float32 but the last product), on ``device``: ``[len(seeds), *shape]``."""
    x = _stream(seeds, math.prod(shape), device)
    total = torch.zeros(x.shape, dtype=torch.float32, device=device)
    for lane in range(4):
        total += (_shift_right(x, 16 * lane) & 0xFFFF).float().add_(0.5).mul_(1.0 / 65536.0)
    return total.sub_(2.0).mul_(1.7320508).reshape(len(seeds), *shape)


def random_inputs(link: CoreLink, nonce: int, tier: str, calls: list[int], index: int, slot: TensorSlot,
                  device: str | torch.device = "cpu") -> torch.Tensor:
    """Input ``index`` (a random one) of timed calls ``calls`` as float32 values on ``device``,
    ``[len(calls), *slot.shape]``: what the core handed the solution, before rounding to
    ``slot.dtype`` (the reference takes the values)."""
    return random_values([link.seed(1, nonce, TIER_CODES[tier], call, index) for call in calls], slot.shape, device)


def capture_phase(link: CoreLink, nonce: int, tier: str, call: int, index: int, slot: TensorSlot) -> int:
    """The first captured row of output ``index`` of call ``call``."""
    return 0 if slot.stride == 1 else link.seed(2, nonce, TIER_CODES[tier], call, index) % slot.stride


def captured_outputs(capture: np.ndarray, outputs: list[TensorSlot], phases: list[int]) -> dict[str, torch.Tensor]:
    """One call's capture split into its outputs' captured rows: ``{name: [rows, last dim]}``."""
    found, at = {}, 0
    for slot, phase in zip(outputs, phases):
        rows = len(range(phase, slot.rows, slot.stride))
        raw = torch.from_numpy(capture[at: at + rows * slot.row_bytes].copy())
        found[slot.name] = raw.view(TORCH_DTYPES[slot.dtype]).reshape(rows, -1)
        at += slot.captured_row_slots * slot.row_bytes
    return found
