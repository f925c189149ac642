"""CPU tests of the CUPTI tier: record grouping on synthetic records, the
recording loop against a fake cupti-python module, and the "never label a
number CUPTI unless CUPTI recorded it" guarantees."""

from __future__ import annotations

import enum
import itertools
import sys
import types
from types import SimpleNamespace

import pytest

from harness.judge import cupti_recorder as hc
from harness.judge.cupti_recorder import (API, EXTERNAL, KERNEL, MEMCPY, MEMSET, Activity, CuptiUnavailable, IterationTag,
                                 build_call_records, call_record, cupti_status, time_calls_with_cupti)
from tools.profiler_check import END_MARKER_KERNEL, FLUSH_KERNEL, independent_kernel_times_us, split_at_delimiters_us

CUSTOM0, CUSTOM2 = 3, 5


def kern(corr, start, end, name="k"):
    return Activity(KERNEL, start, end, corr, name=name)


def ext(corr, ext_id, kind=CUSTOM2):
    return Activity(EXTERNAL, correlation_id=corr, external_id=ext_id, external_kind=kind)


# ---------------------------------------------------------------- pure functions

def test_two_kernels_with_gap_sum_less_than_span():
    rec = call_record([kern(1, 1_000, 3_000, "a"), kern(2, 10_000, 11_000, "b")])
    assert rec.kernel_sum_us == pytest.approx(3.0)  # 2 µs + 1 µs
    assert rec.span_us == pytest.approx(10.0)  # 1 µs .. 11 µs
    assert rec.kernel_sum_us < rec.span_us
    assert rec.n_kernels == 2 and rec.names == ["a", "b"]


def test_memcpy_and_memset_count_api_records_do_not():
    acts = [kern(1, 0 + 100, 600), Activity(MEMSET, 700, 800, 2, name="memset"),
            Activity(MEMCPY, 900, 1_100, 3, name="memcpy DTOD"), Activity(API, 0, 5_000, 4, name="211")]
    rec = call_record(acts)
    assert rec.n_kernels == 3
    assert rec.kernel_sum_us == pytest.approx(0.8)
    assert rec.span_us == pytest.approx(1.0)


def test_flush_and_setup_records_not_counted():
    tags = [IterationTag(7)]
    records = [
        kern(10, 0, 100_000, "flush_fill"),  # no external record: launched outside fn
        kern(11, 100_500, 101_000, "clone"),
        ext(12, 7), kern(12, 200_000, 204_000, "gdn_decode"),
    ]
    [rec] = build_call_records(records, tags, warmup=0, external_kind=CUSTOM2)
    assert rec.names == ["gdn_decode"]
    assert rec.kernel_sum_us == pytest.approx(4.0)
    assert rec.attribution == "external-correlation"


def test_warmup_dropped():
    tags = [IterationTag(1), IterationTag(2), IterationTag(3)]
    records = [ext(1, 1), kern(1, 0, 9_000), ext(2, 2), kern(2, 10_000, 12_000), ext(3, 3), kern(3, 20_000, 23_000)]
    recs = build_call_records(records, tags, warmup=1)
    assert [r.kernel_sum_us for r in recs] == pytest.approx([2.0, 3.0])


def test_iteration_without_records_raises():
    tags = [IterationTag(1), IterationTag(2)]
    records = [ext(1, 1), kern(1, 0, 1_000), ext(2, 2)]  # call 2 launched an API call but no kernel arrived
    with pytest.raises(RuntimeError, match="no kernel/memcpy/memset for timed call 1"):
        build_call_records(records, tags, warmup=0)


def test_warmup_without_records_is_not_an_error_but_timed_is():
    tags = [IterationTag(1), IterationTag(2)]
    assert len(build_call_records([ext(2, 2), kern(2, 0, 1_000)], tags, warmup=1)) == 1
    with pytest.raises(RuntimeError):
        build_call_records([ext(1, 1), kern(1, 0, 1_000)], tags, warmup=1)


def test_incomplete_record_raises():
    with pytest.raises(RuntimeError, match="incomplete"):
        build_call_records([ext(1, 1), kern(1, 5_000, 0)], [IterationTag(1)], warmup=0)


def test_memcpy_attributed_through_runtime_correlation_id():
    records = [ext(50, 1), Activity(MEMCPY, 0, 2_000, 99, name="memcpy HTOD", runtime_correlation_id=50)]
    [rec] = build_call_records(records, [IterationTag(1)], warmup=0)
    assert rec.names == ["memcpy HTOD"] and rec.kernel_sum_us == pytest.approx(2.0)


def test_other_tools_external_ids_ignored():
    # kineto pushes CUSTOM0 ids; an equal number must not pull its kernels in.
    records = [ext(1, 1, kind=CUSTOM0), kern(1, 0, 50_000, "not_ours"), ext(2, 1), kern(2, 60_000, 61_000, "ours")]
    [rec] = build_call_records(records, [IterationTag(1)], warmup=0, external_kind=CUSTOM2)
    assert rec.names == ["ours"]


def test_time_window_fallback_when_no_external_records():
    tags = [IterationTag(1, 100, 200), IterationTag(2, 300, 400)]
    records = [
        Activity(API, 50, 60, 10), kern(10, 1_000, 5_000, "flush"),  # API before the window: flush
        Activity(API, 150, 160, 11), kern(11, 6_000, 7_000, "call1"),
        Activity(API, 350, 360, 12), kern(12, 8_000, 10_000, "call2"),
    ]
    recs = build_call_records(records, tags, warmup=0)
    assert [r.names for r in recs] == [["call1"], ["call2"]]
    assert all(r.attribution == "api-time-window" for r in recs)


# ---------------------------------------------------------------- fake cupti-python

class FakeCupti:
    """Just enough of ``cupti.cupti`` to drive the recording loop: an API call
    made while an external id is pushed produces an external-correlation
    record; each launch produces an API record and a kernel record."""

    class ActivityKind(enum.IntEnum):
        MEMCPY = 1
        MEMSET = 2
        KERNEL = 3
        DRIVER = 4
        RUNTIME = 5
        CONCURRENT_KERNEL = 10
        EXTERNAL_CORRELATION = 39

    class ExternalCorrelationKind(enum.IntEnum):
        CUSTOM0 = 3
        CUSTOM1 = 4
        CUSTOM2 = 5

    class ActivityMemcpyKind(enum.IntEnum):
        HTOD = 1
        DTOD = 8

    class RuntimeApiTraceCbid(enum.IntEnum):
        cudaGetDevice_v3020 = 17
        cudaLaunchKernel_v7000 = 211

    def __init__(self, fail_enable=None, emit_external=True, queries=False):
        """``queries``: each launch is preceded by a cudaGetDevice, as torch's are."""
        self.queries = queries
        self.quiet: set[int] = set()  # runtime cbids whose records are off
        self.enabled: set[int] = set()
        self.enable_calls: list[int] = []
        self.fail_enable = fail_enable
        self.emit_external = emit_external
        self.callbacks = None
        self.stack: list[tuple[int, int]] = []
        self.pending: list[SimpleNamespace] = []
        self.clock = 0
        self.gpu_clock = 1_000_000
        self.corr = itertools.count(1)
        self.flushes = 0
        self.api_records = 0
        self.finalizes = 0

    def activity_register_callbacks(self, requested, completed):
        size, max_records = requested()
        assert size > 0 and max_records == 0
        self.callbacks = (requested, completed)

    def activity_enable(self, kind):
        if self.fail_enable is not None and kind == int(self.fail_enable):
            raise RuntimeError("CUPTI_ERROR_NOT_SUPPORTED")
        self.enable_calls.append(kind)
        self.enabled.add(kind)
        if kind == self.ActivityKind.RUNTIME:
            self.quiet.clear()  # as documented: enabling the kind overrides the per-API settings

    def activity_enable_runtime_api(self, cbid, enable):
        (self.quiet.discard if enable else self.quiet.add)(cbid)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def finalize(self):  # CUPTI detached: its callbacks forgotten, pending records dropped
        self.finalizes += 1
        self.callbacks, self.pending = None, []

    def activity_push_external_correlation_id(self, kind, id):
        self.stack.append((kind, id))

    def activity_pop_external_correlation_id(self, kind):
        k, i = self.stack.pop()
        assert k == kind
        return i

    def get_timestamp(self):
        self.clock += 10
        return self.clock

    def activity_flush_all(self, flag):
        assert flag == 1
        self.flushes += 1
        records, self.pending = self.pending, []
        if self.callbacks and records:
            self.callbacks[1](records)

    def api_call(self, cbid):
        """A runtime API call as CUPTI records it; its correlation id."""
        ak = self.ActivityKind
        corr = next(self.corr)
        if ak.RUNTIME in self.enabled and cbid not in self.quiet:
            self.clock += 1
            self.api_records += 1
            self.pending.append(SimpleNamespace(kind=ak.RUNTIME, start=self.clock, end=self.clock + 1,
                                                correlation_id=corr, cbid=cbid))
            if self.stack and self.emit_external and ak.EXTERNAL_CORRELATION in self.enabled:
                k, i = self.stack[-1]
                self.pending.append(SimpleNamespace(kind=ak.EXTERNAL_CORRELATION, correlation_id=corr,
                                                    external_id=i, external_kind=k))
        return corr

    # what a CUDA launch looks like to CUPTI
    def launch(self, name, dur_ns, kind="kernel"):
        ak = self.ActivityKind
        if self.queries:
            self.api_call(self.RuntimeApiTraceCbid.cudaGetDevice_v3020)
        corr = self.api_call(self.RuntimeApiTraceCbid.cudaLaunchKernel_v7000)
        start, self.gpu_clock = self.gpu_clock, self.gpu_clock + dur_ns
        if kind == "kernel" and ak.CONCURRENT_KERNEL in self.enabled:
            self.pending.append(SimpleNamespace(kind=ak.CONCURRENT_KERNEL, start=start, end=start + dur_ns,
                                                correlation_id=corr, name=name))
        if kind == "memcpy" and ak.MEMCPY in self.enabled:
            self.pending.append(SimpleNamespace(kind=ak.MEMCPY, start=start, end=start + dur_ns,
                                                correlation_id=corr, runtime_correlation_id=corr,
                                                copy_kind=8, bytes=512 * 1024))
        self.gpu_clock += 500  # idle gap


@pytest.fixture(autouse=True)
def _clean_module_state():
    yield
    assert hc._ENABLED == []
    assert not hc._SESSION.locked()


def _loop(fake, fn=None, iters=3, warmup=2):
    fn = fn or (lambda args: (fake.launch("gdn_decode_a", 4_000), fake.launch("gdn_decode_b", 2_000)))
    return hc._time_calls(fake, fn, setup=lambda index=None: fake.launch("clone_state", 1_000),
                          flush=lambda: fake.launch("l2_flush_fill", 90_000), iters=iters, warmup=warmup,
                          synchronize=lambda: None)


def test_loop_counts_only_fn_and_drops_warmup():
    fake = FakeCupti()
    recs = _loop(fake, iters=3, warmup=2)
    assert len(recs) == 3
    for r in recs:
        assert r.names == ["gdn_decode_a", "gdn_decode_b"]
        assert r.n_kernels == 2
        assert r.kernel_sum_us == pytest.approx(6.0)
        assert r.span_us == pytest.approx(6.5)  # 4 µs + 0.5 µs gap + 2 µs
        assert r.attribution == "external-correlation"
    assert fake.enabled == set() and fake.stack == []


@pytest.mark.parametrize("window", [True, False])
def test_api_activity_is_recorded_around_the_call_only(monkeypatch, window):
    """Set-up and flush made ~240 of a call's ~263 CUPTI records on the H100; the figures
    do not depend on whether their API calls are recorded."""
    monkeypatch.setattr(hc, "API_WINDOW", window)
    fake = FakeCupti()
    recs = _loop(fake, iters=3, warmup=2)
    assert [(r.names, r.kernel_sum_us, r.attribution) for r in recs] == [
        (["gdn_decode_a", "gdn_decode_b"], pytest.approx(6.0), "external-correlation")] * 3
    assert fake.api_records == 5 * (2 if window else 4)  # fn's two launches (+ set-up's and flush's)
    assert fake.enabled == set()


@pytest.mark.parametrize("window", [True, False])
def test_query_api_calls_are_not_recorded_and_change_no_figure(monkeypatch, window):
    """cudaGetDevice and the like made 30 of the 34 records a kernel of the reference loop cost on
    the H100; they launch nothing, so leaving their records out changes no figure, and they stay
    out after every re-enable of the API kinds (which resets CUPTI's per-API settings)."""
    monkeypatch.setattr(hc, "API_WINDOW", window)
    noisy, quiet = FakeCupti(queries=True), FakeCupti(queries=True)
    monkeypatch.setattr(hc, "QUIET_APIS", {"RuntimeApiTraceCbid": ()})
    loud = _loop(noisy, iters=3, warmup=2)
    monkeypatch.setattr(hc, "QUIET_APIS", {"RuntimeApiTraceCbid": ("cudaGetDevice_v3020", "cudaNotInThisCupti")})
    hushed = _loop(quiet, iters=3, warmup=2)
    assert [(r.names, r.kernel_sum_us, r.span_us) for r in hushed] == [(r.names, r.kernel_sum_us, r.span_us)
                                                                       for r in loud]
    assert quiet.api_records == noisy.api_records // 2  # only the launches' records are left


def test_one_recording_serves_several_chunks():
    fake = FakeCupti()
    launch = lambda args: fake.launch("gdn_decode", 3_000)  # noqa: E731
    with hc.Recording(fake, lambda: None) as recording:
        first = recording.time_calls(launch, lambda index=None: None, lambda: None, iters=2, warmup=1)
        second = recording.time_calls(launch, lambda index=None: None, lambda: None, iters=3, warmup=0)
        assert hc._SESSION.locked() and fake.enabled
    assert [len(first), len(second)] == [2, 3]
    assert all(r.kernel_sum_us == pytest.approx(3.0) for r in first + second)
    assert fake.enabled == set()


def test_a_second_recording_at_once_is_refused():
    fake = FakeCupti()
    with hc.Recording(fake, lambda: None):
        with pytest.raises(RuntimeError, match="already running"):
            with hc.Recording(fake, lambda: None):
                pass


def test_loop_memcpy_counted():
    fake = FakeCupti()
    [rec] = _loop(fake, fn=lambda a: fake.launch("copy", 3_000, kind="memcpy"), iters=1, warmup=0)
    assert rec.names == ["memcpy DTOD"] and rec.kernel_sum_us == pytest.approx(3.0)


def test_loop_falls_back_to_time_windows():
    fake = FakeCupti(emit_external=False)
    recs = _loop(fake, iters=2, warmup=1)
    assert [r.names for r in recs] == [["gdn_decode_a", "gdn_decode_b"]] * 2
    assert all(r.attribution == "api-time-window" for r in recs)


def test_loop_fn_launching_nothing_raises():
    fake = FakeCupti()
    with pytest.raises(RuntimeError, match="no kernel"):
        _loop(fake, fn=lambda args: None)
    assert fake.enabled == set()


def test_loop_fn_error_still_disables_and_pops():
    fake = FakeCupti()

    def boom(args):
        fake.launch("k", 100)
        raise ValueError("kernel failed")

    with pytest.raises(ValueError, match="kernel failed"):
        _loop(fake, fn=boom)
    assert fake.enabled == set() and fake.stack == []
    assert len(_loop(fake)) == 3  # the session lock was released


def test_a_recording_detaches_cupti_when_it_ends_and_the_next_one_attaches_again():
    fake = FakeCupti()
    first = _loop(fake)
    assert fake.finalizes == 1 and fake.enabled == set() and fake.callbacks is None
    assert [r.kernel_sum_us for r in _loop(fake)] == [r.kernel_sum_us for r in first]  # recorded again
    assert fake.finalizes == 2


def test_a_cupti_without_finalize_still_records():
    fake = FakeCupti()
    fake.finalize = None  # not callable: an older cupti-python
    assert len(_loop(fake)) == 3 and hc._detach(fake) and fake.enabled == set()


def test_enable_failure_is_unavailable_and_leaves_cupti_off():
    fake = FakeCupti(fail_enable=FakeCupti.ActivityKind.CONCURRENT_KERNEL)
    with pytest.raises(CuptiUnavailable, match="could not enable"):
        _loop(fake)
    assert fake.enabled == set()


def test_enable_is_idempotent():
    fake = FakeCupti()
    try:
        hc._enable(fake, [1, 2])
        hc._enable(fake, [2, 3])
        assert fake.enable_calls == [1, 2, 3]
    finally:
        assert hc._disable_all(fake) == []
    assert hc._disable_all(fake) == [] and fake.enabled == set()


def test_bad_iteration_counts():
    with pytest.raises(ValueError):
        _loop(FakeCupti(), iters=0)


# ---------------------------------------------------------------- availability

def test_status_without_cupti(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # makes `import cupti` fail
    ok, reason = cupti_status()
    assert ok is False
    assert "cupti-python not installed" in reason


def test_time_calls_without_cupti_raises_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    calls = []
    with pytest.raises(CuptiUnavailable, match="not installed"):
        time_calls_with_cupti(lambda a: calls.append("fn"), lambda index=None: None, lambda: None, iters=2, warmup=0)
    assert calls == []  # nothing ran, so nothing could be mislabelled


def _install_fake_cupti(monkeypatch):
    pkg = types.ModuleType("cupti")
    pkg.cupti = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "cupti.cupti", pkg.cupti)


def test_status_without_pyelftools(monkeypatch):
    _install_fake_cupti(monkeypatch)
    monkeypatch.setitem(sys.modules, "elftools", None)
    ok, reason = cupti_status()
    assert ok is False and "pyelftools missing" in reason


def test_status_without_cuda_device(monkeypatch):
    torch = pytest.importorskip("torch")
    _install_fake_cupti(monkeypatch)
    monkeypatch.setitem(sys.modules, "elftools", types.ModuleType("elftools"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ok, reason = cupti_status()
    assert ok is False and reason == "no CUDA device"
    with pytest.raises(CuptiUnavailable, match="no CUDA device"):
        time_calls_with_cupti(lambda a: None, lambda index=None: None, lambda: None, iters=1, warmup=0)


def test_status_probe_enables_and_disables(monkeypatch):
    torch = pytest.importorskip("torch")
    _install_fake_cupti(monkeypatch)
    monkeypatch.setitem(sys.modules, "elftools", types.ModuleType("elftools"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fake = sys.modules["cupti"].cupti
    ok, version = cupti_status()
    assert ok is True and version.startswith("cupti-python")
    assert fake.enable_calls == [int(FakeCupti.ActivityKind.CONCURRENT_KERNEL)] and fake.enabled == set()
    assert fake.finalizes == 1  # the probe leaves CUPTI detached, as FlashInfer's timer does


def test_status_probe_failure_is_reported(monkeypatch):
    torch = pytest.importorskip("torch")
    pkg = types.ModuleType("cupti")
    pkg.cupti = FakeCupti(fail_enable=FakeCupti.ActivityKind.CONCURRENT_KERNEL)
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "elftools", types.ModuleType("elftools"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ok, reason = cupti_status()
    assert ok is False and "cannot enable activity recording" in reason


def test_status_here_never_raises():
    ok, reason = cupti_status()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


# ---------------------------------------------------------------- torch.profiler cross-check

def test_split_at_delimiters_sums_each_calls_kernels():
    timeline = [("copy_kernel", 30.0, 2.0), ("FillFunctor<int>", 0.0, 90.0), ("gdn_decode", 20.0, 5.0),
                ("FillFunctor<signed char>", 40.0, 1.0), ("clone_of_next_setup", 50.0, 30.0),
                ("FillFunctor<int>", 100.0, 90.0), ("FillFunctor<float>", 150.0, 1.0),
                ("gdn_decode", 200.0, 6.0), ("FillFunctor<signed char>", 210.0, 1.0)]
    # out of order on purpose; the float fill is the call's own; the clone after
    # the end marker belongs to the next iteration's setup and is not counted
    assert split_at_delimiters_us(timeline, FLUSH_KERNEL, END_MARKER_KERNEL, 2) == pytest.approx([7.0, 7.0])


def test_split_at_delimiters_refuses_a_wrong_count_or_an_empty_call():
    with pytest.raises(RuntimeError, match="expected 3"):
        split_at_delimiters_us([("Fill", 0.0, 1.0), ("k", 1.0, 1.0)], ("Fill",), ("End",), 3)
    with pytest.raises(RuntimeError, match=r"calls \[1\]"):
        split_at_delimiters_us([("Fill", 0.0, 1.0), ("k", 1.0, 1.0), ("End", 1.5, 0.1), ("Fill", 2.0, 1.0)],
                               ("Fill",), ("End",), 2)


def test_independent_times_need_cuda(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA"):
        independent_kernel_times_us(lambda a: None, lambda index=None: None, lambda: None, iters=1)
