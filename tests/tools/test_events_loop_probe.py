"""The events loop probe (tools/events_loop_probe.py) on the CPU: the written-out loop's order of
operations (FlashInfer's); the timing itself needs a GPU (the command line: test_probe_cli.py)."""

import torch

from tools.events_loop_probe import hand_loop


class FakeEvent:
    """A CUDA event that logs its record and reads 2 ms from any start to any end."""

    log: list[str] = []

    def __init__(self, enable_timing=False):
        assert enable_timing

    def record(self):
        FakeEvent.log.append("record")

    def elapsed_time(self, other):
        return 2.0


def test_the_written_out_loop_flushes_then_brackets_each_call_and_synchronizes_only_around_them(monkeypatch):
    log = FakeEvent.log
    log.clear()
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    times = hand_loop(lambda: log.append("call"), lambda: log.append("zero"), 3)
    assert log == ["sync", *["zero", "record", "call", "record"] * 3, "sync"]
    assert times == [2000.0] * 3  # ms -> µs
