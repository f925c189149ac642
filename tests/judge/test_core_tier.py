"""The judge's side of the core tiers without a GPU: a CUPTI chunk CUPTI could not time is timed
again on fresh calls, a bounded number of times (harness/judge/core_tier.py)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.facts import Tier
from harness.judge import core as core_mod
from harness.judge.core_tier import CUPTI_RETIMES, RETIME_CALLS, CoreTier, Rejection


def result(count: int, untimed: bool) -> core_mod.ChunkResult:
    records = [core_mod.UNTIMED_CHUNK if untimed else 1.0] * count
    samples = [0.0 if untimed else 2.0] * count
    return core_mod.ChunkResult(samples, [1e3] * count, [2.0] * count, records, [3.0] * count, count, 1e5,
                                np.zeros((count, core_mod.WORDS_PER_CALL), np.uint64), False)


class ScriptedTier(CoreTier):
    """A CoreTier whose chunks come from a script of untimed flags instead of a worker."""

    def __init__(self, untimed: list[bool]):  # noqa: D107 (no link, worker or GPU)
        self.script, self.asked = list(untimed), []
        self.retimed_chunks = self.retimed_calls = 0

    def chunk(self, tier, mode, first=0, count=0, warmup=0, warm_s=0.0, max_calls=1):
        self.asked.append((first, count, warmup))
        return result(count, self.script.pop(0))


def test_a_chunk_cupti_could_not_time_is_timed_again_on_calls_no_other_chunk_uses():
    tier = ScriptedTier([True, False])
    assert tier.timed_chunk(Tier.CUPTI, 16, 8, 0) == [2.0] * 8
    (first, _, _), (again, count, _) = tier.asked
    assert first == 16 and count == 8
    assert again >= RETIME_CALLS and again != first
    assert (tier.retimed_chunks, tier.retimed_calls) == (1, 8)


def test_the_retimes_of_one_tier_never_share_call_numbers():
    tier = ScriptedTier([True, True, False])
    tier.timed_chunk(Tier.CUPTI, 0, 4, 1)
    numbers = [set(range(first, first + count)) for first, count, _ in tier.asked]
    assert all(not (a & b) for i, a in enumerate(numbers) for b in numbers[i + 1:])


def test_past_the_bound_the_tier_is_rejected_not_retimed_forever():
    tier = ScriptedTier([True] * (CUPTI_RETIMES + 2))
    with pytest.raises(Rejection, match="without timestamps"):
        tier.timed_chunk(Tier.CUPTI, 0, 4, 0)
    assert len(tier.asked) == CUPTI_RETIMES + 1


def test_a_timed_chunk_is_kept_as_it_came():
    tier = ScriptedTier([False])
    assert tier.timed_chunk(Tier.CUPTI, 0, 3, 0) == [2.0] * 3
    assert tier.retimed_calls == 0


def test_untimed_is_the_cores_marker_only():
    assert result(2, True).untimed and not result(2, False).untimed
    zero = result(2, False)
    zero.records[:] = [0.0, 1.0]  # a call CUPTI saw nothing of: the judge's other refusal, not a retime
    assert not zero.untimed
