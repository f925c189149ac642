"""Contest entries judged as shipped (harness/judge/entries.py): flashinfer-bench Solution JSON and
starter-kit folders, found, converted, called as flashinfer-bench calls them and judged by the
contest's rules or the strict ones, on the CPU.

The fixtures are tests/fixtures/contest_entries/entries/ (README there): Python (destination-
passing, value-returning, value-returning with the state updated in place), Triton (a JSON and a
starter-kit folder, under the Triton interpreter here), and CUDA with each binding, which are
built with nvcc where it is (the torch binding needs a CUDA build of torch) and run on a GPU only.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from conftest import TRITON_INTERPRETED, write_small_dataset
from harness.errors import HarnessInputError
from harness.facts import Rules
from harness.judge import dps, entries
from harness.judge import protocol as msg
from harness.judge.build import CompileError
from harness.judge.check import Status
from harness.judge.figures import Rejected
from harness.judge.isolation import Timeouts
from harness.judge.run import RunConfig, Selected, prepare, run_benchmark, select_solutions
from harness.judge.solutions import SolutionLoadError, discover, materialize, import_package
from harness.judge.timing import CONTEST_SETTINGS, CONTEST_TRIALS, TimingConfig
from harness.paths import SOLUTIONS_DIR
from harness.records.report import solution_summary, trace_rows
from support import contest_entries as fixtures
from test_judge import WORKLOAD, ScriptedWorker, make_judge

ENTRIES = fixtures.ENTRIES_DIR
KIT = ENTRIES / fixtures.KIT
TRITON = ["triton-dps", "triton-kit"]
#: Entries judged PASSED on the CPU: the Triton ones only under the Triton interpreter (set by
#: conftest where no GPU is; on a GPU machine test_the_cuda_entries_pass_on_a_gpu judges them there).
ON_THE_CPU = ["python-dps", "python-value", "python-inplace"] + (TRITON if TRITON_INTERPRETED else [])
CUDA = ["cuda-tvm-ffi", "cuda-torch"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_small_dataset(tmp_path_factory.mktemp("entries") / "dataset", batch_sizes=(1, 2), scales=(0.0, 0.1))


def config(rules: str = Rules.DEFAULT, device: str = "cpu") -> RunConfig:
    return RunConfig(device=device, tiers=("wallclock",), trials=2, rules=rules,
                     timing=TimingConfig(warmup=1, iters=5, budget_s=0.2, warm_s=0.0))


def judged(small, algo: str, rules: str, root: Path = ENTRIES, tmp: Path | None = None):
    """``run_benchmark`` of ``algo`` under ``root`` on the small dataset: {(solution, workload): trace}."""
    result = run_benchmark(algo, str(small), config(rules), tmp or small.parent / f"results-{rules}",
                           solutions_root=root, progress=False,
                           timeouts=Timeouts(startup_s=120, workload_s=120, total_s=600))
    return {(t.solution, t.workload.uuid): t for t in result.traces}, result


# ---------------------------------------------------------------------------- the fixtures themselves

@pytest.mark.parametrize("name", list(fixtures.ENTRIES))
def test_the_committed_json_entries_are_what_their_sources_write(name):
    assert (ENTRIES / f"{name}.json").read_text() == fixtures.json_text(name), \
        "rewrite them: python tests/support/contest_entries.py"


# ---------------------------------------------------------------------------- finding them

def test_every_form_is_found_by_its_stated_name():
    found = entries.discover_all(ENTRIES).found
    assert sorted(found) == sorted([*fixtures.ENTRIES, fixtures.KIT])
    assert found["triton-kit"] == KIT and found["python-dps"] == ENTRIES / "python-dps.json"
    assert entries.discover_all(ENTRIES / "python-dps.json").found == {"python-dps": ENTRIES / "python-dps.json"}
    assert entries.discover_all(KIT).found == {"triton-kit": KIT}


def test_this_projects_solutions_folder_is_found_as_before():
    """Only <name>/solution.toml folders there, and nothing below them (launch_tables/*.json)."""
    assert entries.discover_all(SOLUTIONS_DIR).found == discover(SOLUTIONS_DIR)


def test_a_dataset_is_read_through_its_solutions_folder_at_any_depth(tmp_path):
    deep = tmp_path / "dataset" / "solutions" / "tests" / "gdn" / fixtures.DEFINITION
    deep.mkdir(parents=True)
    shutil.copy(ENTRIES / "python-dps.json", deep)
    (tmp_path / "dataset" / "definitions").mkdir()
    (tmp_path / "dataset" / "definitions" / "gdn.json").write_text("{}")  # a definition, not a Solution
    assert entries.discover_all(tmp_path / "dataset").found == {"python-dps": deep / "python-dps.json"}


def test_entries_for_another_definition_are_left_out_with_a_note(tmp_path):
    shutil.copy(ENTRIES / "python-dps.json", tmp_path)
    other = json.loads((ENTRIES / "python-value.json").read_text()) | {"definition": "moe_fp8_block_scale"}
    (tmp_path / "moe.json").write_text(json.dumps(other))
    discovery = entries.discover_all(tmp_path, fixtures.DEFINITION)
    assert list(discovery.found) == ["python-dps"]
    assert "moe_fp8_block_scale" in discovery.notes[0] and "moe.json" in discovery.notes[0]
    with pytest.raises(HarnessInputError, match="field 'definition': every solution there is for another"):
        entries.discover_all(tmp_path / "moe.json", fixtures.DEFINITION)


def test_two_entries_of_one_name_are_bad_input(tmp_path):
    shutil.copy(ENTRIES / "python-dps.json", tmp_path / "a.json")
    shutil.copy(ENTRIES / "python-dps.json", tmp_path / "b.json")
    with pytest.raises(HarnessInputError, match="'python-dps' is also the name of"):
        entries.discover_all(tmp_path)


def test_a_folder_with_nothing_to_judge_says_what_it_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing")
    with pytest.raises(HarnessInputError, match="Solution JSON .*starter-kit folder"):
        select_solutions("all", tmp_path)


def test_a_solution_folder_is_not_searched_for_entries():
    """fla-recurrent's launch_tables/*.json are its own files, not Solutions."""
    with pytest.raises(HarnessInputError, match="is a solution folder itself; pass the folder that holds it"):
        entries.discover_all(SOLUTIONS_DIR / "fla-recurrent")


# ---------------------------------------------------------------------------- converting them

@pytest.mark.parametrize("name, language, calling, function, gpu_only", [
    ("python-dps", "python", "dps", "run", False),
    ("python-value", "python", "value", "run", False),
    ("triton-dps", "triton", "dps", "kernel", False),
    ("triton-kit", "triton", "dps", "kernel", False),
    ("cuda-tvm-ffi", "cuda", "dps", "gdn_forward", True),
    ("cuda-torch", "cuda", "dps", "gdn_forward", True),
])
def test_each_entry_becomes_a_solution_with_its_sources_under_submission(our_definition, name, language, calling,
                                                                          function, gpu_only):
    path = KIT if name == "triton-kit" else ENTRIES / f"{name}.json"
    loaded = entries.load(path, our_definition)
    meta = loaded.meta
    assert (meta.name, meta.language, meta.calling, meta.function, meta.gpu_only) == \
        (name, language, calling, function, gpu_only)
    assert meta.origin == ("starter-kit" if name == "triton-kit" else "solution-json")
    assert set(loaded.files) - {dps.ENTRY_FILE} == {f"{entries.SUBMISSION_DIR}/{p}" for p in
                                                     (fixtures.ENTRIES[name].files if name in fixtures.ENTRIES
                                                      else {"kernel.py": None})}
    compile(loaded.files[dps.ENTRY_FILE].decode(), dps.ENTRY_FILE, "exec")  # the generated entry is Python
    assert "triton" in meta.packages if language == "triton" else True
    assert meta.binding == ("torch" if name == "cuda-torch" else "tvm-ffi")


def _load_entry(our_definition, name: str, tmp_path: Path):
    """The generated entry module of fixture entry ``name``."""
    loaded = entries.load(ENTRIES / f"{name}.json", our_definition)
    package = materialize(loaded.meta, loaded.files, tmp_path)
    return import_package(loaded.meta.package_name, dps.ENTRY_MODULE, package)


def _load_run(our_definition, name: str, tmp_path: Path):
    return _load_entry(our_definition, name, tmp_path).run


def _arguments(batch: int = 2):
    torch.manual_seed(0)
    bf16 = dict(dtype=torch.bfloat16)
    return [torch.randn(batch, 1, 4, 128, **bf16), torch.randn(batch, 1, 4, 128, **bf16),
            torch.randn(batch, 1, 8, 128, **bf16), torch.randn(batch, 8, 128, 128) * 0.1, torch.randn(8),
            torch.randn(batch, 1, 8, **bf16), torch.randn(8), torch.randn(batch, 1, 8, **bf16), 0.0,
            torch.full((batch, 1, 8, 128), float("nan"), **bf16), torch.full((batch, 8, 128, 128), float("nan"))]


@pytest.mark.parametrize("name", ["python-dps", "python-value", "python-inplace"])
def test_the_positional_entry_fills_the_destinations_as_the_reference_would(our_definition, tmp_path, name):
    from harness.judge.batched_reference import gdn_decode

    entry = _load_entry(our_definition, name, tmp_path)
    args = _arguments()
    names = list(our_definition.inputs)  # one call: a leading call axis of 1 on every tensor input
    expected = gdn_decode({n: a.clone()[None] for n, a in zip(names, args) if isinstance(a, torch.Tensor)}, args[8])
    expected = [e[0] for e in expected]
    returned = entry.run(*args)
    if getattr(entry, "HANDS_OVER", False):  # value-returning: the timed call copies nothing ...
        assert args[9].isnan().all() and args[10].isnan().all()
        assert isinstance(returned, tuple) and all(type(p) is int and p for p in returned)  # ... it hands over pointers
        entry.deliver()  # the copy the core makes after its timer, made here by the worker's own step
    torch.testing.assert_close(args[9].float(), expected[0].float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(args[10], expected[1], atol=1e-2, rtol=1e-2)


def test_a_value_returning_entry_s_contest_call_is_the_bare_function_on_the_inputs(our_definition, tmp_path):
    """flashinfer-bench times a value-returning entry as ``fn(*inputs)``: no destinations written."""
    entry = _load_entry(our_definition, "python-value", tmp_path)
    args = _arguments()
    assert entry.contest_call(*args) is None and args[9].isnan().all() and args[10].isnan().all()
    entry.deliver()
    assert not args[9].isnan().any() and not args[10].isnan().any()


def test_a_value_returning_result_of_another_shape_or_dtype_is_refused_by_name(our_definition, tmp_path):
    run = _load_run(our_definition, "python-value", tmp_path)
    args = _arguments()
    args[10] = torch.empty(2, 8, 128, 128, dtype=torch.bfloat16)  # a destination the result does not match
    with pytest.raises(ValueError, match="as new_state; the definition's new_state is"):
        run(*args)


def test_a_function_that_cannot_take_the_definitions_arguments_fails_to_load(our_definition, tmp_path):
    """flashinfer-bench's builder checks the arity (its BuildError: COMPILE_ERROR); so does the entry."""
    solution = json.loads((ENTRIES / "python-value.json").read_text())
    solution["spec"]["destination_passing_style"] = True  # the starter kit's "common error"
    (tmp_path / "e.json").write_text(json.dumps(solution))
    loaded = entries.load(tmp_path / "e.json", our_definition)
    package = materialize(loaded.meta, loaded.files, tmp_path / "copy")
    with pytest.raises(TypeError, match="destination-passing entry run takes 9 parameters; the definition gives it 11"):
        import_package(loaded.meta.package_name, dps.ENTRY_MODULE, package)


# ---------------------------------------------------------------------------- bad input

def _edited_json(tmp_path: Path, edit) -> Path:
    solution = json.loads((ENTRIES / "python-dps.json").read_text())
    edit(solution)
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(solution))
    return path


@pytest.mark.parametrize("edit, field, words", [
    (lambda s: s.update(definition="moe_fp8"), "definition", "this run judges 'gdn_decode_qk4_v8_d128_k_last'"),
    (lambda s: s["spec"].update(language="rust"), "spec.language", "Input should be"),
    (lambda s: s["spec"].update(entry_point="missing.py::run"), "spec.entry_point", "'missing.py' not found"),
    (lambda s: s["spec"].update(entry_point="run"), "spec.entry_point", "<file_path>::<function_name>"),
    (lambda s: s["spec"].update(entry_point="main.py::not-a-name"), "spec.entry_point", "name of a function"),
    (lambda s: s["spec"].update(language="cuda"), "spec.entry_point", "names a source file"),
    (lambda s: s.update(name="copy-floor"), "name", "reserved"),
    (lambda s: s.update(name="has space"), "name", "letters, digits"),
    (lambda s: s.pop("sources"), "sources", "Field required"),
    # paths flashinfer-bench's model takes but no file system holds as the entry's files (they ended the run);
    # the fixture has two sources, so the added one is sources[2]
    (lambda s: s["sources"].append({"path": ".", "content": "#"}), "sources[2].path", "'.' names no file"),
    (lambda s: s["sources"].append({"path": "a\0b.py", "content": "#"}), "sources[2].path", "holds a NUL byte"),
    (lambda s: s["sources"].append({"path": "x" * 256 + ".py", "content": "#"}), "sources[2].path", "longer than 255"),
    (lambda s: s["sources"].append({"path": "./main.py", "content": "#"}), "sources[2].path", "the file of 'main.py'"),
    (lambda s: s["sources"].extend([{"path": "pkg", "content": "#"}, {"path": "pkg/a.py", "content": "#"}]),
     "sources[2].path", "'pkg' is a file and also the folder of another source"),
])
def test_a_malformed_solution_json_names_the_file_and_field(our_definition, tmp_path, edit, field, words):
    path = _edited_json(tmp_path, edit)
    with pytest.raises(SolutionLoadError) as caught:
        entries.load(path, our_definition)
    assert str(caught.value).startswith(f"{path}: field '{field}': ") and words in str(caught.value)


def test_without_flashinfer_bench_an_entry_says_how_to_install_it(our_definition, monkeypatch):
    import sys

    from harness.facts import FIB_VERSION

    monkeypatch.setitem(sys.modules, "flashinfer_bench.data", None)  # its import now fails
    with pytest.raises(HarnessInputError, match=f"pip install 'flashinfer-bench=={FIB_VERSION}'"):
        entries.load(ENTRIES / "python-dps.json", our_definition)


def test_a_file_that_is_not_json_is_named(our_definition, tmp_path):
    (tmp_path / "entry.json").write_text('{"name": ')
    with pytest.raises(SolutionLoadError, match=r"entry\.json: not valid JSON"):
        entries.load(tmp_path / "entry.json", our_definition)


def _kit(tmp_path: Path, config: str, files: dict[str, str] | None = None) -> Path:
    kit = tmp_path / "kit"
    (kit / "solution" / "triton").mkdir(parents=True)
    (kit / "config.toml").write_text(config)
    for name, text in (files if files is not None else {"kernel.py": (KIT / "solution/triton/kernel.py").read_text()}
                       ).items():
        (kit / "solution" / "triton" / name).write_text(text)
    return kit


GOOD_KIT = (KIT / "config.toml").read_text()


@pytest.mark.parametrize("config, files, where, words", [
    ("[solution]\nname = 'x'\n", None, "config.toml: field 'build'", "a [build] table is required"),
    ("[[[", None, "config.toml", "not valid TOML"),
    (GOOD_KIT.replace('language = "triton"', 'language = "rust"'), None, "config.toml: field 'build.language'",
     "Input should be"),
    (GOOD_KIT.replace('language = "triton"', 'language = "cuda"'), None, "config.toml: field 'build.language'",
     "no solution/cuda/ folder"),
    (GOOD_KIT.replace('"kernel.py::kernel"', '"kernel"'), None, "config.toml: field 'build.entry_point'",
     "<file_path>::<function_name>"),
    (GOOD_KIT.replace('"kernel.py::kernel"', '"other.py::kernel"'), None, "config.toml: field 'build.entry_point'",
     "'other.py' not found"),
    (GOOD_KIT.replace('name = "triton-kit"\n', ""), None, "config.toml: field 'solution.name'", "valid string"),
    (GOOD_KIT, {"notes.txt": "no source"}, "solution/triton", "No source files found"),
    (GOOD_KIT, {"kernel.py": (KIT / "solution/triton/kernel.py").read_text(), "__init__.py": ""},
     "solution/triton/__init__.py", "at least 1 character"),
])
def test_a_malformed_starter_kit_names_the_file_and_field(our_definition, tmp_path, config, files, where, words):
    with pytest.raises(SolutionLoadError) as caught:
        entries.load(_kit(tmp_path, config, files), our_definition)
    assert where in str(caught.value) and words in str(caught.value), str(caught.value)


def test_a_kit_source_that_is_not_text_is_named_itself(our_definition, tmp_path):
    kit = _kit(tmp_path, GOOD_KIT)
    (kit / "solution" / "triton" / "helpers.py").write_bytes(b"# \xff\xfe\n")
    with pytest.raises(SolutionLoadError) as caught:
        entries.load(kit, our_definition)
    assert str(caught.value).startswith(f"{kit / 'solution' / 'triton' / 'helpers.py'}: is not UTF-8 text")


def test_a_starter_kit_packs_as_its_pack_script_does(our_definition):
    """The files directly in solution/<language>/ with the kit's suffixes; the kit's own script
    writes target_hardware ["cuda"], which makes an entry GPU-only here unless [build] says more."""
    loaded = entries.load(KIT, our_definition)
    assert set(loaded.files) == {"submission/kernel.py", dps.ENTRY_FILE}
    assert loaded.meta.gpu_only is False  # its config.toml names "cpu"
    assert entries.KIT_TARGET_HARDWARE == ["cuda"]


# ---------------------------------------------------------------------------- judging them on the CPU

@pytest.fixture(scope="module")
def contest_run(small):
    return judged(small, "all", Rules.CONTEST)


def test_every_entry_passes_on_the_cpu_where_its_language_allows(contest_run):
    traces, result = contest_run
    workloads = ("small-0", "small-1")
    assert {name: [traces[(name, w)].evaluation.status.value for w in workloads] for name in ON_THE_CPU} == \
        {name: ["PASSED", "PASSED"] for name in ON_THE_CPU}
    for name in CUDA:
        assert [traces[(name, w)].evaluation.status.value for w in workloads] == ["SKIPPED"] * 2
        assert "GPU-only" in traces[(name, "small-0")].evaluation.log


def test_an_entry_that_updates_its_state_in_place_passes_by_the_contests_rules_and_says_so(contest_run):
    traces, result = contest_run
    for workload in ("small-0", "small-1"):
        extra = traces[("python-inplace", workload)].evaluation.correctness.extra
        assert (extra.rules, extra.inputs_modified) == ("contest", ["state"])
        assert extra.timed_calls_verified > 0  # every timed call had its own inputs, and was checked
    others = [t for key, t in traces.items() if key[0] != "python-inplace" and t.evaluation.correctness]
    assert all(t.evaluation.correctness.extra.inputs_modified == [] for t in others)
    summary = solution_summary(trace_rows(result.traces, result.floors)).set_index("solution")
    assert summary.loc["python-inplace", "inputs_modified"] == "state"
    assert summary.loc["python-dps", "inputs_modified"] == ""


def test_the_same_entry_is_a_modified_input_by_the_strict_rules(small, tmp_path):
    traces, _ = judged(small, "python-inplace,python-dps", Rules.STRICT, tmp=tmp_path)
    for workload in ("small-0", "small-1"):
        inplace = traces[("python-inplace", workload)].evaluation
        assert inplace.status.value == "RUNTIME_ERROR" and "input state was modified by run" in inplace.log
        assert traces[("python-dps", workload)].evaluation.status.value == "PASSED"


def test_a_broken_entry_among_others_is_its_own_compile_error(small, tmp_path):
    (tmp_path / "broken.json").write_text('{"name": "broken"')
    shutil.copy(ENTRIES / "python-dps.json", tmp_path)
    traces, _ = judged(small, "all", Rules.CONTEST, root=tmp_path, tmp=tmp_path / "results")
    assert traces[("broken", "small-0")].evaluation.status.value == "COMPILE_ERROR"
    assert "broken.json: not valid JSON" in traces[("broken", "small-0")].evaluation.log
    assert traces[("python-dps", "small-0")].evaluation.status.value == "PASSED"


def test_nothing_that_can_be_read_is_bad_input(small, tmp_path):
    (tmp_path / "broken.json").write_text("[]")
    with pytest.raises(HarnessInputError, match=r"broken\.json"):
        judged(small, "all", Rules.CONTEST, root=tmp_path / "broken.json", tmp=tmp_path / "results")


# ---------------------------------------------------------------------------- the rules, at the judge

def test_the_judge_rejects_a_modified_input_by_the_strict_rules_and_records_it_by_the_contests():
    judge = make_judge()
    judge.rules = str(Rules.STRICT)
    with pytest.raises(Rejected) as caught:
        judge.judge_inputs_modified(["state"], "trial 0")
    assert caught.value.status == Status.RUNTIME_ERROR and "input state was modified by run" in caught.value.log
    judge.rules = str(Rules.CONTEST)
    judge.judge_inputs_modified(["state"], "trial 0")
    judge.judge_inputs_modified([], "trial 1")
    assert judge.inputs_modified == ["state"]


def test_the_contest_tier_does_not_check_calls_that_shared_inputs_the_entry_changed():
    """A contest trial's calls share one input set (FlashInfer's loop): after an entry changed
    it, no reference holds for the trial's last call, so the judge does not ask for its outputs;
    its figure is still bounded by CUPTI's (docs/judging.md)."""
    per_trial = CONTEST_SETTINGS["repeat_iters"]
    samples = [1e-4] * (CONTEST_TRIALS * per_trial)  # within the wall clock of a scripted tier
    judge = make_judge()
    judge.pending, judge.verified, judge.inputs_modified, judge.unbelievable = [], 0, ["state"], None
    worker = ScriptedWorker(*(msg.Called(index=t) for t in range(CONTEST_TRIALS)),
                            msg.TierEnd(tier="contest", available=True, samples_us=samples))
    figure = judge.time_tier(worker, WORKLOAD, "contest", 0, deadline=time.monotonic() + 5)
    assert worker.sent == [msg.Go(proceed=False)] * CONTEST_TRIALS
    assert judge.pending == [] and judge.unbelievable is None
    assert figure.available and figure.verified_calls == 0


# ---------------------------------------------------------------------------- CUDA entries

def _cuda_candidate(small, name: str):
    """prepare() of a CUDA entry as a GPU run would (no GPU is needed to build)."""
    from harness.data.dataset import describe_dataset

    return prepare(Selected(name, ENTRIES / f"{name}.json"), describe_dataset(str(small)), config(device="cuda"))


def test_a_tvm_ffi_entry_is_built_with_the_harness_nvcc_command_and_exports_its_function(small):
    from harness.judge import build

    try:
        build.find_nvcc(), build.tvm_ffi_paths()
    except CompileError as exc:
        pytest.skip(str(exc))
    candidate = _cuda_candidate(small, "cuda-tvm-ffi")
    assert candidate.failure is None and candidate.library
    import tvm_ffi

    function = tvm_ffi.load_module(str(candidate.library_file)).gdn_forward
    with pytest.raises(ValueError, match="must be a CUDA tensor"):  # CPU tensors: refused by name, nothing launched
        function(*_arguments(1))


def test_a_torch_entry_that_cannot_be_built_here_is_a_compile_error_with_the_reason(small):
    candidate = _cuda_candidate(small, "cuda-torch")
    if torch.version.cuda is not None and candidate.failure is None:
        pytest.skip("this torch builds CUDA extensions: test_a_torch_entry_builds_where_torch_has_cuda covers it")
    status, log = candidate.failure
    assert status == Status.COMPILE_ERROR
    assert "CPU-only build" in log or "CUDA toolkit" in log or "failed" in log


def test_a_torch_entry_builds_where_torch_has_cuda(small):
    if torch.version.cuda is None:
        pytest.skip(f"torch {torch.__version__} is a CPU-only build: a torch-binding CUDA entry cannot be built")
    candidate = _cuda_candidate(small, "cuda-torch")
    assert candidate.failure is None, candidate.failure
    assert candidate.library_file.name == "cuda-torch.so" or candidate.library_file.suffix == ".so"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="judging the CUDA entries needs a CUDA GPU")
def test_the_cuda_entries_pass_on_a_gpu(small, tmp_path):
    result = run_benchmark(",".join(CUDA + TRITON + ["python-inplace"]), str(small),
                           RunConfig(device="cuda", tiers=("cupti", "events"), trials=2,
                                     timing=TimingConfig(warmup=2, iters=20, budget_s=0.5)),
                           tmp_path, solutions_root=ENTRIES, progress=False)
    assert {(t.solution, t.evaluation.status.value) for t in result.traces} == \
        {(name, "PASSED") for name in CUDA + TRITON + ["python-inplace"]}, [t.evaluation.log[-500:] for t in result.traces]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUPTI counts kernels on a CUDA GPU")
def test_a_value_returning_entry_is_timed_without_a_copy_into_the_destinations(small, tmp_path):
    """The same math as a destination-passing entry, whose own two copy_ calls (output, new_state)
    it does not make: CUPTI counts two kernels fewer a call (the timing core's copy of the results,
    after its timer and on its own stream, is not counted), as flashinfer-bench times it."""
    result = run_benchmark("python-dps,python-value", str(small),
                           RunConfig(device="cuda", tiers=("cupti",), trials=2,
                                     timing=TimingConfig(warmup=2, iters=20, budget_s=0.5)),
                           tmp_path, solutions_root=ENTRIES, progress=False)
    assert {t.evaluation.status.value for t in result.traces} == {"PASSED"}
    per_call = {}
    for trace in result.traces:
        per_call.setdefault(trace.solution, set()).add(trace.evaluation.performance.tiers["cupti"].kernels_per_call)
    assert per_call["python-value"] == {k - 2 for k in per_call["python-dps"]}, per_call
