"""The one tuner (``python -m tools.tune``) on the CPU: the driver end to end for
fla-recurrent under the Triton interpreter (a deterministic fake timer, a real
correctness check), each adapter's search space against its kernel, a candidate
build of cuda-v4 (``--defines``, its build mocked) and the command line's refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from support.solution_copies import import_copy
from support.tune import FAKE_US, OTHER_US, FakeTimer, tiny_fla  # noqa: F401  (tiny_fla: a fixture, used by name)

from harness.paths import REPO_ROOT, SOLUTIONS_DIR
from tools.tune import cli, driver

def test_fla_recurrent_end_to_end(tiny_fla, tmp_path, capsys):
    from harness.records.environment import hardware_name
    from harness.records.plots import slug
    from tools.tune.measure import compress_table, steady_choice

    argv = ["--algo", "fla-recurrent", "--batches", "2,1", "--out", str(tmp_path)]
    assert cli.main(argv, timer=FakeTimer(), device="cpu") == 0
    path = tmp_path / "fla-recurrent" / f"{slug(hardware_name('cpu'))}.json"
    report = json.loads(path.read_text())
    assert report["device"] == hardware_name("cpu") and report["solution"] == "fla-recurrent"
    assert report["command"] == "python -m tools.tune " + " ".join(argv)
    assert report["timing"]["tier"] == "fake" and report["date_utc"].endswith("+00:00") and "commit" in report
    part = report["state_dtypes"]["float32"]
    rows = part["batches"]
    assert [row["batch"] for row in rows] == [1, 2]
    for row in rows:
        assert row["workload"]["set"] in ("sweep", "contest-v2") and row["copy_floor_us"] == OTHER_US
        assert row["in_use"] == "bv16/w1" and row["entry_check"]["correct"]
        assert row["configs"]["bv16/w1"]["correct"] and row["configs"]["bv32/w1"]["correct"]  # the real check
        assert row["configs"]["bv16/w1"]["us"] == FAKE_US[(row["batch"], "bv16/w1")]
        broken = row["configs"]["bv0/w1"]
        assert broken["correct"] is False and "ZeroDivisionError" in broken["error"]  # recorded, not a crash
        assert set(row["baselines"]) == {"fla-upstream", "fi-baseline"}
    # the table is steady_choice's over the recorded correct times, not the plain argmin
    times = [(row["batch"], {n: r["us"] for n, r in row["configs"].items() if r["correct"]}) for row in rows]
    assert part["table"] == compress_table(steady_choice(times)) == [[None, "bv16/w1"]]
    assert [min(t, key=t.get) for _, t in times] == ["bv16/w1", "bv32/w1"]
    out = capsys.readouterr().out
    assert part["native"] in out and json.loads(part["native"]) == [[None, {"bv": 16, "num_warps": 1, "lanes_per_row": 32}]]
    assert "INCORRECT or FAILED: B=1 bv0/w1, B=2 bv0/w1" in out
    # this GPU's table file, in the solution folder (a copy here), with where it came from ...
    table_file = tiny_fla / "launch_tables" / f"{slug(hardware_name('cpu'))}.json"
    assert f"wrote {table_file}" in out
    written = json.loads(table_file.read_text())
    assert {k: written[k] for k in ("solution", "device", "command", "commit", "date_utc", "tier")} == {
        k: report[k] if k != "tier" else "fake" for k in ("solution", "device", "command", "commit", "date_utc", "tier")}
    assert written["report"] == str(path.resolve()) and written["tables"] == {"float32": json.loads(part["native"])}
    # ... which the solution then selects on this device (by its name), the H100's file untouched
    configs = import_copy(tiny_fla, tmp_path / "import").configs
    assert configs.select(hardware_name("cpu"), 1.0).source == f"table {hardware_name('cpu')}"
    assert configs.select(hardware_name("cpu"), 1.0).config(10**6) == configs.LaunchConfig(16, 1)
    h100 = "NVIDIA-H100-80GB-HBM3.json"
    assert (tiny_fla / "launch_tables" / h100).read_text() == (SOLUTIONS_DIR / "fla-recurrent" / "launch_tables" / h100
                                                               ).read_text()
    # a second run into the same folder refuses before measuring anything
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv, timer=FakeTimer(), device="cpu")
    assert exit_info.value.code == 2 and "never rewrites" in capsys.readouterr().err


def test_a_tune_that_leaves_out_a_table_batch_size_writes_no_table_file(tiny_fla, tmp_path, capsys):
    # its last entry would give B = 2's pick to B = 1 (the fixture's table is chosen over B = 1)
    before = {p.name: p.read_text() for p in (tiny_fla / "launch_tables").iterdir()}
    argv = ["--algo", "fla-recurrent", "--batches", "2", "--out", str(tmp_path / "out")]
    assert cli.main(argv, timer=FakeTimer(), device="cpu") == 0
    out = capsys.readouterr().out
    assert "no table file written for fla-recurrent: --batches left out B = 1 (a table is chosen over" in out
    assert {p.name: p.read_text() for p in (tiny_fla / "launch_tables").iterdir()} == before
    assert (tmp_path / "out" / "fla-recurrent").is_dir()  # the report is still written


def test_a_tune_of_part_of_the_search_space_writes_no_table_file(tiny_fla, tmp_path, capsys):
    before = sorted(p.name for p in (tiny_fla / "launch_tables").iterdir())
    argv = ["--algo", "fla-recurrent", "--batches", "1", "--only", "bv32", "--out", str(tmp_path / "out")]
    assert cli.main(argv, timer=FakeTimer(), device="cpu") == 0
    assert "no table file written for fla-recurrent: --only" in capsys.readouterr().out
    assert sorted(p.name for p in (tiny_fla / "launch_tables").iterdir()) == before


class Reference:
    """A minimal adapter: configs that write the reference, zeros, or fail to compile."""

    name, baselines = "fake", ()

    def state_dtypes(self):
        return ("float32",)

    def configs(self, state_dtype):
        return {"good": "good", "zeros": "zeros", "no-compile": "no-compile"}

    def call(self, config, inputs):
        from tools.vectorized import reference_outputs

        if config == "no-compile":
            raise RuntimeError("ptxas: too many resources")

        def run():
            out, state = reference_outputs(inputs)
            inputs["output"].copy_(out if config == "good" else torch.zeros_like(out))
            inputs["new_state"].copy_(state)
        return run

    def run(self, inputs):
        return self.call("good", inputs)()

    def in_use(self, inputs):
        return "good"

    def format_table(self, table, state_dtype):
        return repr(table)


def test_wrong_and_uncompilable_configs_are_recorded_and_never_chosen():
    part = driver.tune_dtype(Reference(), "float32", [1], lambda call: 1.0, "cpu")
    configs = part["batches"][0]["configs"]
    assert configs["good"]["correct"] and configs["good"]["mismatches"] == 0
    assert configs["zeros"]["correct"] is False and configs["zeros"]["mismatches"] > 0
    assert configs["no-compile"] == {"correct": False, "error": "RuntimeError: ptxas: too many resources"}
    assert part["table"] == [[None, "good"]] and part["no_correct_config"] == []
    # --only measures the matching names plus the one in use
    only = driver.tune_dtype(Reference(), "float32", [1], lambda call: 1.0, "cpu", only="^zeros$")
    assert set(only["batches"][0]["configs"]) == {"good", "zeros"}


class TwoGood(Reference):
    """Reference with a second correct config ("also-good"), each call tagged with its config."""

    def configs(self, state_dtype):
        return {**super().configs(state_dtype), "also-good": "also-good"}

    def call(self, config, inputs):
        run = super().call("good" if config == "also-good" else config, inputs)
        run.config = config
        return run

    def in_use(self, inputs):
        return "also-good"


def test_a_tune_times_every_figure_over_the_cores_number_of_placements(monkeypatch):
    """The harness's figures are medians over the timing core's buffer sets; the tuner's configs,
    copy floor and baselines are each timed over as many sets in turn (harness.judge.core.placement_copies)."""
    from harness.judge import core

    monkeypatch.setattr(core, "buffer_sets_for", lambda values: 3)
    handed = []
    part = driver.tune_dtype(TwoGood(), "float32", [1], lambda calls: handed.append(len(calls)) or 1.0, "cpu")
    assert part["batches"][0]["placement_sets"] == 3 and handed and set(handed) == {3}


def test_rounds_time_every_correct_figure_in_turn_and_keep_the_median():
    """With --rounds 3 a config fast in one round only (good: 1.0, then 2.0 twice) loses to one
    steady at 1.5; in one round it wins. Wrong configs are not timed again."""
    seen = []
    per_round = {"good": [1.0, 2.0, 2.0], "also-good": [1.5, 1.5, 1.5], "zeros": [0.5, 0.5, 0.5]}

    def timer(calls):
        name = getattr(calls[0], "config", "floor")
        seen.append(name)
        return per_round[name][sum(n == name for n in seen) - 1] if name in per_round else 3.0

    one = driver.tune_dtype(TwoGood(), "float32", [1], timer, "cpu")
    assert one["table"] == [[None, "good"]] and one["batches"][0]["rounds"] == 1
    seen.clear()
    three = driver.tune_dtype(TwoGood(), "float32", [1], timer, "cpu", rounds=3)
    row = three["batches"][0]
    assert three["table"] == [[None, "also-good"]] and row["rounds"] == 3
    assert row["configs"]["good"]["us_rounds"] == [1.0, 2.0, 2.0] and row["configs"]["good"]["us"] == 2.0
    assert row["configs"]["good"]["x_floor"] == 2.0 / 3.0 and row["copy_floor_us_rounds"] == [3.0] * 3
    assert "us_rounds" not in row["configs"]["zeros"]  # wrong: timed once, never again
    # round 1 is the check-and-time pass; rounds 2 and 3 take every correct config in turn, the floor
    # and the baselines (untagged calls here) beside them
    configs = [name for name in seen if name != "floor"]
    assert configs == ["good", "zeros", "also-good"] + ["good", "also-good"] * 2
    assert seen.count("floor") % 3 == 0 and seen.count("floor") >= 3


def test_a_report_in_rounds_shows_each_figures_range():
    from tools.tune.report import format_report

    three = driver.tune_dtype(TwoGood(), "float32", [1], lambda calls: 2.0 if getattr(calls[0], "config", "") == "good"
                              else 4.0, "cpu", rounds=3)
    text = format_report({"solution": "fake", "device": "cpu", "timing": {"tier": "fake", "iters": 100},
                          "state_dtypes": {"float32": three}})
    assert "median of 100 cold-L2 calls; the median of 3 rounds [their range], µs; x: over torch's copy_" in text
    assert "best good 2.00 [2.00-2.00] (0.500x)" in text


def test_a_config_that_raises_in_a_later_round_is_a_failure_not_a_pick():
    calls_of = {}

    def timer(calls):
        name = getattr(calls[0], "config", "floor")
        calls_of[name] = calls_of.get(name, 0) + 1
        if name == "good" and calls_of[name] == 2:
            raise RuntimeError("illegal memory access")
        return 1.0 if name == "good" else 1.5

    part = driver.tune_dtype(TwoGood(), "float32", [1], timer, "cpu", rounds=2)
    good = part["batches"][0]["configs"]["good"]
    assert good == {"correct": False, "error": "RuntimeError: illegal memory access"}
    assert part["table"] == [[None, "also-good"]]


def test_tune_inputs_are_the_judges_workload():
    """The tuner's inputs are a stored workload's, built by the harness's own input builder."""
    from harness.data import generator
    from harness.data.workloads import build_inputs, parse_workload
    from harness.paths import cache_dir
    from tools.tune.inputs import definition, recipe_for, tune_inputs

    inputs, workload = tune_inputs(2, "bfloat16", "cpu")
    recipe = recipe_for(2)
    assert (workload["set"], workload["uuid"]) == ("sweep", recipe.uuid)
    assert inputs["state"].dtype == inputs["new_state"].dtype == torch.bfloat16
    assert torch.isnan(inputs["new_state"].float()).all() and torch.isnan(inputs["output"].float()).all()
    stored = {name: torch.from_numpy(array)
              for name, array in generator.workload_tensors(recipe, generator.Bank(cache_dir())).items()}
    judge = build_inputs(parse_workload(generator.workload_json(recipe), definition(), "t"), definition(), stored,
                         "cpu", trial=0)
    assert torch.equal(inputs["q"], judge["q"]) and torch.equal(inputs["state"], judge["state"].bfloat16())
    assert recipe_for(1).set_name == "contest-v2"  # sweep's B = 1 workload holds only the empty state


def test_cuda_v4_search_space_is_what_the_all_variants_build_instantiates(tmp_path, cuda_v4_all_variants):
    from tools.tune.cuda_v4 import CudaV4

    main = import_copy(SOLUTIONS_DIR / "cuda-v4", tmp_path, hide_gpu=True)  # no kernel.so in a copy
    space = CudaV4(main).configs("float32")
    offered = {(c.warps_per_block, c.rows_per_warp, main.CACHE_POLICIES.index(c.cache_policy), c.lanes_per_row, c.passes,
                int(c.staged)) for c in space.values()}
    compiled = set(cuda_v4_all_variants)  # (warps, rows, policy, lanes, passes, staged) the build instantiated
    assert compiled and offered == compiled, (offered - compiled, compiled - offered)
    assert len(space) == len(offered)  # one name per variant


def test_cutedsl_adapter_offers_configs_its_kernel_compiles(tmp_path):
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")
    from harness.data.definition import TORCH_DTYPES
    from harness.judge.solutions import load_meta, load_solution
    from tools.tune.cutedsl_bf16 import CuteDslBf16
    from tools.tune.inputs import tune_inputs

    adapter = CuteDslBf16(load_solution(load_meta(SOLUTIONS_DIR / "cutedsl-bf16"), workdir=tmp_path))
    build = adapter.solution.build
    assert adapter.state_dtypes() == ("float32", "bfloat16")
    for dtype in adapter.state_dtypes():
        space = adapter.configs(dtype)
        assert space and all(build.LaunchConfig.from_name(name) == config for name, config in space.items())
        for config in space.values():
            build.validate_config(config, 128, 128, TORCH_DTYPES[dtype])  # raises for an invalid one
        table = build.LAUNCH_TABLES["NVIDIA H100 80GB HBM3"][TORCH_DTYPES[dtype]]
        assert all(config.name in space for _, config in table)  # the tables and the model are measured
        assert all(config.name in space for _, config in build.DEFAULT_LADDER[TORCH_DTYPES[dtype]])
        inputs, _ = tune_inputs(1, dtype, "cpu")
        assert callable(adapter.call(table[0][1], inputs))  # compiled for sm_90a (no launch)
        with pytest.raises(ValueError, match="tile_v"):  # what the driver records as a failed config
            adapter.call(build.LaunchConfig(24, 1), inputs)
        assert json.loads(adapter.format_table([[None, table[0][1].name]], dtype)) == [[None, table[0][1]._asdict()]]


@pytest.mark.parametrize("args, message", [
    (["--algo", "no-such"], "unknown solution no-such"),
    (["--algo", ","], "no solution named"),
    (["--algo", "fla-recurrent", "--batches", ""], "give at least one batch size"),
    (["--algo", "fla-recurrent", "--batches", "1,x"], "not a comma-separated list of integers"),
    (["--algo", "fla-recurrent", "--batches", "0"], "each >= 1"),
    (["--algo", "fla-recurrent", "--iters", "-5"], "-5 is not >= 1"),
    (["--algo", "fla-recurrent", "--rounds", "0"], "0 is not >= 1"),
    (["--algo", "fla-recurrent", "--dtypes", "float64"], "unknown state dtype float64"),
    (["--algo", "fla-recurrent", "--only", "("], "not a regular expression"),
    (["--algo", "cuda-v4", "--defines", "1X=2"], "argument --defines: '1X=2': a macro is NAME or NAME=VALUE"),
    (["--algo", "cuda-v4", "--defines", "A B,C-D"], "'A B', 'C-D': a macro is NAME or NAME=VALUE"),
    (["--algo", "cuda-v4", "--defines", "A="], "'A=': a macro is NAME or NAME=VALUE"),
    (["--algo", "cuda-v4", "--defines", " , "], "argument --defines: no macro named"),
    (["--algo", "cuda-v4", "--defines", "A=1,B,A=2"], "argument --defines: A defined more than once"),
    (["--algo", "fla-recurrent", "--defines", "GDN_V4_CANDIDATE=4"],
     "--defines: not for fla-recurrent (only cuda-v4 is built with preprocessor macros: --algo cuda-v4)"),
    (["--algo", "all", "--defines", "GDN_V4_CANDIDATE=4"], "--defines: not for fla-recurrent, cutedsl-bf16 (only"),
    (["--algo", "cuda-v4", "--defines", "GDN_V4_ABLATE=2"], "an ablation build computes wrong results by design"),
])
def test_bad_command_lines_exit_2_with_a_message(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args, timer=FakeTimer(), device="cpu")
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--algo", "nope", "--iters", "-1"], ["--algo", "fla-recurrent", "--defines", "X"]])
def test_the_module_exits_2_without_a_traceback(args):
    done = subprocess.run([sys.executable, "-m", "tools.tune", *args], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "error:" in done.stderr and "Traceback" not in done.stderr


def test_defines_are_parsed_in_order_each_once():
    assert cli.macros(" GDN_V4_CANDIDATE=4, _X1 ,GDN_V4_CANDIDATE=4,Y=-2") == ("GDN_V4_CANDIDATE=4", "_X1", "Y=-2")
    assert cli.parser().parse_args(["--algo", "cuda-v4"]).defines == ()  # the shipped build unless asked


@pytest.fixture
def mocked_v4(monkeypatch):
    """cuda-v4's adapter with its build mocked (no nvcc) and the measuring replaced by a canned
    result; records the build's defines, the tuned adapter and any table-file write."""
    from tools.tune import cuda_v4, table_files

    seen = {"builds": [], "tuned": [], "table_writes": [], "rounds": []}

    def build(meta, defines=()):
        seen["builds"].append(defines)
        return SimpleNamespace(load=lambda: None)

    def tune(adapter, batches, timer, device, only, dtypes, rounds):
        seen["tuned"].append(adapter)
        seen["rounds"].append(rounds)
        return {"float32": {"batches": [], "table": [[None, "r4/nc"]], "native": "  X(INT64_MAX, 4, kNc, 32, 8)",
                            "no_correct_config": []}}

    monkeypatch.setattr(table_files, "TABLE_BATCHES", (1,))  # the tests tune B = 1 only
    monkeypatch.setattr(cuda_v4, "load_solution", build)
    monkeypatch.setattr(cli, "unavailable_reason", lambda adapter: None)
    monkeypatch.setattr(cli, "tune_solution", tune)
    monkeypatch.setattr(cli, "write_table_files", lambda adapter, report, path: seen["table_writes"].append(path) or [])
    return seen


@pytest.mark.parametrize("defines", [(), ("GDN_V4_CANDIDATE=4",), ("GDN_V4_CANDIDATE=3", "GDN_V4_ALL_VARIANTS")])
def test_a_candidate_build_is_tuned_recorded_and_writes_no_table_file(defines, mocked_v4, tmp_path, capsys):
    from harness.judge.solutions import load_meta
    from tools.tune.cuda_v4 import ALL_VARIANTS, BF16_ALL_VARIANTS
    from tools.tune.report import report_path

    argv = ["--algo", "cuda-v4", "--batches", "1", "--out", str(tmp_path)]
    argv += ["--defines", ",".join(defines)] if defines else []
    assert cli.main(argv, timer=FakeTimer(), device="cpu") == 0
    # the macros reach the adapter's build, beside the all-variants ones of each declared state dtype (once)
    bf16 = (BF16_ALL_VARIANTS,) if "bfloat16" in load_meta(SOLUTIONS_DIR / "cuda-v4").state_dtypes else ()
    assert mocked_v4["builds"] == [tuple(dict.fromkeys((ALL_VARIANTS, *bf16, *defines)))]
    assert mocked_v4["tuned"][0].defines == defines and mocked_v4["rounds"] == [1]
    report = json.loads(report_path(tmp_path, "cuda-v4", "cpu").read_text())
    assert report["defines"] == list(defines) and report["only"] == ""
    assert report["command"] == "python -m tools.tune " + " ".join(argv)
    out = capsys.readouterr().out
    if not defines:  # the shipped build: this GPU's table file, as before
        assert len(mocked_v4["table_writes"]) == 1 and "no table file written" not in out
        assert out.startswith("cuda-v4 on ")
        return
    assert mocked_v4["table_writes"] == []
    assert f"no table file written for cuda-v4: --defines {','.join(defines)} built a candidate" in out
    assert out.startswith("cuda-v4" + "".join(f" -D{d}" for d in defines) + " on ")


def test_rounds_reach_the_tune_and_its_recorded_command(mocked_v4, tmp_path):
    from tools.tune.report import report_path

    argv = ["--algo", "cuda-v4", "--batches", "256,512", "--rounds", "3", "--out", str(tmp_path)]
    assert cli.main(argv, timer=FakeTimer(), device="cpu") == 0
    assert mocked_v4["rounds"] == [3]
    assert json.loads(report_path(tmp_path, "cuda-v4", "cpu").read_text())["command"].endswith("--rounds 3 --out "
                                                                                              + str(tmp_path))


def test_a_modal_tune_refuses_defines_for_another_solution_before_any_gpu_time():
    from tools.tune.remote import tuner_argv

    assert tuner_argv("cuda-v4", "--defines GDN_V4_CANDIDATE=4")[-1] == "GDN_V4_CANDIDATE=4"
    with pytest.raises(ValueError, match="--defines: not for fla-recurrent"):
        tuner_argv("fla-recurrent", "--defines GDN_V4_CANDIDATE=4")


def test_default_output_is_a_new_run_folder_under_results_tuning():
    from datetime import datetime, timezone

    from tools.tune.report import TUNING_DIR, default_out_dir, report_path

    out = default_out_dir(datetime(2026, 11, 24, 10, 15, 0, tzinfo=timezone.utc))
    assert out == TUNING_DIR / "20261124T101500Z" and TUNING_DIR == REPO_ROOT / "results" / "tuning"
    assert report_path(out, "cuda-v4", "cpu").parent == out / "cuda-v4"


def test_a_solution_without_a_wanted_state_dtype_is_skipped_with_its_reason(tmp_path, capsys):
    assert cli.main(["--algo", "fla-recurrent", "--dtypes", "bfloat16", "--out", str(tmp_path)],
                    timer=FakeTimer(), device="cpu") == 0
    assert "skipped fla-recurrent: no state dtype of float32 in --dtypes" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
