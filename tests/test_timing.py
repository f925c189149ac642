"""harness.judge.timing helpers that need no GPU: the clock warm-up loop; the recorded commit."""

import time

import torch

from harness.records.environment import git_commit
from harness.judge.timing import WARM_MAX_CALLS, warm_gpu_clocks


def test_warm_gpu_clocks_calls_for_the_given_time_then_synchronizes(monkeypatch):
    syncs, log = [], []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    calls = warm_gpu_clocks(lambda a: log.append(("call", a)), lambda index=None: "args", lambda: log.append("flush"), 0.02)
    assert calls >= 1 and log[:2] == ["flush", ("call", "args")] and len(log) == 2 * calls
    assert syncs  # the last launch is waited for before timing starts
    assert warm_gpu_clocks(lambda a: None, lambda index=None: None, lambda: None, 0.0) == 1  # at least one call


def test_a_lying_clock_cannot_hold_the_warm_up_forever(monkeypatch):
    """A solution can patch time.perf_counter in its own process (fixture patch-timer: 1 ns per reading)."""
    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 1e-9)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert warm_gpu_clocks(lambda a: None, lambda index=None: None, lambda: None, 0.2) == WARM_MAX_CALLS


def test_git_commit_names_the_override_or_a_dirty_tree(monkeypatch):
    monkeypatch.setenv("GDN_BENCH_COMMIT", "0123456789ab")
    assert git_commit() == "0123456789ab"
    monkeypatch.delenv("GDN_BENCH_COMMIT")
    assert isinstance(git_commit(), str)


def test_proof_measurements_run_in_a_process_of_their_own():
    import os

    from tools.timing_proof import _in_fresh_process

    assert _in_fresh_process(os.getpid) != os.getpid()
