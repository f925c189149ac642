"""cuda-v4's launch tables: one header per GPU (launch_table.<device slug>.cuh), each
table in one place, named by the index launch_tables.cuh that kernel.cu includes for
the contest entry's choice, the variants a build without -DGDN_V4_ALL_VARIANTS compiles
and (through the module's queries) what main.py and the tuner read
(tests/judge/test_cuda_compile.py reads the choice back from a build; tests/tools/test_tune_driver.py checks
the tuner's search space against the all-variants build)."""

import re

import pytest

from harness.paths import SOLUTIONS_DIR
from support.solution_copies import import_copy
from tools.tune import cuda_v4 as tune
from tools.tune.driver import chosen_table

V4 = SOLUTIONS_DIR / "cuda-v4"
_POLICY = {"Stream": "stream", "Nc": "nc", "Plain": "plain", "NoAlloc": "noalloc"}  # kernel.cu's CachePolicy


@pytest.fixture(scope="module")
def main(tmp_path_factory):
    """cuda-v4's main.py from a copy of its folder. Without a GPU importing loads
    no library, so nothing is built; with one, the entry loads kernel.so at
    import, so the harness's loader builds it."""
    import torch

    workdir = tmp_path_factory.mktemp("cuda-v4")
    if torch.cuda.is_available():
        from harness.judge.solutions import load_meta, load_solution

        return load_solution(load_meta(V4), workdir=workdir)
    return import_copy(V4, workdir)


H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def table():
    return tune.gpu_tables(V4)[H100]


def test_every_table_entry_is_a_compiled_shape_and_the_last_covers_every_batch(main, table):
    assert all(main.LaunchConfig(*config).is_compiled() for _, config in table)
    limits = [limit for limit, _ in table]
    assert limits[-1] is None and limits[:-1] == sorted(limits[:-1])


@pytest.mark.parametrize("device", [H100, "NVIDIA H200"])
def test_the_tuners_table_header_reads_back(device):
    text = (V4 / tune.table_file_name(device)).read_text()
    name, table, origin = tune.read_table_header(text)
    assert name == device == origin["device"] and set(origin) == set(tune.PROVENANCE_FIELDS)
    bf16_origin = tune.read_bf16_origin(text)
    assert set(bf16_origin) == set(tune.PROVENANCE_FIELDS) and bf16_origin["device"] == device
    # what the tuner writes is what the file holds
    assert tune.table_header(origin, table, tune.read_bf16_table(text), bf16_origin) == text


def test_the_index_includes_every_table_file_once():
    """C++ cannot list a folder: launch_tables.cuh names the table files kernel.cu sees."""
    files = sorted(p.name for p in V4.glob("launch_table.*.cuh"))
    included = tune.indexed_files((V4 / tune.INDEX).read_text())
    assert sorted(included) == files and len(set(included)) == len(included)
    assert all(tune.table_file_name(device) in files for device in tune.gpu_tables(V4))  # named by their device
    index = (V4 / tune.INDEX).read_text()
    assert tune.with_file(index, files[0]) == index  # the tuner adds a line only for a new GPU
    assert tune.indexed_files(tune.with_file(index, "launch_table.NVIDIA-B200.cuh"))[-1] == "launch_table.NVIDIA-B200.cuh"


@pytest.mark.parametrize("device, dtype, report", [
    (H100, "float32", "results/tuning/20261126-H100-rounds/tune/NVIDIA-H100-80GB-HBM3.json"),
    (H100, "bfloat16", "results/tuning/20261127-H100-tune-ab-bf16-staged/tune/cuda-v4/NVIDIA-H100-80GB-HBM3.json"),
    ("NVIDIA H200", "float32", "results/tuning/20261127-H200-tune-ab-bf16/tune/cuda-v4/NVIDIA-H200.json"),
    ("NVIDIA H200", "bfloat16", "results/tuning/20261127-H200-tune-ab-bf16-staged/tune/cuda-v4/NVIDIA-H200.json"),
])
def test_each_gpus_table_is_its_reports_choice(main, device, dtype, report):
    """Installed from its report (python -m tools.tune.install): the tuner's own rule over the
    report's rows of the state dtype gives the header's table, and the header cites that report."""
    import json

    from harness.paths import REPO_ROOT
    from harness.records.store import read_stored

    text = (V4 / tune.table_file_name(device)).read_text()
    origin = tune.read_table_header(text)[2] if dtype == "float32" else tune.read_bf16_origin(text)
    assert origin["report"] == report
    rows = json.loads(read_stored(REPO_ROOT / origin["report"]))["state_dtypes"][dtype]["batches"]
    space = tune.CudaV4(main).configs(dtype)
    table = tune.read_table_header(text)[1] if dtype == "float32" else tune.read_bf16_table(text)
    assert [[limit, tuple(space[name])] for limit, name in chosen_table(rows)] == table


def test_tune_names_every_variant_once(main, table):
    space = tune.CudaV4(main).configs("float32")
    assert all(config.is_compiled() and tune.config_name(config) == name for name, config in space.items())
    assert len(set(space.values())) == len(space)
    assert all(main.LaunchConfig(*config) in space.values() for _, config in table)  # the table in use is measured


def test_only_a_bf16_states_two_pass_variants_stage_rows(main, tmp_path):
    """kernel.cu's STAGED (kCanStage): the tuner offers staged variants for the bf16 state's two
    passes alone, names them ``.../p2s``, and a table entry of one writes and reads back."""
    fp32, bf16 = tune.CudaV4(main).configs("float32"), tune.CudaV4(main).configs("bfloat16")
    assert not any(config.staged for config in fp32.values())
    staged = {name: config for name, config in bf16.items() if config.staged}
    assert staged and all(name.endswith("/p2s") and config.passes == 2 for name, config in staged.items())
    assert len(staged) == sum(config.passes == 2 for config in fp32.values())  # one staged twin of each
    assert set(bf16) == set(fp32) | set(staged)
    assert tune.config_name(main.LaunchConfig(16, "stream", 16, 1, 2, True)) == "r16/stream/l16/w1/p2s"
    assert not main.LaunchConfig(16, "stream", 16, 1, 1, True).is_compiled("bfloat16")  # no second pass
    assert not main.LaunchConfig(16, "stream", 16, 1, 2, True).is_compiled("float32")
    device, fp32_table, origin = tune.read_table_header((V4 / tune.table_file_name(H100)).read_text())
    entry = [[None, (16, "stream", 16, 1, 2, True)]]
    text = tune.table_header(origin, fp32_table, entry)
    assert "  X(INT64_MAX, 16, kStream, 16, 1, 2, 1))" in text and tune.read_bf16_table(text) == entry


def test_is_compiled_matches_the_kernels_rule(main):
    assert main.LaunchConfig(8, "nc", 16).is_compiled()
    assert not main.LaunchConfig(1, "nc", 16).is_compiled()  # two rows in flight, one row to do
    assert not main.LaunchConfig(2, "stream", 8).is_compiled()
    assert not main.LaunchConfig(8, "nc", 4).is_compiled()   # not an instantiated lane count
    assert not main.LaunchConfig(8, "default", 32).is_compiled()  # not a cache policy
    assert main.LaunchConfig(8, "nc", 32, 1).is_compiled()
    assert not main.LaunchConfig(8, "nc", 32, 16).is_compiled()  # not an instantiated block size


def test_two_pass_rule_matches_the_kernels(main):
    """main.py's LaunchConfig.is_compiled offers two passes where kernel.cu instantiates them: both
    hold the least rows a lane needs for it, which must agree."""
    source = (V4 / "kernel.cu").read_text()
    assert int(re.search(r"constexpr int kMinRowsPerLaneForTwoPasses = (\d+);", source).group(1)) == \
        main.MIN_ROWS_PER_LANE_FOR_TWO_PASSES


def test_cache_policy_indices_match_the_kernels_enum(main):
    """main.py passes CACHE_POLICIES.index(policy); kernel.cu's CachePolicy must agree."""
    source = (V4 / "kernel.cu").read_text()
    enum = dict(re.findall(r"k(\w+) = (\d+)", source[source.index("enum CachePolicy"):].split("};")[0]))
    assert {_POLICY[name]: int(value) for name, value in enum.items()} == \
        {name: index for index, name in enumerate(main.CACHE_POLICIES)}


def test_a_bf16_table_reads_back_and_a_tune_of_one_dtype_keeps_the_others_table(main, tmp_path):
    """A header holds the fp32 state's table and may hold the bf16 state's (GDN_V4_GPU_BF16); a tune
    of one state dtype rewrites that one and keeps what the GPU's file holds of the other."""
    import shutil

    device, fp32, origin = tune.read_table_header((V4 / tune.table_file_name(H100)).read_text())
    # a header of the fp32 table alone: a bf16 state takes that table's entry of ceil(B / 2)
    assert tune.read_bf16_table(tune.table_header(origin, fp32, None)) is None
    bf16 = [[8, (4, "noalloc", 16, 2, 1, False)], [None, (16, "plain", 8, 2, 1, False)]]
    both = tune.table_header(origin, fp32, bf16)
    assert 'GDN_V4_GPU_BF16("NVIDIA H100 80GB HBM3",' in both
    assert tune.read_table_header(both)[1] == fp32 and tune.read_bf16_table(both) == bf16
    with pytest.raises(ValueError, match="must end with INT64_MAX"):
        tune.read_bf16_table(both.replace("X(INT64_MAX, 16, kPlain, 8, 2, 1, 0)", "X(512, 16, kPlain, 8, 2, 1, 0)"))

    folder = tmp_path / "cuda-v4"
    shutil.copytree(V4, folder)
    (folder / tune.table_file_name(H100)).write_text(both)
    adapter = tune.CudaV4(main, source_dir=folder)
    name = lambda config: tune.config_name(main.LaunchConfig(*config))
    fp32_only = adapter.table_files({"float32": [[limit, name(config)] for limit, config in fp32]}, origin)
    assert tune.read_bf16_table(fp32_only[tune.table_file_name(H100)]) == bf16  # kept
    bf16_only = adapter.table_files({"bfloat16": [[None, name((8, "nc", 16, 2, 1))]]}, origin)
    written = bf16_only[tune.table_file_name(H100)]
    assert tune.read_table_header(written)[1] == fp32 and tune.read_bf16_table(written) == [[None, (8, "nc", 16, 2, 1, False)]]
    assert "from another tune" not in written  # one tune chose both: one provenance

    # a later tune of the bf16 state alone: each table keeps the provenance of the tune that chose it
    later = dict(origin, commit="abc1234", report="results/tuning/LATER/cuda-v4/x.json")
    (folder / tune.table_file_name(H100)).write_text(both)
    written = adapter.table_files({"bfloat16": [[None, name((8, "nc", 16, 2, 1))]]}, later)[tune.table_file_name(H100)]
    assert tune.read_table_header(written)[2] == origin and tune.read_bf16_origin(written) == later
    assert "// bf16 commit: abc1234" in written
    (folder / tune.table_file_name(H100)).write_text(written)
    assert tune.gpu_table_reports(folder)[H100] == [origin["report"], later["report"]]
    refit = adapter.table_files({"float32": [[limit, name(config)] for limit, config in fp32]}, origin)
    assert tune.read_bf16_origin(refit[tune.table_file_name(H100)]) == later  # an fp32 tune keeps the bf16 table's
    new_gpu = dict(origin, device="NVIDIA B200")
    with pytest.raises(ValueError, match="needs the fp32 table"):
        adapter.table_files({"bfloat16": [[None, name((8, "nc", 16, 2, 1))]]}, new_gpu)


def default_build_variants(main, state_dtype: str) -> set:
    """Every variant the default build runs for a state of ``state_dtype``: the GPU tables' (a bf16
    state also takes the fp32 tables' entries where a GPU has no bf16 table) and the default
    model's picks over B = 1..1024 at the bandwidths of docs/tuning.md's GPUs (the H100, the H200
    and a B200: ``tools.tune.model_check.PRESETS``)."""
    from tools.tune.model_check import PRESETS

    tables = list(tune.gpu_tables(V4).values())
    if state_dtype == "bfloat16":
        tables += list(tune.bf16_gpu_tables(V4).values())
    variants = {main.LaunchConfig(*config) for table in tables for _, config in table}
    return variants | {main.launch_config_for("", bandwidth, batch, state_dtype)
                       for bandwidth in PRESETS.values() for batch in range(1, 1025)}


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="runs the kernels on a CUDA GPU")
@pytest.mark.parametrize("state_dtype", ["float32", "bfloat16"])
def test_every_variant_of_the_default_build_is_correct_on_the_gpu(main, state_dtype):
    """What a GPU with or without a table runs (tables and default ladders, e.g. the bf16 state's
    own ladder of 2026-11-27), each forced on the tuner's B = 3 inputs (a batch size no rung or
    table entry is special to) and checked against the fp32 reference with the judge's tolerance
    for the state's dtype."""
    from tools.tune.inputs import tune_inputs
    from tools.tune.measure import check_call, state_tolerance
    from tools.vectorized import reference_outputs

    inputs, _ = tune_inputs(3, state_dtype, "cuda")
    expected = reference_outputs(inputs)
    variants = default_build_variants(main, state_dtype)
    failed = {tune.config_name(config): result for config in sorted(variants)
              if not (result := check_call(lambda: main.run_with_config(inputs, config), inputs, expected,
                                           state_tolerance(state_dtype)))["correct"]}
    assert variants and not failed, failed
