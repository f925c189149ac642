"""The code-warmth probe (tools/code_warm_probe.py) on the CPU: how it picks the subject's time
out of a profiled timeline, and its command line without a GPU; the timing itself needs a GPU."""

import pytest

from tools.code_warm_probe import last_before_marker_us, main
from tools.profiler_check import END_MARKER_KERNEL as END_MARKER

MARK = f"void at::native::vectorized_elementwise_kernel<at::native::{END_MARKER[0]}>"


def test_the_subjects_time_is_the_last_activity_before_each_marker():
    # per call: the flush, a decoy, the subject, the marker; given out of order, as a timeline may be
    events = [("flush FillFunctor<int>", 0, 40.0), ("decoy", 41, 2.5), ("subject", 44, 1.9), (MARK, 46, 0.9),
              ("flush FillFunctor<int>", 50, 40.0), ("subject", 92, 2.1), (MARK, 95, 0.9)]
    assert last_before_marker_us(reversed(events), END_MARKER, 2) == [1.9, 2.1]


def test_a_timeline_that_does_not_split_into_the_calls_is_an_error():
    with pytest.raises(RuntimeError, match="expected 3 end markers"):
        last_before_marker_us([("subject", 0, 1.0), (MARK, 1, 0.5)], END_MARKER, 3)
    with pytest.raises(RuntimeError, match="no device activity before it"):
        last_before_marker_us([("subject", 0, 1.0), (MARK, 1, 0.5), (MARK, 2, 0.5)], END_MARKER, 2)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the error is for a machine without a GPU")
def test_without_a_gpu_it_says_so_and_exits_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
