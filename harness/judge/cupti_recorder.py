"""CUPTI recorder (cupti-python): the GPU time of each ``run`` call in this process, in µs.

CUPTI (the CUDA Profiling Tools Interface) records a start and end timestamp,
taken on the GPU, for every kernel, memcpy and memset. This module turns those
records into one :class:`CallRecord` per timed call:

* ``kernel_sum_us`` the durations of the call's kernels + memcpys + memsets,
  summed (launch overhead and idle gaps between them are *not* counted);
* ``span_us``       first start to last end of those activities (gaps counted).

Which activities belong to which call: before each call we push a CUPTI
*external correlation id* (kind CUSTOM2; kineto, i.e. ``torch.profiler``, uses
CUSTOM0/CUSTOM1) on the calling thread and pop it afterwards. While it is
pushed, every CUDA runtime/driver API call made on that thread produces an
EXTERNAL_CORRELATION record mapping the API call's correlation id to our id;
the kernels/copies that API call launched carry the same correlation id. So
work launched by ``setup()`` or by the L2 ``flush()`` (outside the push/pop)
is never counted. Should no external-correlation record appear at all (not
expected), a fallback attributes API calls by CUPTI timestamps taken around
``fn`` (as flashinfer's ``bench_gpu_time_with_cupti`` does); each CallRecord
says which method was used.

Limits: work that ``fn`` launches from *another host thread* is not
attributed (the external id is per thread); kernels on concurrent streams may
overlap, so ``kernel_sum_us`` can exceed ``span_us``.

The grouping logic is in pure functions over plain :class:`Activity` records
(:func:`build_call_records`, :func:`call_record`) so it is unit-tested on the
CPU; only :func:`_time_calls` touches cupti-python, and it takes the module as
an argument so tests can pass a fake. A number is never labelled CUPTI unless
CUPTI recorded it: if CUPTI cannot record, :class:`CuptiUnavailable` is raised
(no CUDA-event fallback here).

cupti-python API used (names checked in cupti-python 13.4.0's ``cupti.pyi``
and samples): ``from cupti import cupti``; ``cupti.ActivityKind``
(CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, EXTERNAL_CORRELATION),
``cupti.ExternalCorrelationKind.CUSTOM2``, ``cupti.ActivityMemcpyKind``,
``activity_register_callbacks(requested, completed)`` where ``requested()``
returns ``(buffer_bytes, max_records)`` and ``completed(activities: list)``
gets record objects (``.kind .start .end .correlation_id .name``,
``.external_id`` on external-correlation records, ``.runtime_correlation_id``
and ``.copy_kind`` on memcpy records), ``activity_enable(kind)``,
``activity_disable(kind)``, ``activity_push_external_correlation_id(kind, id)``,
``activity_pop_external_correlation_id(kind) -> id``, ``activity_flush_all(1)``
(1 = forced flush), ``get_timestamp()`` (ns, same clock as the records).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

# Plain activity kinds (what the pure functions below understand).
KERNEL, MEMCPY, MEMSET, API, EXTERNAL = "kernel", "memcpy", "memset", "api", "external"
GPU_KINDS = (KERNEL, MEMCPY, MEMSET)

#: Bytes per CUPTI activity buffer. Large so that CUPTI does not hand a full
#: buffer back from its own worker thread mid-loop (a Python callback there
#: must take the GIL); everything is delivered by our forced flush instead.
BUFFER_BYTES = 16 * 1024 * 1024
#: cupti.activity_flush_all flag: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (= 1) also
#: delivers buffers that are not full yet.
FLUSH_FORCED = 1


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot record here (not installed, no GPU, activity enable failed)."""


@dataclass(frozen=True)
class Activity:
    """One CUPTI record, reduced to plain fields (times in ns, CUPTI clock).

    kind: one of ``kernel``, ``memcpy``, ``memset`` (GPU work), ``api``
    (a runtime/driver API call on the host), ``external`` (maps an API call's
    ``correlation_id`` to ``external_id``).
    """

    kind: str
    start_ns: int = 0
    end_ns: int = 0
    correlation_id: int = 0
    external_id: int | None = None
    name: str = ""
    external_kind: int | None = None  # external records: ExternalCorrelationKind value
    runtime_correlation_id: int = 0  # memcpy records: correlation id of the runtime API call


@dataclass(frozen=True)
class IterationTag:
    """How one call is identified: our external id, and the CUPTI timestamps
    (ns) taken just before and after ``fn`` (used only by the fallback)."""

    external_id: int
    cpu_start_ns: int = 0
    cpu_end_ns: int = 0


@dataclass
class CallRecord:
    """CUPTI timing of one timed ``run`` call; all times in µs."""

    kernel_sum_us: float  # sum of durations of kernels + device memcpy + memset the call launched
    span_us: float  # first start to last end of those activities (CPU gaps included)
    n_kernels: int  # number of kernel (and memcpy/memset) activities
    names: list[str]  # kernel names, deduplicated, in order of first start
    attribution: str = "external-correlation"  # or "api-time-window" (fallback)


# ----------------------------------------------------------------------------
# Pure functions: records -> CallRecords (unit-tested with synthetic records)
# ----------------------------------------------------------------------------

def call_record(activities: Sequence[Activity], attribution: str = "external-correlation") -> CallRecord:
    """Sum and span of one call's GPU activities.

    Raises:
        ValueError: no GPU activities, or a record whose end is not after its
            start (an incomplete record: CUPTI writes end=0 until the work ends).
    """
    gpu = sorted((a for a in activities if a.kind in GPU_KINDS), key=lambda a: (a.start_ns, a.end_ns))
    if not gpu:
        raise ValueError("no kernel/memcpy/memset activities")
    for a in gpu:
        if a.end_ns <= 0 or a.end_ns < a.start_ns:
            raise ValueError(f"incomplete CUPTI record {a.name or a.kind}: start {a.start_ns} end {a.end_ns}")
    total_ns = sum(a.end_ns - a.start_ns for a in gpu)
    span_ns = max(a.end_ns for a in gpu) - gpu[0].start_ns
    names = list(dict.fromkeys(a.name or a.kind for a in gpu))
    return CallRecord(total_ns / 1e3, span_ns / 1e3, len(gpu), names, attribution)


@dataclass
class Delivered:
    """What CUPTI delivered in one recording, in the compact forms attribution needs: a timed
    call of the per-head reference loop at B = 64 delivered ~193,000 records, and turning each
    into an :class:`Activity` cost more than the call itself (results/speed/20261125-H100)."""

    gpu: list[Activity] = field(default_factory=list)  # kernels, memcpys, memsets
    external: list[tuple[int, int, int | None]] = field(default_factory=list)  # (correlation id, external id, kind)
    api: list[tuple[int, int]] = field(default_factory=list)  # (correlation id, start ns): the fallback's only

    @classmethod
    def of(cls, records: Iterable[Activity]) -> "Delivered":
        """The compact form of plain :class:`Activity` records (tests, tools)."""
        out = cls()
        for r in records:
            if r.kind in GPU_KINDS:
                out.gpu.append(r)
            elif r.kind == EXTERNAL:
                out.external.append((r.correlation_id, r.external_id, r.external_kind))
            elif r.kind == API:
                out.api.append((r.correlation_id, r.start_ns))
        return out

    def extend(self, other: "Delivered") -> None:
        self.gpu += other.gpu
        self.external += other.external
        self.api += other.api

    def counts(self) -> dict[str, int]:
        return {"gpu": len(self.gpu), "external": len(self.external), "api": len(self.api)}


def _external_map(delivered: Delivered, wanted: set[int], external_kind: int | None) -> dict[int, int]:
    """correlation id -> our external id, from EXTERNAL_CORRELATION records."""
    out: dict[int, int] = {}
    for correlation_id, external_id, kind in delivered.external:
        if external_id not in wanted:
            continue
        if external_kind is not None and kind is not None and kind != external_kind:
            continue  # another tool's id (kineto's CUSTOM0/1) that happens to be equal
        out[correlation_id] = external_id
    return out


def _window_map(delivered: Delivered, tags: Sequence[IterationTag]) -> dict[int, int]:
    """Fallback: correlation id -> external id of the call whose [before, after]
    CUPTI timestamps contain the API call's start."""
    windows = sorted((t.cpu_start_ns, t.cpu_end_ns, t.external_id) for t in tags if t.cpu_end_ns > t.cpu_start_ns)
    out: dict[int, int] = {}
    for correlation_id, start_ns in delivered.api:
        for lo, hi, ext in windows:  # few calls; linear scan keeps it obviously right
            if lo <= start_ns <= hi:
                out[correlation_id] = ext
                break
    return out


def attribute_activities(records: Delivered | Sequence[Activity], tags: Sequence[IterationTag],
                         external_kind: int | None = None) -> tuple[dict[int, list[Activity]], str]:
    """Group GPU activities by the call (external id) that launched them.

    Returns ({external_id: [activities]}, method). Method is
    ``external-correlation`` when any external-correlation record names one
    of our ids, else ``api-time-window``. GPU activities whose correlation id
    maps to none of our calls (setup, L2 flush, other threads) are dropped.
    """
    delivered = records if isinstance(records, Delivered) else Delivered.of(records)
    wanted = {t.external_id for t in tags}
    corr = _external_map(delivered, wanted, external_kind)
    method = "external-correlation"
    if not corr:
        corr, method = _window_map(delivered, tags), "api-time-window"
    groups: dict[int, list[Activity]] = {t.external_id: [] for t in tags}
    for r in delivered.gpu:
        ext = corr.get(r.correlation_id)
        if ext is None and r.runtime_correlation_id:
            ext = corr.get(r.runtime_correlation_id)
        if ext is not None:
            groups[ext].append(r)
    return groups, method


def build_call_records(records: Delivered | Sequence[Activity], tags: Sequence[IterationTag], warmup: int,
                       external_kind: int | None = None) -> list[CallRecord]:
    """One CallRecord per timed call: ``tags`` lists warmup + timed calls in
    order; the first ``warmup`` are dropped.

    Raises:
        RuntimeError: a timed call has no attributed GPU activity (its number
            would not come from CUPTI), or one of its records is incomplete.
    """
    delivered = records if isinstance(records, Delivered) else Delivered.of(records)
    groups, method = attribute_activities(delivered, tags, external_kind)
    out = []
    for i, tag in enumerate(tags[warmup:]):
        acts = groups[tag.external_id]
        if not acts:
            raise RuntimeError(
                f"CUPTI recorded no kernel/memcpy/memset for timed call {i} (attribution {method}; "
                f"records seen: {delivered.counts()}); refusing to report a CUPTI number")
        try:
            out.append(call_record(acts, method))
        except ValueError as exc:
            raise RuntimeError(f"timed call {i}: {exc}") from exc
    return out


# ----------------------------------------------------------------------------
# cupti-python plumbing
# ----------------------------------------------------------------------------

def _import_cupti():
    """The ``cupti.cupti`` module, or CuptiUnavailable with the reason."""
    try:
        from cupti import cupti as cu  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or "").split(".")[0]
        if missing == "elftools":
            raise CuptiUnavailable("pyelftools missing (cupti-python needs it: pip install pyelftools)") from exc
        if missing == "cuda":
            raise CuptiUnavailable(f"cuda-bindings missing (cupti-python needs it): {exc}") from exc
        raise CuptiUnavailable(f"cupti-python not installed ({exc})") from exc
    except Exception as exc:  # e.g. libcupti failed to load
        raise CuptiUnavailable(f"cupti-python failed to import: {type(exc).__name__}: {exc}") from exc
    try:
        import elftools  # noqa: F401, PLC0415 - cupti-python imports it lazily
    except ImportError as exc:
        raise CuptiUnavailable("pyelftools missing (cupti-python needs it: pip install pyelftools)") from exc
    return cu


def _cupti_version() -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415
        return version("cupti-python")
    except Exception:
        return "unknown"


# Kinds we enabled and have not disabled yet (idempotent enable/disable, and a
# failure part-way through enabling still disables what was enabled).
_ENABLED: list[int] = []
# One recording session at a time: CUPTI's activity callbacks are process-wide.
_SESSION = threading.Lock()
# External ids, unique within the process so stale records never match.
_EXTERNAL_IDS = itertools.count(1)


def _enable(cu, kinds: Iterable[int]) -> None:
    for k in kinds:
        if k not in _ENABLED:
            cu.activity_enable(k)
            _ENABLED.append(k)


def _disable(cu, kinds: Iterable[int]) -> None:
    for k in kinds:
        if k in _ENABLED:
            _ENABLED.remove(k)
            cu.activity_disable(k)


def _disable_all(cu) -> list[str]:
    """Disable every kind we enabled; never raises. Returns the errors."""
    errors = []
    while _ENABLED:
        k = _ENABLED.pop()
        try:
            cu.activity_disable(k)
        except Exception as exc:  # keep disabling the others
            errors.append(f"activity_disable({k}): {exc}")
    return errors


def _detach(cu) -> list[str]:
    """CUPTI detached from the process (``cupti.finalize``), as FlashInfer's CUPTI timer leaves it;
    never raises. Returns the error, if any. Why: with its kinds only disabled, libcupti stays
    attached and a call's host path after it ran 8-12% longer (results/proof/20261127-H100-host-path-6470d35),
    which the sync tier and the events tier of a Python launch would read. The next recording
    attaches again."""
    try:
        cu.finalize()
    except Exception as exc:  # an older cupti-python without it: recording still worked
        return [f"finalize: {exc}"]
    return []


def cupti_status() -> tuple[bool, str]:
    """(True, "cupti-python <version>") if cupti-python imports and CUPTI can
    enable activity recording here; else (False, reason), e.g.
    "cupti-python not installed", "pyelftools missing", "no CUDA device".
    Never raises. The probe enables and at once disables CONCURRENT_KERNEL
    recording (skipped while a recording session of ours is running)."""
    try:
        try:
            cu = _import_cupti()
        except CuptiUnavailable as exc:
            return False, str(exc)
        ver = _cupti_version()
        if ver != "unknown" and ver.split(".")[0].isdigit() and int(ver.split(".")[0]) < 13:
            return False, f"cupti-python {ver} is too old (need >= 13)"
        try:
            import torch  # noqa: PLC0415
        except Exception as exc:
            return False, f"torch not importable: {exc}"
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        if _SESSION.acquire(blocking=False):
            try:
                _enable(cu, [int(cu.ActivityKind.CONCURRENT_KERNEL)])
            except Exception as exc:
                return False, f"CUPTI cannot enable activity recording: {type(exc).__name__}: {exc}"
            finally:
                _disable_all(cu)
                _detach(cu)
                _SESSION.release()
        return True, f"cupti-python {ver}"
    except Exception as exc:  # the contract: never raise
        return False, f"CUPTI status check failed: {type(exc).__name__}: {exc}"


class _Sink:
    """Receives CUPTI buffers and keeps, at once, what attribution needs of each record (the
    record objects point into a buffer CUPTI reuses after the callback): GPU activities as
    :class:`Activity`, external correlations of ``external_kind`` and API calls as tuples
    (:class:`Delivered`)."""

    def __init__(self, cu, external_kind: int):
        ak = cu.ActivityKind
        self._gpu_kinds = {int(ak.CONCURRENT_KERNEL): KERNEL, int(ak.KERNEL): KERNEL, int(ak.MEMCPY): MEMCPY,
                           int(ak.MEMSET): MEMSET}
        self._api_kinds = {int(ak.RUNTIME), int(ak.DRIVER)}
        self._external_kind = int(ak.EXTERNAL_CORRELATION)
        self._ours = external_kind
        self._memcpy_kind = getattr(cu, "ActivityMemcpyKind", None)
        self._lock = threading.Lock()  # CUPTI may call back from its own thread
        self.delivered = Delivered()
        self.errors: list[str] = []
        self.active = True

    def buffer_requested(self):
        return BUFFER_BYTES, 0  # 0: as many records as fit

    def buffer_completed(self, activities) -> None:
        # Must never raise: it runs inside a CUPTI callback.
        try:
            batch = self._convert(activities)
        except Exception as exc:
            with self._lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        with self._lock:
            if self.active:
                self.delivered.extend(batch)

    def take(self) -> Delivered:
        """What arrived since the last take (after a forced flush: everything recorded so far)."""
        with self._lock:
            taken, self.delivered = self.delivered, Delivered()
        return taken

    def _convert(self, activities) -> Delivered:
        batch = Delivered()
        gpu_kinds, api_kinds, external_kind, ours = self._gpu_kinds, self._api_kinds, self._external_kind, self._ours
        for a in activities:  # one pass, the commonest kinds first, no object made for them
            kind = a.kind
            if kind == external_kind:
                if a.external_kind == ours:  # kineto's (CUSTOM0/1) never name our calls
                    batch.external.append((a.correlation_id, a.external_id, ours))
            elif kind in api_kinds:
                batch.api.append((a.correlation_id, a.start))
            elif kind in gpu_kinds:
                batch.gpu.append(self._gpu_activity(gpu_kinds[kind], a))
        return batch

    def _gpu_activity(self, kind: str, a) -> Activity:
        start, end, corr = int(a.start), int(a.end), int(a.correlation_id)
        if kind == KERNEL:
            return Activity(KERNEL, start, end, corr, name=str(a.name))
        if kind == MEMSET:
            return Activity(MEMSET, start, end, corr, name="memset")
        name = "memcpy"
        try:
            name = f"memcpy {self._memcpy_kind(int(a.copy_kind)).name}"
        except Exception:
            pass
        return Activity(MEMCPY, start, end, corr, name=name,
                        runtime_correlation_id=int(getattr(a, "runtime_correlation_id", 0) or 0))


def _record_kinds(cu) -> list[int]:
    """The kinds on for a whole recording. CONCURRENT_KERNEL, not KERNEL: KERNEL
    serializes kernels and would change what we measure."""
    ak = cu.ActivityKind
    return [int(k) for k in (ak.EXTERNAL_CORRELATION, ak.CONCURRENT_KERNEL, ak.MEMCPY, ak.MEMSET)]


def _api_kinds(cu) -> list[int]:
    """RUNTIME and DRIVER: external-correlation records are emitted for API activity
    records, so the API kinds must be on while ``fn`` runs (torch launches through the
    runtime, Triton/cute-dsl kernels through the driver)."""
    ak = cu.ActivityKind
    return [int(ak.RUNTIME), int(ak.DRIVER)]


#: Switch the API kinds on only around each ``fn`` call (True), or once for the whole recording
#: (False). Around the call was chosen when the query calls of the input set-up, flush and
#: synchronize made ~240 of a call's ~263 records (results/speed/20261124-H100/cupti_cost_probe.txt).
#: With those calls quiet (:data:`QUIET_APIS`) the set-up leaves a few launch records a call, and
#: switching kinds per call costs more: CUPTI resets its per-API settings whenever a kind is
#: enabled, so the quiet list must be applied again every call. On the H100, a fast call's CUPTI
#: tier at B = 16 and 64 took 1.23 and 1.13 ms a call with the kinds on all along, 1.39 and 1.23
#: ms around the call with every API recorded, 4.26 and 3.41 ms around the call with the quiet
#: list re-applied; a traced call of the reference loop at B = 64 took 0.23, 0.51 and 0.26 s
#: (0.16 s untraced; results/speed/20261125-H100/call_cost_probe-54f2a10.txt).
API_WINDOW = False

#: API calls that only read the state of the process or the device and put no work on the GPU,
#: whose activity records CUPTI is told not to make (``activity_enable_runtime_api`` /
#: ``activity_enable_driver_api`` with 0; names as in cupti_runtime_cbid.h / cupti_driver_cbid.h).
#: A timed call of the per-head reference loop at B = 64 made 34 records a kernel on the H100,
#: 30 of them these calls and their external correlations: cudaGetDevice 9 a kernel,
#: cuDevicePrimaryCtxGetState 3.4, cudaGetLastError 1.6, cuKernelGetName 1
#: (results/speed/20261125-H100/call_cost_probe-54f2a10.txt). A kernel, memcpy or memset is attributed
#: through the API call that launched it, which none of these is, so leaving them out changes no
#: figure; every other API call is still recorded. A name this CUPTI does not know is skipped.
QUIET_APIS = {
    "RuntimeApiTraceCbid": ("cudaGetDevice_v3020", "cudaGetLastError_v3020", "cudaPeekAtLastError_v3020"),
    "DriverApiTraceCbid": ("cuDevicePrimaryCtxGetState", "cuCtxGetCurrent", "cuCtxGetDevice", "cuKernelGetName"),
}


def _quiet_apis(cu) -> list[tuple[Callable[[int, int], Any], int]]:
    """``(switch, cbid)`` for every :data:`QUIET_APIS` entry this cupti-python knows."""
    switches = {"RuntimeApiTraceCbid": getattr(cu, "activity_enable_runtime_api", None),
                "DriverApiTraceCbid": getattr(cu, "activity_enable_driver_api", None)}
    found = []
    for enum_name, names in QUIET_APIS.items():
        enum, switch = getattr(cu, enum_name, None), switches[enum_name]
        if enum is None or switch is None:
            continue
        found += [(switch, int(getattr(enum, name))) for name in names if hasattr(enum, name)]
    return found


class Recording:
    """One CUPTI activity recording: its callbacks registered and its kinds on from ``__enter__``
    to ``__exit__``, timed calls recorded chunk by chunk (:meth:`time_calls`). A tier keeps one
    open for all its chunks: registering, enabling and probing CUPTI again for every chunk of the
    stop rule cost a fast tier more than its calls. One recording at a time per process (CUPTI's
    activity callbacks are process-wide).

    Raises (on entry):
        RuntimeError: another recording of this process is open.
        CuptiUnavailable: CUPTI cannot record here (the reason in the message).
    """

    def __init__(self, cu, synchronize: Callable[[], None]):
        self.cu, self.synchronize = cu, synchronize
        self.external_kind = int(cu.ExternalCorrelationKind.CUSTOM2)
        self.api_kinds = _api_kinds(cu)
        self.quiet = _quiet_apis(cu)
        self.sink = _Sink(cu, self.external_kind)
        self.tags: list[IterationTag] = []  # the calls marked since the last collect
        self.open_call: tuple[int, int] | None = None  # (external id, start timestamp) of the call under way

    def __enter__(self) -> "Recording":
        if not _SESSION.acquire(blocking=False):
            raise RuntimeError("a CUPTI recording session is already running in this process")
        try:
            # Registered every time: torch.profiler (kineto) registers its own.
            self.cu.activity_register_callbacks(self.sink.buffer_requested, self.sink.buffer_completed)
            _enable(self.cu, _record_kinds(self.cu))
            if not API_WINDOW:
                self._api_on()
        except Exception as exc:
            self._close()
            raise CuptiUnavailable(f"CUPTI could not enable activity recording: {type(exc).__name__}: {exc}") from exc
        return self

    def __exit__(self, *exc_info) -> None:
        errors = self._close()
        if errors and exc_info[0] is None:
            raise RuntimeError(f"CUPTI activity could not be disabled: {errors}")

    def _close(self) -> list[str]:
        """Everything off, late records delivered and dropped, CUPTI detached (:func:`_detach`), the
        session free; the disable errors."""
        errors = _disable_all(self.cu)
        try:
            self.cu.activity_flush_all(FLUSH_FORCED)  # anything that completed late
        except Exception:
            pass
        _detach(self.cu)
        with self.sink._lock:
            self.sink.active = False
        _SESSION.release()
        return errors

    def _api_on(self) -> None:
        """The API kinds on, then the :data:`QUIET_APIS` off (enabling a kind resets them)."""
        _enable(self.cu, self.api_kinds)
        for switch, cbid in self.quiet:
            switch(cbid, 0)

    def time_calls(self, fn: Callable[[Any], Any], setup: Callable[[Any], Any], flush: Callable[[], None],
                   iters: int, warmup: int, after: Callable[[int], None] = lambda index: None) -> list[CallRecord]:
        """``warmup + iters`` calls (see :func:`time_calls_with_cupti`), one CallRecord per timed call.

        Raises:
            CuptiUnavailable: the API kinds could not be switched on around a call.
            RuntimeError: a timed call recorded nothing, the external-correlation stack broke,
                or CUPTI's buffer callback failed; whatever ``fn``/``setup``/``flush`` raise.
        """
        if iters < 1 or warmup < 0:
            raise ValueError(f"iters must be >= 1 and warmup >= 0 (got {iters}, {warmup})")
        for call in range(warmup + iters):
            index = call - warmup if call >= warmup else None  # timed-call number, None while warming up
            args = setup(index)
            flush()
            # Wait for setup and flush to finish: the call then starts on an
            # idle GPU, so span_us includes the host gaps between its launches.
            self.synchronize()
            self.begin_call()
            try:
                fn(args)
            finally:
                self.end_call()
            if index is not None:
                after(index)
        return self.collect(warmup)

    def begin_call(self) -> None:
        """Mark the start of a call: its API calls carry a new external correlation id from here.

        Raises:
            CuptiUnavailable: the API kinds or the external id could not be switched on.
        """
        ext = next(_EXTERNAL_IDS)
        if API_WINDOW:
            try:
                self._api_on()
            except Exception as exc:
                raise CuptiUnavailable(f"CUPTI could not enable API recording: {type(exc).__name__}: {exc}") from exc
        t0 = int(self.cu.get_timestamp())
        try:
            self.cu.activity_push_external_correlation_id(self.external_kind, ext)
        except Exception as exc:
            raise CuptiUnavailable(f"CUPTI external correlation push failed: {exc}") from exc
        self.open_call = (ext, t0)

    def end_call(self) -> None:
        """Mark the end of the call :meth:`begin_call` opened (also after it raised: always pop, or
        later API calls on this thread would stay tagged).

        Raises:
            RuntimeError: no call open, or the external-correlation stack broke.
        """
        if self.open_call is None:
            raise RuntimeError("CUPTI recording: a call ended that never began")
        (ext, t0), self.open_call = self.open_call, None
        try:
            popped: Any = self.cu.activity_pop_external_correlation_id(self.external_kind)
        except Exception as exc:
            popped = exc
        t1 = int(self.cu.get_timestamp())
        if API_WINDOW:
            _disable(self.cu, self.api_kinds)
        if isinstance(popped, Exception):
            raise RuntimeError(f"CUPTI external correlation pop failed: {popped}")
        if popped and int(popped) != ext:
            raise RuntimeError(f"CUPTI external correlation stack corrupted: pushed {ext}, popped {popped}")
        self.tags.append(IterationTag(ext, t0, t1))

    def collect(self, warmup: int = 0) -> list[CallRecord]:
        """One CallRecord per call marked since the last collect, the first ``warmup`` dropped.

        Raises:
            RuntimeError: a timed call recorded nothing, or CUPTI's buffer callback failed.
        """
        tags, self.tags = self.tags, []
        self.synchronize()  # every record has its end timestamp before we flush
        self.cu.activity_flush_all(FLUSH_FORCED)
        if self.sink.errors:
            raise RuntimeError(f"CUPTI buffer callback failed: {self.sink.errors[:3]}")
        return build_call_records(self.sink.take(), tags, warmup, external_kind=self.external_kind)


def _time_calls(cu, fn: Callable[[Any], Any], setup: Callable[[Any], Any], flush: Callable[[], None],
                iters: int, warmup: int, synchronize: Callable[[], None],
                after: Callable[[int], None] = lambda index: None) -> list[CallRecord]:
    """One :class:`Recording` of one chunk, with cupti-python passed in (tests pass a fake)."""
    with Recording(cu, synchronize) as recording:
        return recording.time_calls(fn, setup, flush, iters, warmup, after)


def recording() -> Recording:
    """A :class:`Recording` on this GPU (enter it to start recording).

    Raises:
        CuptiUnavailable: CUPTI cannot record here (reason in the message).
    """
    ok, reason = cupti_status()
    if not ok:
        raise CuptiUnavailable(reason)
    import torch  # noqa: PLC0415

    return Recording(_import_cupti(), torch.cuda.synchronize)


def time_calls_with_cupti(fn: Callable[[Any], Any], setup: Callable[[Any], Any], flush: Callable[[], None],
                          iters: int, warmup: int, after: Callable[[int], None] = lambda index: None) -> list[CallRecord]:
    """CUPTI-timed calls in a recording of their own: one CallRecord (µs) per timed call.

    Each of ``warmup + iters`` iterations: ``args = setup(index)`` (index: the
    timed-call number, None for warm-up calls); ``flush()``
    (cold L2); ``torch.cuda.synchronize()``; ``fn(args)`` with a CUPTI
    external correlation id pushed, so only the kernels/memcpys/memsets that
    ``fn`` launched (on this thread) count. Then synchronize, flush CUPTI's
    buffers, drop the ``warmup`` records.

    Raises:
        CuptiUnavailable: CUPTI cannot record here (reason in the message).
        RuntimeError: a timed call recorded no GPU activity, or CUPTI's
            buffers/disable failed, so the numbers would not be CUPTI's.
    """
    with recording() as recorder:
        return recorder.time_calls(fn, setup, flush, iters, warmup, after)
