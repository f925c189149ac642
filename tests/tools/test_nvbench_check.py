"""tools/nvbench_check.py on the CPU: NVBench's JSON output read back through cuda-bench's own
parser, and the report beside the plain-process timers. Timing itself needs a GPU."""

import json

import pytest

pytest.importorskip("cuda.bench.results", reason="cuda-bench (the nvbench extra) is not installed")

from tools.nvbench_check import COLD_MEAN_TAG, benchmark_name, compare, markdown, nvbench_figures  # noqa: E402


def nvbench_json(tmp_path, benchmarks):
    """An NVBench JSON file of one state per benchmark: ``{name: (mean_s, samples_s or None)}``."""
    entries = []
    for index, (name, (mean_s, samples)) in enumerate(benchmarks.items()):
        summaries = [{"tag": COLD_MEAN_TAG, "name": "GPU Time", "data": [
            {"name": "value", "type": "float64", "value": str(mean_s)}]}]
        if samples is not None:
            bin_name = f"samples-{index}.bin"
            import array

            (tmp_path / bin_name).write_bytes(array.array("f", samples).tobytes())
            summaries.append({"tag": "nv/json/bin:nv/cold/sample_times", "data": [
                {"name": "filename", "type": "string", "value": bin_name},
                {"name": "size", "type": "int64", "value": str(len(samples))}]})
        entries.append({"name": name, "devices": [0], "axes": [],
                        "states": [{"name": "Device=0", "device": 0, "summaries": summaries}]})
    path = tmp_path / "nvbench.json"
    path.write_text(json.dumps({"devices": [{"id": 0, "name": "test GPU"}], "benchmarks": entries}))
    return path


def test_the_figure_is_the_samples_median_else_the_cold_mean(tmp_path):
    path = nvbench_json(tmp_path, {benchmark_name("cuda-v4", 1): (3e-6, [2e-6, 2.2e-6, 9e-6]),
                                   benchmark_name("copy", 1): (1.8e-6, None)})
    figures = nvbench_figures(path)
    assert figures["cuda-v4 B=1"]["us"] == pytest.approx(2.2) and figures["cuda-v4 B=1"]["how"] == "median of 3 samples"
    assert figures["copy B=1"]["us"] == pytest.approx(1.8) and figures["copy B=1"]["how"] == "mean"


def test_a_state_without_a_figure_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "nvbench.json"
    path.write_text(json.dumps({"devices": [], "benchmarks": [{"name": "x B=1", "devices": [0], "axes": [],
                                                              "states": [{"name": "s", "summaries": []}]}]}))
    with pytest.raises(ValueError, match="nvbench.json.*'x B=1'"):
        nvbench_figures(path)


def test_the_report_sets_nvbench_beside_cupti_and_events():
    rows = compare({"cuda-v4 B=1": {"us": 2.2, "how": "mean"}},
                   {("cuda-v4", 1): {"cupti": 2.0, "events": 4.4}, ("copy", 1): {"cupti": 1.8, "events": 4.0}})
    assert [(r["subject"], r["nvbench_over_cupti"], r["nvbench_over_events"]) for r in rows] == \
        [("cuda-v4", pytest.approx(1.1), pytest.approx(0.5))]  # copy: NVBench did not time it, no row
    assert "| cuda-v4 | 1 | 2.200 | mean | 2.000 | 4.400 | 1.100 | 0.500 |" in markdown(rows, "# t")


def test_batch_sizes_that_are_not_numbers_are_a_clear_error(tmp_path, capsys):
    from tools.nvbench_check import main

    with pytest.raises(SystemExit) as stop:
        main(["--out", str(tmp_path / "out"), "--batches", "1,sixty-four"])
    assert stop.value.code == 2 and "--batches '1,sixty-four': comma-separated batch sizes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
