"""What crosses the process boundary between the judge (parent) and a worker.

A worker runs one solution and is untrusted: whatever it sends is data the
parent validates, never code the parent runs. Messages are frames on a pair of
pipes (:class:`Channel`): a JSON header, optionally followed by raw tensor
payloads whose dtype, shape and count the header declares and the parent
checks against what it expects. A payload's bytes travel through a shared
memory area per direction (:class:`PayloadArea`), its frame on the pipe says
only where they are: a 256 MB state through a pipe took seconds per call, and
the judge verifies several such calls per workload. No pickle crosses the
boundary (unpickling is code execution). Headers are parsed into the pydantic models below with
``extra="forbid"``: an unknown field, a wrong type or a message out of turn
ends that worker with RUNTIME_ERROR ("protocol violation"), never the run.

The conversation, per workload (``P`` parent, ``W`` worker)::

    P: Workload (+ payloads: the stored input tensors)
    repeat for each correctness trial:
        W: Checked (+ payloads: output bytes copied from the destinations)
        P: Go(proceed=True|False)          # the parent compared them
    P: Go(proceed=True) to time, or nothing more for this workload
    for each tier the timing core times (cupti, events, wallclock: harness/judge/core.py):
        per chunk of calls:  P: CoreChunk(signed command)   W: CoreChunkDone(signed result)
        (the core put every call's outputs in the capture area; the parent checks them all)
    for the library tiers (contest, sync: the contest's own timers, in the worker):
        P: TimeTier
        W: TierBegin
        per timed call i:  W: Called(i)   P: Go(proceed=verify?)
        and, once the worker reads that Go (before call i + ring size, or at the
        tier's end), if verify:   W: Checked(call=i, + payloads)   P: Received
        W: TierEnd(samples or the reason it is unavailable)
    P: EndWorkload   W: WorkloadDone

``Called``/``Go`` after every timed call is how the parent samples timed calls
the worker cannot predict: it decides after the call was made. The worker
reads the answers lazily (``worker.DestinationRing``), so no round trip sits
between two timed calls; the parent expects the asked calls' outputs in order,
all of them before ``TierEnd``. ``Received`` tells the worker that the parent
has copied a shipment out of the payload area, which the worker must not
overwrite before (it goes on timing meanwhile, reading answers as they come).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import math
import mmap
import os
import struct
from multiprocessing.connection import Connection
from typing import Annotated, Literal, Union

import torch
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.data.definition import TORCH_DTYPES

#: Largest header (bytes); tensors travel as payloads, never in headers.
MAX_HEADER_BYTES = 1 << 20
#: A payload's frame on the pipe: where its bytes are in the sender's area (offset, size).
_PAYLOAD_FRAME = struct.Struct("<QQ")
#: Payloads start at multiples of this in an area (any dtype's alignment).
_ALIGN = 64


class ProtocolError(RuntimeError):
    """The other side broke the protocol: a malformed, unknown, out-of-turn or oversized frame."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorHeader(_Message):
    """One tensor payload: its name, dtype (definition dtype name) and shape."""

    name: str
    dtype: str
    shape: list[int]

    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=TORCH_DTYPES[self.dtype]).element_size()


# ------------------------------------------------------------- parent -> worker

class Solution(_Message):
    """First message: which solution to load and how to run it."""

    kind: Literal["solution"] = "solution"
    package_dir: str  # the worker's private copy of the solution folder
    package_name: str
    entry_module: str
    state_dtype: str
    device: str
    definition: dict  # the definition JSON (the worker builds inputs with it)
    tiers: list[str]
    trials: int
    timing: dict  # TimingConfig fields


class Workload(_Message):
    """One workload to check and time; the stored tensors follow as payloads."""

    kind: Literal["workload"] = "workload"
    workload: dict  # the workload object (uuid, axes, inputs)
    tensors: list[TensorHeader]
    timed_trial_base: int  # timed call i of tier t draws its inputs with trial timed_trial(base, t, i)
    core: str | None = None  # hex of the signed command that lays the workload out in the timing core


class CoreChunk(_Message):
    """Run a chunk of calls in the timing core: hex of the command the parent signed (``tier`` and
    ``timed`` repeat what it says, for the worker; the core reads them from the signed bytes)."""

    kind: Literal["core_chunk"] = "core_chunk"
    command: str
    tier: str
    timed: bool


class TimeTier(_Message):
    """Time tier ``tier`` (the ``index``-th of the run's tiers) with the worker's own timers."""

    kind: Literal["time_tier"] = "time_tier"
    tier: str
    index: int


class EndWorkload(_Message):
    """Nothing more to time on this workload."""

    kind: Literal["end_workload"] = "end_workload"


class Go(_Message):
    """The parent's answer: proceed (after a check trial, or to timing), or verify (after a timed call)."""

    kind: Literal["go"] = "go"
    proceed: bool


class Received(_Message):
    """The parent copied a timed call's outputs out of the payload area: the worker may write it again."""

    kind: Literal["received"] = "received"


class Stop(_Message):
    """No more workloads: the worker exits."""

    kind: Literal["stop"] = "stop"


# ------------------------------------------------------------- worker -> parent

class Ready(_Message):
    """The solution imported."""

    kind: Literal["ready"] = "ready"


class LoadFailed(_Message):
    """The solution did not import: COMPILE_ERROR, or SKIPPED when it says this machine cannot run it."""

    kind: Literal["load_failed"] = "load_failed"
    skipped: bool
    log: str


class Checked(_Message):
    """Output bytes of one call (a correctness trial, or a sampled timed call), or what went wrong.

    ``problem`` is set when the call raised or broke the contract (destinations
    replaced, re-strided or not returned): then no payloads follow. ``inputs_modified``
    names the inputs a correctness trial's call changed; the parent judges that by the
    run's rules (harness.facts.Rules).
    """

    kind: Literal["checked"] = "checked"
    outputs: list[TensorHeader]
    call: int | None = None  # the timed call these outputs are from; None for a correctness trial
    problem: str | None = None
    problem_kind: Literal["exception", "contract", "shape", "dtype"] | None = None
    inputs_modified: list[str] = Field(default_factory=list)


class TierBegin(_Message):
    """The worker starts timing ``tier``; the parent's wall clock for it starts now."""

    kind: Literal["tier_begin"] = "tier_begin"
    tier: str


class Called(_Message):
    """Timed call ``index`` of the current tier has been made."""

    kind: Literal["called"] = "called"
    index: int


class TierEnd(_Message):
    """A tier's raw per-call samples (µs), or why it could not run here."""

    kind: Literal["tier_end"] = "tier_end"
    tier: str
    available: bool
    reason: str | None = None
    samples_us: list[float] = Field(default_factory=list)
    value_us: float | None = None  # the sync tier's headline (mean of trial means); others: median, computed by the parent
    trials: int | None = None
    span_median_us: float | None = None
    kernels_per_call: float | None = None
    kernel_names: list[str] = Field(default_factory=list)
    host_call_us: float | None = None  # events/sync: median host time of run() per call (a diagnostic)
    host_probe_us: float | None = None  # sync: the host's speed beside the tier (timing/host_speed.py; a diagnostic)
    host_probe_trials_us: list[float] = Field(default_factory=list)  # sync: that reading of each trial, in order
    after_return_us: float | None = None  # cupti: median µs the GPU went on after run() returned (core_tier.py)
    retimed_calls: int = 0  # cupti: calls of chunks CUPTI could not time, timed again (core_tier.CUPTI_RETIMES)


class Failed(_Message):
    """The workload raised outside a checked call (e.g. while timing); ``fatal``: the CUDA context is gone."""

    kind: Literal["failed"] = "failed"
    log: str
    fatal: bool = False


class WorkloadDone(_Message):
    kind: Literal["workload_done"] = "workload_done"


class CoreChunkDone(_Message):
    """Hex of what the timing core returned for a chunk (signed by the core, checked by the parent).
    For the CUPTI tier, beside it and not part of any figure: the kernels the core counted, and on
    the warm-up chunk why the core cannot record with CUPTI here (None: it can)."""

    kind: Literal["core_chunk_done"] = "core_chunk_done"
    result: str
    error: str | None = None  # run() raised: its traceback (the result holds the calls before it)
    kernel_names: list[str] = Field(default_factory=list)
    unavailable: str | None = None


ToWorker = Annotated[Union[Solution, Workload, Go, Received, Stop, CoreChunk, TimeTier, EndWorkload],
                     Field(discriminator="kind")]
FromWorker = Annotated[Union[Ready, LoadFailed, Checked, TierBegin, Called, TierEnd, Failed, WorkloadDone,
                             CoreChunkDone], Field(discriminator="kind")]
_TO_WORKER = TypeAdapter(ToWorker)
_FROM_WORKER = TypeAdapter(FromWorker)


class PayloadArea:
    """Shared memory that carries tensor payloads one way (sender writes, receiver copies out).

    A sealed memfd: its size is fixed before the worker sees it (F_SEAL_SHRINK,
    F_SEAL_GROW, F_SEAL_SEAL), so a worker cannot truncate it under the judge's
    mapping (a read past the end of a shrunk file is a SIGBUS in the reader).
    The receiver copies a payload out before it answers, and never reads the
    area again: a worker that rewrites the area meanwhile changes only the
    bytes judged as its own output, which it could have sent anyway.
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.map = mmap.mmap(fd, self.size)
        self._pinned: torch.Tensor | None = None  # the whole area, while it is registered with CUDA

    def pin(self) -> bool:
        """Page-lock this process's mapping of the area for CUDA, so a copy between it and the GPU
        is one DMA rather than a pass through the driver's staging buffers: a state of 33 MB
        (B = 64) crosses an area several times a workload, and those copies were most of what a
        fast solution's workload cost beyond its tiers at that size on the H100
        (results/speed/20261125-H100). Returns whether it is locked; where CUDA refuses (or
        there is none) the copies work as before, only slower. Undone by :meth:`unpin`.

        Through the driver (``cuMemHostRegister``), whose failures leave no error behind, where a
        failed ``cudaHostRegister`` would be reported by the runtime at this process's next launch."""
        if self._pinned is not None:
            return True
        driver = _cuda_driver()
        if driver is None or not torch.cuda.is_available():
            return False
        torch.cuda.synchronize()  # a runtime call on this thread: the device's primary context is current
        whole = torch.frombuffer(self.map, dtype=torch.uint8)
        if driver.cuMemHostRegister_v2(ctypes.c_void_p(whole.data_ptr()), ctypes.c_size_t(whole.numel()),
                                       ctypes.c_uint(_HOST_REGISTER_PORTABLE)) != 0:
            return False
        self._pinned = whole
        return True

    def unpin(self) -> None:
        """Undo :meth:`pin` (before the mapping is closed)."""
        if self._pinned is not None:
            _cuda_driver().cuMemHostUnregister(ctypes.c_void_p(self._pinned.data_ptr()))
            self._pinned = None

    def close(self) -> None:
        """Unpin and unmap (a view still alive elsewhere keeps the mapping until it is freed)."""
        self.unpin()
        try:
            self.map.close()
        except BufferError:  # a view still alive (an abandoned reader thread): freed with it
            pass

    @classmethod
    def create(cls, nbytes: int, name: str) -> "PayloadArea":
        """A new area of ``nbytes`` (at least one page), sealed at that size; its fd is inheritable."""
        fd = os.memfd_create(name, os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, max(int(nbytes), mmap.PAGESIZE))
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return cls(fd)

    def view(self, offset: int, header: TensorHeader) -> torch.Tensor:
        """A CPU tensor over the area's bytes at ``offset`` shaped as ``header`` (no copy)."""
        raw = torch.frombuffer(self.map, dtype=torch.uint8, count=header.nbytes(), offset=offset)
        return raw.view(TORCH_DTYPES[header.dtype]).reshape(header.shape)


#: CU_MEMHOSTREGISTER_PORTABLE: the page-locked memory counts as such for every CUDA context.
_HOST_REGISTER_PORTABLE = 1


def _cuda_driver():
    """The CUDA driver library (``libcuda.so.1``), or None where there is none."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to where the next payload may start (:data:`_ALIGN`)."""
    return -(-nbytes // _ALIGN) * _ALIGN


def area_bytes(headers) -> int:
    """Bytes an area needs for the payloads of one frame: ``headers``' tensors, each aligned."""
    return sum(_aligned(h.nbytes()) for h in headers)


class Channel:
    """Frames over a pipe pair: ``send``/``recv`` a header model, ``send_tensor``/``recv_tensor`` payloads
    (through the payload areas, :class:`PayloadArea`)."""

    def __init__(self, reader: Connection, writer: Connection, incoming: TypeAdapter,
                 send_area: PayloadArea, recv_area: PayloadArea):
        self.reader, self.writer, self.incoming = reader, writer, incoming
        self.send_area, self.recv_area = send_area, recv_area
        self._cursor = 0  # where the next payload of the current frame goes in send_area

    @classmethod
    def worker_side(cls, read_fd: int, write_fd: int, recv_area_fd: int, send_area_fd: int) -> "Channel":
        return cls(Connection(read_fd, writable=False), Connection(write_fd, readable=False), _TO_WORKER,
                   PayloadArea(send_area_fd), PayloadArea(recv_area_fd))

    @classmethod
    def parent_side(cls, reader: Connection, writer: Connection, send_area: PayloadArea,
                    recv_area: PayloadArea) -> "Channel":
        return cls(reader, writer, _FROM_WORKER, send_area, recv_area)

    def send(self, message: _Message) -> None:
        self._cursor = 0  # the receiver copied the last frame's payloads out before answering
        self.writer.send_bytes(message.model_dump_json().encode())

    def poll(self, timeout_s: float) -> bool:
        """Whether a frame (or the end of the stream) is waiting, within ``timeout_s``."""
        return self.reader.poll(timeout_s)

    def recv(self, *expected: type) -> _Message:
        """The next header, which must be one of ``expected``.

        Raises:
            ProtocolError: not a valid header, or not one of ``expected``.
            EOFError: the other side closed the pipe (it exited).
        """
        try:
            raw = self.reader.recv_bytes(MAX_HEADER_BYTES)
        except OSError as exc:  # recv_bytes raises OSError on an oversized frame
            raise ProtocolError(f"unreadable frame: {exc}") from exc
        try:
            message = self.incoming.validate_python(json.loads(raw))
        except (ValueError, ValidationError) as exc:
            raise ProtocolError(f"malformed message {raw[:200]!r}: {str(exc)[:300]}") from exc
        if expected and not isinstance(message, expected):
            names = [e.__name__ for e in expected]
            raise ProtocolError(f"expected {names}, got {type(message).__name__}: {raw[:200]!r}")
        return message

    def send_tensor(self, tensor: torch.Tensor) -> None:
        """A tensor's bytes, C order, written into the send area (straight from the GPU), then its frame.

        Raises:
            ProtocolError: the area is too small for the frame's payloads.
        """
        header = tensor_header("payload", tensor)
        offset, nbytes = self._cursor, header.nbytes()
        if offset + nbytes > self.send_area.size:
            raise ProtocolError(f"payload of {nbytes} bytes does not fit the {self.send_area.size}-byte area")
        self.send_area.view(offset, header).copy_(tensor.detach())
        self._cursor = offset + _aligned(nbytes)
        self.writer.send_bytes(_PAYLOAD_FRAME.pack(offset, nbytes))

    def recv_tensor(self, header: TensorHeader, expected_shape: tuple[int, ...], expected_dtype: str,
                    device: str | torch.device = "cpu") -> torch.Tensor:
        """The payload ``header`` announced, copied out of the receive area into a tensor of its own on
        ``device`` (straight onto a GPU: one copy, not a host clone and then another).

        Raises:
            ProtocolError: the header's dtype or shape is not the expected one, or the
                payload's frame is malformed, of another size, or outside the area.
        """
        if header.dtype != expected_dtype or tuple(header.shape) != tuple(expected_shape):
            raise ProtocolError(f"{header.name}: announced {header.dtype}{header.shape}, "
                                f"expected {expected_dtype}{list(expected_shape)}")
        try:
            frame = self.reader.recv_bytes(_PAYLOAD_FRAME.size)
        except OSError as exc:
            raise ProtocolError(f"{header.name}: payload frame larger than {_PAYLOAD_FRAME.size} bytes ({exc})") from exc
        if len(frame) != _PAYLOAD_FRAME.size:
            raise ProtocolError(f"{header.name}: malformed payload frame of {len(frame)} bytes")
        offset, nbytes = _PAYLOAD_FRAME.unpack(frame)
        if nbytes != header.nbytes():
            raise ProtocolError(f"{header.name}: payload of {nbytes} bytes, announced {header.nbytes()}")
        if offset % _ALIGN or offset + nbytes > self.recv_area.size:
            raise ProtocolError(f"{header.name}: payload at offset {offset} is misaligned or outside the "
                                f"{self.recv_area.size}-byte area")
        # the receiver's own copy, made before it answers: the area is the sender's to write again
        return self.recv_area.view(offset, header).to(device, copy=True)


def dtype_name(dtype: torch.dtype) -> str:
    """The definition's name of a torch dtype (``torch.bfloat16`` -> ``bfloat16``)."""
    return next(name for name, value in TORCH_DTYPES.items() if value == dtype)


def tensor_header(name: str, tensor: torch.Tensor) -> TensorHeader:
    return TensorHeader(name=name, dtype=dtype_name(tensor.dtype), shape=list(tensor.shape))


# ------------------------------------------------------------------ what a call is made of

#: Trial numbers of timed calls: tier ``t``'s call ``i`` draws trial ``base + t * TIER_STRIDE + i``.
TIER_STRIDE = 1_000_000


def timed_trial(base: int, tier_index: int, call: int) -> int:
    """The trial number (seed) of timed call ``call`` of the ``tier_index``-th tier; the parent uses the same."""
    return base + tier_index * TIER_STRIDE + call


def destination_layout(definition, axes: dict, state_dtype: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """Shape and dtype name of every destination: the definition's, except that
    ``new_state`` takes the variant's state dtype. The judge expects exactly these back."""
    return {name: (definition.shape_of(spec, axes), state_dtype if name == "new_state" else spec.dtype)
            for name, spec in definition.outputs.items()}


def destination_headers(definition, axes: dict, state_dtype: str) -> list[TensorHeader]:
    """:func:`destination_layout` as payload headers (what a shipment of one call's outputs holds)."""
    return [TensorHeader(name=name, dtype=dtype, shape=list(shape))
            for name, (shape, dtype) in destination_layout(definition, axes, state_dtype).items()]
