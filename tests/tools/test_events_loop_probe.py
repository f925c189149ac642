"""The events loop probe (tools/events_loop_probe.py) on the CPU: the written-out loop's order of
operations (FlashInfer's); the timing itself needs a GPU (the command line: test_probe_cli.py)."""

import torch

from tools.events_loop_probe import hand_loop, stop_rule_chunks


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
    times = hand_loop(lambda: log.append("call"), lambda: log.append("zero"), (3,))
    assert log == ["sync", *["zero", "record", "call", "record"] * 3, "sync"]
    assert times == [2000.0] * 3  # ms -> µs


def test_a_chunked_loop_synchronizes_after_each_chunk(monkeypatch):
    log = FakeEvent.log
    log.clear()
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    times = hand_loop(lambda: log.append("call"), lambda: log.append("zero"), (2, 1))
    assert log == ["sync", *["zero", "record", "call", "record"] * 2, "sync", "zero", "record", "call", "record",
                   "sync"]
    assert len(times) == 3


def test_the_stop_rule_chunks_are_the_ones_until_stable_times_when_it_never_stops():
    from harness.judge.timing.settings import TimingConfig
    from harness.judge.timing.stop_rule import until_stable

    for calls in (100, 20, 7, 45):
        seen = []
        until_stable(lambda first, count: seen.append(count) or [1.0 + first + i for i in range(count)], calls,
                     TimingConfig(max_noise=0.0))
        assert stop_rule_chunks(calls) == tuple(seen), calls
