"""python -m tools.tune.install: a GPU's launch-table files from a tuning report already measured
(tools/tune/install.py), on the CPU: the committed H200 files are what it writes from their
reports, and bad input is refused in one line with status 2, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.solution_copies import import_copy

from harness.paths import REPO_ROOT, SOLUTIONS_DIR
from harness.records.store import read_stored
from tools.tune import ADAPTERS, install

H200_REPORTS = REPO_ROOT / "results" / "tuning" / "20261123-H200"
#: solution -> the tunes of its installed H200 table, in the order installed: (report folder, the
#: commit it records); cuda-v4's bf16 table is a later bf16-only tune's, which keeps the fp32 one
H200_TUNES = {
    "fla-recurrent": (("20261126-H200-rounds/tune", "57f55ab"),),
    "cutedsl-bf16": (("20261126-H200-fast-gates", "e8a4397+"),),
    "cuda-v4": (("20261127-H200-tune-ab-bf16/tune", "c063876"), ("20261127-H200-tune-ab-bf16-staged/tune", "68ef0f3")),
}
#: solution -> its H200 table files (relative to its folder) that the install wrote from its report
H200_FILES = {
    "fla-recurrent": ("launch_tables/NVIDIA-H200.json",),
    "cutedsl-bf16": ("launch_tables/NVIDIA-H200.json",),
    "cuda-v4": ("launch_table.NVIDIA-H200.cuh", "launch_tables.cuh"),
}


def without_h200(folder: Path) -> None:
    """Make a copy of a solution folder what it was before the H200 install: no H200 table file,
    and cuda-v4's index without its line."""
    for relative in ("launch_tables/NVIDIA-H200.json", "launch_table.NVIDIA-H200.cuh"):
        (folder / relative).unlink(missing_ok=True)
    index = folder / "launch_tables.cuh"
    if index.is_file():
        index.write_text(index.read_text().replace('#include "launch_table.NVIDIA-H200.cuh"\n', ""))


def copies(tmp_path: Path):
    """``adapter_for`` of :func:`tools.tune.install.install` over copies of the solution folders
    (imported without a build, then :func:`without_h200`): the files are written into the
    copies, never into solutions/."""
    def adapter_for(name: str):
        try:
            module = import_copy(SOLUTIONS_DIR / name, tmp_path / name, hide_gpu=True)  # no build: reads its space
        except ImportError as exc:  # a solution whose packages are not installed here
            pytest.skip(str(exc))
        without_h200(Path(module.__file__).parent)
        return ADAPTERS[name](module, source_dir=Path(module.__file__).parent)
    return adapter_for


def run(argv, tmp_path, capsys) -> tuple[int, str, str]:
    code = install.main([str(a) for a in argv], adapter_for=copies(tmp_path))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", list(H200_FILES))
def test_the_committed_h200_files_are_what_install_writes_from_their_report(name, tmp_path, capsys):
    reports = [REPO_ROOT / "results" / "tuning" / folder_name / name / "NVIDIA-H200.json"
               for folder_name, _ in H200_TUNES[name]]
    code, out, err = run(reports, tmp_path, capsys)  # one install, in order, into one copy
    assert (code, err) == (0, "")
    folder = next(p for p in (tmp_path / name).iterdir() if p.is_dir())  # the copy the adapter wrote into
    for relative in H200_FILES[name]:
        assert f"wrote {folder / relative}" in out
        assert (folder / relative).read_text() == (SOLUTIONS_DIR / name / relative).read_text(), relative
    # the file records each tune (device, commit, command, date, tier) and where its report lies
    text = (folder / H200_FILES[name][0]).read_text()
    for folder_name, commit in H200_TUNES[name]:
        assert f"results/tuning/{folder_name}/" in text and commit in text and "NVIDIA H200" in text


def test_the_h100_files_are_left_alone(tmp_path, capsys):
    report = H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json"
    assert run([report], tmp_path, capsys)[0] == 0
    folder = next(p for p in (tmp_path / "fla-recurrent").iterdir() if p.is_dir())
    h100 = "launch_tables/NVIDIA-H100-80GB-HBM3.json"
    assert (folder / h100).read_text() == (SOLUTIONS_DIR / "fla-recurrent" / h100).read_text()


def _report(tmp_path: Path, **changes) -> Path:
    """The H200 fla-recurrent report with ``changes`` (top-level fields), as a new file."""
    data = json.loads(read_stored(H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json"))
    data.update(changes)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


def _bad(tmp_path: Path, case: str) -> Path:
    if case == "missing":
        return tmp_path / "nope.json"
    if case == "not json":
        (tmp_path / "bad.json").write_text("{")
        return tmp_path / "bad.json"
    if case == "cut gz":  # a report's .gz copied while it was written
        whole = (H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json.gz").read_bytes()
        (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
        return tmp_path / "cut.json.gz"
    if case == "legacy form":  # the first fla-recurrent tuner's report: no solution, no state_dtypes
        return REPO_ROOT / "results" / "tuning" / "fla_recurrent_tune.json"
    if case == "unknown solution":
        return _report(tmp_path, solution="cuda-v1")
    if case == "no table":  # no correct config at any batch size
        return _report(tmp_path, state_dtypes={"float32": {"batches": [], "table": [], "native": None}})
    if case == "--only":
        return _report(tmp_path, only="bv8")
    if case == "--defines":  # a candidate build, tuned to compare, never installed
        return _report(tmp_path, defines=["GDN_V4_CANDIDATE=4"])
    if case == "part of the batch sizes":  # --batches 1,...,256: B = 512 would get B = 256's pick
        rows = json.loads(read_stored(H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json"))["state_dtypes"]
        rows["float32"]["batches"] = [row for row in rows["float32"]["batches"] if row["batch"] != 512]
        return _report(tmp_path, state_dtypes=rows)
    if case == "unknown config":  # the search space changed since the tune
        rows = json.loads(read_stored(H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json"))["state_dtypes"]
        rows["float32"]["table"] = [[None, "bv3/w1"]]
        return _report(tmp_path, state_dtypes=rows)
    raise AssertionError(case)


@pytest.mark.parametrize("case, message", [
    ("missing", "cannot read"), ("not json", "not JSON"), ("cut gz", "cut.json.gz: cannot be read back (cut short)"),
    ("legacy form", "not of a tuned solution"),
    ("unknown solution", "'cuda-v1', not of a tuned solution"), ("no table", "no launch table in it"),
    ("--only", "--only 'bv8' measured part of the search space: no table to install"),
    ("--defines", "--defines GDN_V4_CANDIDATE=4 built a candidate, not the shipped kernel: no table to install"),
    ("unknown config", "names configs fla-recurrent no longer has: bv3/w1"),
    ("part of the batch sizes", "its float32 tune: --batches left out B = 512 (a table is chosen over"),
])
def test_bad_input_is_one_line_and_status_2_and_writes_nothing(case, message, tmp_path, capsys):
    good = H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json"
    code, out, err = run([good, _bad(tmp_path, case)], tmp_path / "copies", capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("python -m tools.tune.install: error: ") and message in err
    written = list((tmp_path / "copies").rglob("NVIDIA-H200.json"))
    assert written == []  # the good report before it was not installed either


def test_a_solution_that_cannot_be_loaded_is_one_line(monkeypatch, capsys):
    def broken(meta, *args, **kwargs):
        raise RuntimeError("nvcc failed\nwith a long log")

    monkeypatch.setattr(install, "load_solution", broken)
    code = install.main([str(H200_REPORTS / "fla-recurrent" / "NVIDIA-H200.json")])
    err = capsys.readouterr().err
    assert code == 2 and err == "python -m tools.tune.install: error: cannot load fla-recurrent: RuntimeError: nvcc failed\n"


def test_the_tuner_writes_through_the_same_function():
    """One code path: the tune's end and the install both call table_files.write_table_files."""
    from tools.tune import cli, table_files

    assert cli.write_table_files is table_files.write_table_files is install.write_table_files
    assert not hasattr(cli, "write_tables")
