"""The idle-start probe (tools/idle_start_probe.py) on the CPU: its idle start waits for the GPU's
queue before the call, and every mode is timed; the timing itself needs a GPU."""

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
