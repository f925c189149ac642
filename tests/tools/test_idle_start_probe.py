"""The idle-start probe (tools/idle_start_probe.py) on the CPU: its idle start waits for the GPU's
queue before the call, and every mode is timed; the timing itself needs a GPU."""

import pytest
import torch

from tools import idle_start_probe


def test_the_idle_start_waits_for_the_queue_before_the_call(monkeypatch):
    order = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *device: order.append("synchronize"))
    idle_start_probe.idle_first(lambda: order.append("call"))()
    assert order == ["synchronize", "call"]


def test_every_subject_is_timed_every_way_in_every_round(monkeypatch):
    import tools.code_warm_probe as code_warm
    import tools.tier_parity as tier_parity

    calls = {"a": (lambda: None,) * 3, "b": (lambda: None,) * 3}
    monkeypatch.setattr(code_warm, "subject_pairs", lambda batch, workdir: calls)
    monkeypatch.setattr(tier_parity, "warm", lambda fn, args, seconds: None)
    timed = []
    monkeypatch.setattr(idle_start_probe, "time_mode", lambda mode, call: timed.append(mode) or 1.0)
    times = idle_start_probe.measure(1, repeats=2)
    assert set(times) == {f"{s} {m}" for s in calls for m in idle_start_probe.MODES}
    assert all(v == [1.0, 1.0] for v in times.values())
    assert timed == list(idle_start_probe.MODES) * 4


def test_the_window_mode_records_without_an_external_id_and_finds_each_call_by_its_window(monkeypatch):
    import harness.judge.cupti_recorder as recorder
    from tests.judge.test_cupti import FakeCupti

    fake = FakeCupti()
    pushes = []
    monkeypatch.setattr(fake, "activity_push_external_correlation_id", lambda kind, id: pushes.append(id))
    monkeypatch.setattr(recorder, "recording", lambda: recorder.Recording(fake, lambda: None))
    with idle_start_probe.window_recording() as recording:
        records = recording.time_calls(lambda _: fake.launch("gdn", 2_000), lambda index: None,
                                       lambda: fake.launch("flush", 90_000), iters=3, warmup=1)
    assert pushes == []
    assert [r.names for r in records] == [["gdn"]] * 3
    assert {r.attribution for r in records} == {"api-time-window"}
    assert {r.kernel_sum_us for r in records} == {2.0}


@pytest.mark.parametrize("width, name, count", [(4, "D32", 1024), (1, "D8", 4096)])
def test_the_memset_flush_zeroes_the_whole_buffer_on_the_current_stream(monkeypatch, width, name, count):
    import sys
    import types

    calls = []
    driver = types.SimpleNamespace(CUresult=types.SimpleNamespace(CUDA_SUCCESS=0),
                                   cuMemsetD32Async=lambda *args: calls.append(("D32", *args)) or (0,),
                                   cuMemsetD8Async=lambda *args: calls.append(("D8", *args)) or (0,))
    monkeypatch.setitem(sys.modules, "cuda.bindings", types.SimpleNamespace(driver=driver))
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=7))
    buffer = torch.empty(4096, dtype=torch.int8)
    idle_start_probe.memset_flush(buffer, width)()
    assert calls == [(name, buffer.data_ptr(), 0, count, 7)]


def test_each_recorder_mode_zeroes_its_own_fill(monkeypatch):
    """harness-2xL2 is torch's int32 fill of 2 x L2 whatever the cupti tier's flush became (the int8 fill), and
    harness-int8 the int8 fill of the same bytes: the probe's columns keep their meaning."""
    from harness.judge.timing import L2Flusher

    empty = torch.empty
    monkeypatch.setattr(L2Flusher, "l2_size", staticmethod(lambda device: 4096))
    monkeypatch.setattr(torch, "empty", lambda *shape, device=None, **kw: empty(*shape, **kw))  # no GPU here
    int32_fill = idle_start_probe.recorder_flush("harness-2xL2").__self__
    assert int32_fill.dtype == torch.int32 and int32_fill.numel() * 4 == 2 * 4096
    int8_fill = idle_start_probe.recorder_flush("harness-int8").__self__
    assert int8_fill.dtype == torch.int8 and int8_fill.numel() == 2 * 4096
