"""tools/ncu_table.py: Nsight Compute details pages side by side (CPU only, synthetic pages)."""

import csv
import gzip

import pytest

from tools import ncu_table

HEADER = ["ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name"]


def details_page(path, launches, opener=open):
    """A details page with ``launches``: one ``{metric: (unit, value)}`` per profiled launch, and a
    rule row without a metric (ncu writes those too)."""
    with opener(path, "wt", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(HEADER)
        for launch, metrics in enumerate(launches):
            for name, (unit, value) in metrics.items():
                writer.writerow([str(launch), "k", "GPU Speed Of Light Throughput", name, unit, value, ""])
            writer.writerow([str(launch), "k", "GPU Speed Of Light Throughput", "", "", "", "SOLBottleneck"])
    return path


def test_columns_are_profiles_and_the_last_launch_is_the_default(tmp_path):
    a = details_page(tmp_path / "a.csv", [{"Duration": ("us", "35.04"), "DRAM Throughput": ("%", "30.42")},
                                          {"Duration": ("us", "34.66"), "DRAM Throughput": ("%", "30.80")}])
    b = details_page(tmp_path / "b.csv.gz", [{"Duration": ("us", "18.56")}], opener=gzip.open)
    table = ncu_table.side_by_side({"one-wave": a, "two-wave": b}, metrics=("Duration", "DRAM Throughput"))
    assert table.splitlines() == ["| metric | one-wave | two-wave |", "|---|---|---|",
                                  "| Duration (us) | 34.66 | 18.56 |", "| DRAM Throughput (%) | 30.80 | - |"]
    first = ncu_table.side_by_side({"one-wave": a}, launch=0, metrics=None)
    assert "| Duration (us) | 35.04 |" in first and "| DRAM Throughput (%) | 30.42 |" in first


def test_bad_input_is_a_clear_error_with_exit_2(tmp_path, capsys):
    page = details_page(tmp_path / "a.csv", [{"Duration": ("us", "1.0")}])
    not_a_page = tmp_path / "notes.md"
    not_a_page.write_text("# notes\nsome, text\n")
    cut = tmp_path / "cut.csv.gz"  # a page's .gz copied while it was written
    whole = gzip.compress(page.read_bytes())
    cut.write_bytes(whole[: len(whole) // 2])
    bad_id = tmp_path / "bad-id.csv"
    bad_id.write_text("ID,Metric Name,Metric Unit,Metric Value\nfirst,Duration,us,1.0\n")
    for argv, said in (([f"x={page}", "--launch", "3"], "1 profiled launch(es), no launch 3"),
                       ([f"x={not_a_page}"], "not an ncu details page"),
                       ([str(page)], "each profile is LABEL=CSV"),
                       ([f"x={tmp_path / 'missing.csv'}"], "missing.csv"),
                       ([f"x={cut}"], f"{cut}: cannot be read (EOFError"),
                       ([f"x={bad_id}"], f"{bad_id}: not an ncu details page (a launch ID")):
        with pytest.raises(SystemExit) as stop:
            ncu_table.main(argv)
        assert stop.value.code == 2 and said in capsys.readouterr().err, argv
