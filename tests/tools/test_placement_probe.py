"""The placement probe (tools/placement_probe.py) on the CPU: where it puts the state and its
destination; the timing itself needs a GPU."""

import pytest

from tools.placement_probe import OFFSETS_KIB, main, placement, pool_elements


@pytest.mark.parametrize("offset", OFFSETS_KIB)
def test_the_state_and_its_destination_lie_apart_in_the_pool_at_the_offset(offset):
    count = 8 * 8 * 128 * 128  # B = 8
    source, target = placement(count, offset)
    assert source.start == offset * 256 and source.stop - source.start == count
    assert target.stop - target.start == count and source.stop <= target.start
    assert target.stop <= pool_elements(count)


def test_without_a_gpu_it_says_so_and_exits_2(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--out", str(tmp_path)]) == 2


def test_a_bad_batch_list_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--batches", "1,x"]) == 2
    assert "--batches" in capsys.readouterr().err
