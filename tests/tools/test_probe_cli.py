"""What the GPU probes share (tools/probe_cli.py), on the CPU."""

import json

import pytest
import torch

from tools import ablation_probe, dirty_l2_probe, events_loop_probe, idle_start_probe, l2_persist_probe, placement_probe
from tools.probe_cli import batch_sizes, spread, time_batches, write_report


def test_batch_sizes_are_sorted_once_each_and_a_bad_list_is_an_error_line(capsys):
    assert batch_sizes("8,1,8") == [1, 8]
    assert batch_sizes("1,,8") is None
    assert "--batches '1,,8'" in capsys.readouterr().err


def test_a_point_keeps_its_median_range_and_repeats():
    assert spread([2.0, 1.0, 4.0]) == {"median_us": 2.0, "min_us": 1.0, "max_us": 4.0, "repeats": [2.0, 1.0, 4.0]}


def test_each_batch_is_measured_in_a_fresh_process_and_each_point_printed_with_its_range(monkeypatch, capsys):
    measured = []

    def fresh(measure, batch, repeats):
        measured.append((measure, batch, repeats))
        return measure(batch, repeats)

    monkeypatch.setattr("tools.timing_proof.in_fresh_process", fresh)
    rows = time_batches(lambda batch, repeats: {"a": [float(batch)] * repeats}, [1, 8], 0, "loop",
                        lambda subject: f"{subject:<3}")
    assert [(batch, repeats) for _, batch, repeats in measured] == [(1, 1), (8, 1)]  # at least one repeat
    assert rows == [{"batch_size": 1, "loop": "a", **spread([1.0])}, {"batch_size": 8, "loop": "a", **spread([8.0])}]
    assert capsys.readouterr().out.splitlines() == ["B=1 a   1.000 µs (1.000-1.000)", "B=8 a   8.000 µs (8.000-8.000)"]


def test_the_report_says_when_on_what_commit_and_gpu_it_was_measured(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.records.environment.git_commit", lambda: "abc1234")
    monkeypatch.setattr("harness.records.environment.hardware_name", lambda device: "NVIDIA H200")
    path = write_report(tmp_path / "out", "some_probe", rows=[{"batch_size": 1}])
    report = json.loads(path.read_text())
    assert path.name == "some_probe.json"
    assert (report["git_commit"], report["hardware"], report["rows"]) == ("abc1234", "NVIDIA H200", [{"batch_size": 1}])
    assert report["date"].endswith("+00:00")


PROBES = [pytest.param(module, id=module.__name__.split(".")[-1]) for module in (placement_probe, events_loop_probe,
                                                                                   ablation_probe, idle_start_probe, l2_persist_probe,
                                                                                   dirty_l2_probe)]


@pytest.mark.parametrize("probe", PROBES)
def test_every_probe_refuses_a_bad_batch_list_with_exit_2(probe, tmp_path, capsys):
    assert probe.main(["--out", str(tmp_path), "--batches", "1,x"]) == 2
    assert "--batches" in capsys.readouterr().err


@pytest.mark.parametrize("probe", PROBES)
def test_every_probe_without_a_gpu_says_so_and_exits_2(probe, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert probe.main(["--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
