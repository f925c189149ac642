"""The placement probe (tools/placement_probe.py) on the CPU: where it puts the state and its
destination; the timing itself needs a GPU."""

import pytest

from tools.placement_probe import OFFSETS_KIB, placement, pool_elements


@pytest.mark.parametrize("offset", OFFSETS_KIB)
def test_the_state_and_its_destination_lie_apart_in_the_pool_at_the_offset(offset):
    count = 8 * 8 * 128 * 128  # B = 8
    source, target = placement(count, offset)
    assert source.start == offset * 256 and source.stop - source.start == count
    assert target.stop - target.start == count and source.stop <= target.start
    assert target.stop <= pool_elements(count)


def test_each_subject_prints_under_a_label_of_its_own():
    from tools.placement_probe import SEPARATE, SEPARATE_WARM, label

    labels = [label(subject) for subject in (*OFFSETS_KIB, SEPARATE, SEPARATE_WARM)]
    assert len(set(labels)) == len(labels)
    assert label(64) == "offset    64 KiB:" and SEPARATE_WARM in label(SEPARATE_WARM)
