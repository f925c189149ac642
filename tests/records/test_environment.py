"""harness.records.environment.without_bytecode, and the run's note naming such packages: the judge's
workers write no bytecode, so a package installed without it is compiled by every worker."""

import compileall
import shutil
import sys

from conftest import FIXTURE_SOLUTIONS, write_small_dataset
from harness.judge.run import RunConfig, run_benchmark
from harness.judge.timing import TimingConfig
from harness.records.environment import without_bytecode
from harness.records.store import load_run


def make_package(root, name, modules=4):
    """A package of ``modules`` source files under ``root``, without bytecode."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("VALUE = 1\n")
    for i in range(modules - 1):
        (folder / f"part{i}.py").write_text(f"X = {i}\n")
    return folder


def test_a_package_without_bytecode_is_named_and_one_with_it_is_not(tmp_path, monkeypatch):
    folder = make_package(tmp_path, "gdn_no_bytecode_pkg")
    (tmp_path / "gdn_single_module.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ["gdn_no_bytecode_pkg", "gdn_single_module", "gdn_not_installed_anywhere", "math", "json"]
    assert without_bytecode(names) == {"gdn_no_bytecode_pkg": str(folder)}
    assert "gdn_no_bytecode_pkg" not in sys.modules  # looked at, not imported
    compileall.compile_dir(str(folder), quiet=1)
    assert without_bytecode(names) == {}


def test_half_compiled_is_not_enough_to_name_it(tmp_path, monkeypatch):
    folder = make_package(tmp_path, "gdn_half_compiled_pkg", modules=4)
    monkeypatch.syspath_prepend(str(tmp_path))
    for source in sorted(folder.glob("*.py"))[:2]:
        compileall.compile_file(str(source), quiet=1)
    assert without_bytecode(["gdn_half_compiled_pkg"]) == {}  # 2 of 4 lack it: not most


def test_a_run_notes_a_solution_package_installed_without_bytecode(tmp_path, monkeypatch):
    packages = tmp_path / "site"
    folder = make_package(packages, "gdn_no_bytecode_pkg")
    monkeypatch.syspath_prepend(str(packages))
    solutions = tmp_path / "solutions"
    shutil.copytree(FIXTURE_SOLUTIONS / "good", solutions / "good")
    toml = solutions / "good" / "solution.toml"
    toml.write_text(toml.read_text().replace('packages = ["torch"]', 'packages = ["torch", "gdn_no_bytecode_pkg"]'))
    dataset = write_small_dataset(tmp_path / "dataset", batch_sizes=(1,), scales=(0.0,))
    config = RunConfig(device="cpu", tiers=("wallclock",), trials=1,
                       timing=TimingConfig(warmup=1, iters=5, budget_s=0.1, warm_s=0.0))
    result = run_benchmark("good", str(dataset), config, tmp_path / "results", progress=False, solutions_root=solutions)
    assert [t.evaluation.status.value for t in result.traces] == ["PASSED"]
    notes = load_run(result.run_dir).meta["notes"]
    assert [n for n in notes if n.startswith(f"installed without bytecode: gdn_no_bytecode_pkg ({folder})")]
    assert all("torch" not in n for n in notes if n.startswith("installed without bytecode"))
