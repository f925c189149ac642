"""README results section: replaced between the markers, an error without them."""

from __future__ import annotations

import pytest
from support.records import H100, make_floor, make_trace, write_run

from harness.records.leaderboard import write_leaderboard
from harness.records.plots import write_plots
from tools.readme_results import END_MARKER, START_MARKER, MarkerError, main, replace_section

README = f"# title\n\nintro\n\n{START_MARKER}\nold table\n{END_MARKER}\n\n## after\n"


def results_with_one_gpu_run(tmp_path):
    traces = [make_floor(f"w{i}", {"cupti": 2.0, "events": 4.0}, batch=2 ** i) for i in range(3)]
    traces += [make_trace(n, f"w{i}", {"cupti": us, "events": 2 * us}, batch=2 ** i)
               for n, us in (("pt-reference", 200.0), ("cuda-v4", 4.0)) for i in range(3)]
    write_run(tmp_path / "results", "run1", traces, set_name="sweep", hardware=H100,
              started="2026-04-05T06:07:00+00:00", commit="0123abcd")
    write_run(tmp_path / "results", "cpu", [make_trace("pt-reference", "w0", {"wallclock": 9.0})],
              hardware="CPU x86_64", started="2026-05-01T00:00:00+00:00")
    write_leaderboard(tmp_path / "results")
    write_plots(tmp_path / "results", log=lambda _: None)
    return tmp_path / "results"


def test_section_replaced(tmp_path):
    results = results_with_one_gpu_run(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    assert main(["--readme", str(readme), "--results", str(results)]) == 0
    text = readme.read_text()
    assert "old table" not in text
    assert text.startswith("# title\n\nintro\n\n" + START_MARKER) and text.endswith(END_MARKER + "\n\n## after\n")
    section = text[text.index(START_MARKER):text.index(END_MARKER)]
    assert H100 in section and "2026-04-05" in section and "0123abcd" in section
    assert "python -m tools.readme_results" in section
    assert "| cuda-v4 | sweep | cupti | 3/3 |" in section  # headline tier is cupti
    assert "CPU" not in section  # the latest *GPU* run, although the CPU run is later
    assert "](results/plots/latency_vs_batch_NVIDIA-H100-80GB-HBM3_cupti.png)" in section
    assert "](results/plots/tiers_b1_NVIDIA-H100-80GB-HBM3.png)" in section
    # running it again gives the same file
    assert main(["--readme", str(readme), "--results", str(results)]) == 0
    assert readme.read_text() == text


def test_every_gpu_gets_its_table_the_latest_first(tmp_path):
    results = results_with_one_gpu_run(tmp_path)
    h200 = "NVIDIA H200"
    traces = [make_floor("w0", {"cupti": 1.5}), make_trace("cuda-v4", "w0", {"cupti": 3.0})]
    write_run(results, "run2", traces, set_name="sweep", hardware=h200, started="2026-04-06T06:07:00+00:00",
              commit="4567cdef")
    write_leaderboard(results)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    assert main(["--readme", str(readme), "--results", str(results)]) == 0
    section = readme.read_text()
    assert section.count("python -m tools.readme_results") == 1
    assert section.index(f"**{h200}**") < section.index(f"**{H100}**")  # the latest run's GPU first
    assert "| cuda-v4 | sweep | cupti | 1/1 |" in section and "| cuda-v4 | sweep | cupti | 3/3 |" in section
    assert "4567cdef" in section and "0123abcd" in section


@pytest.mark.parametrize("marker", [START_MARKER, END_MARKER])
def test_missing_marker_is_an_error(tmp_path, capsys, marker):
    results = results_with_one_gpu_run(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(README.replace(marker, ""))
    assert main(["--readme", str(readme), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert str(readme) in err and marker in err
    assert readme.read_text() == README.replace(marker, "")  # untouched


@pytest.mark.parametrize("board", ["", "solution,set\ncuda-v4,sweep\n", 'a,"b\n'])
def test_a_leaderboard_that_is_no_leaderboard_is_named_and_exits_2(tmp_path, capsys, board):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "leaderboard.csv").write_text(board)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    assert main(["--readme", str(readme), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'results' / 'leaderboard.csv'}: not a leaderboard" in err and "Traceback" not in err
    assert readme.read_text() == README  # untouched


def test_markers_in_wrong_order():
    with pytest.raises(MarkerError):
        replace_section(f"{END_MARKER}\n{START_MARKER}\n", "x", "README.md")
