"""cuda-v4's launch table lives in one place, kernel.cu's GDN_V4_LAUNCH_TABLE: the
contest entry point's default_config, the variants a build without
-DGDN_V4_ALL_VARIANTS compiles, and (through gdn_decode_launch_config) what
main.py and the tuner read (tests/test_cuda_compile.py reads it back from a build)."""

import re

import pytest

from harness.paths import SOLUTIONS_DIR
from solution_copies import import_copy
from tools import tune_cuda_v4 as tune

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


@pytest.fixture(scope="module")
def table():
    return tune.kernel_table((V4 / "kernel.cu").read_text())


def test_every_table_entry_is_a_compiled_shape_and_the_last_covers_every_batch(main, table):
    assert all(main.LaunchConfig(*config).is_compiled() for _, config in table)
    limits = [limit for limit, _ in table]
    assert limits[-1] is None and limits[:-1] == sorted(limits[:-1])


def test_the_tuners_table_macro_reads_back(table):
    source = (V4 / "kernel.cu").read_text()
    assert tune.table_macro(table) in source  # what the tuner prints is what kernel.cu holds
    assert tune.kernel_table(tune.table_macro(table) + "\n\n") == table


def test_tune_names_round_trip_every_variant(main):
    names = [name for name in tune.configurations(None, main, inputs={}) if name.startswith("cuda-v4/")]
    # rows x policy x lanes x warps, less the shapes whose lane groups cannot tile the
    # rows: 16 lanes need an even rows_per_warp (not 1), 8 lanes a multiple of 4 (not 1, 2).
    assert len(names) == len(main.CACHE_POLICIES) * (5 + 4 + 3) * len(main.WARPS_PER_BLOCK_CHOICES)
    for name in names:
        config = main.LaunchConfig(*tune.parse_config(name))
        assert config.is_compiled() and f"cuda-v4/{tune.config_name(config)}" == name


def test_is_compiled_matches_the_kernels_rule(main):
    assert main.LaunchConfig(8, "nc", 16).is_compiled()
    assert not main.LaunchConfig(1, "nc", 16).is_compiled()  # two rows in flight, one row to do
    assert not main.LaunchConfig(2, "stream", 8).is_compiled()
    assert not main.LaunchConfig(8, "nc", 4).is_compiled()   # not an instantiated lane count
    assert not main.LaunchConfig(8, "default", 32).is_compiled()  # not a cache policy
    assert main.LaunchConfig(8, "nc", 32, 1).is_compiled()
    assert not main.LaunchConfig(8, "nc", 32, 16).is_compiled()  # not an instantiated block size


def test_cache_policy_indices_match_the_kernels_enum(main):
    """main.py passes CACHE_POLICIES.index(policy); kernel.cu's CachePolicy must agree."""
    source = (V4 / "kernel.cu").read_text()
    enum = dict(re.findall(r"k(\w+) = (\d+)", source[source.index("enum CachePolicy"):].split("};")[0]))
    assert {_POLICY[name]: int(value) for name, value in enum.items()} == \
        {name: index for index, name in enumerate(main.CACHE_POLICIES)}


def test_launch_table_is_what_the_recorded_tune_suggests(table):
    """kernel.cu's table must follow from the tuning files it cites, by the tuner's own rule
    (tools/tune_cuda_v4.py). Those files hold both reduction forms; the ``.../rs`` names are the one kept."""
    import json

    from harness.paths import REPO_ROOT

    rows = []
    for part in ("small", "large"):
        report = json.loads((REPO_ROOT / "results" / "tuning" / f"cuda_tune_scatter_{part}.json").read_text())
        for row in report["batches"]:
            configs = {name.removesuffix("/rs"): r for name, r in row["configs"].items() if name.endswith("/rs")}
            rows.append(dict(row, configs=configs))
    assert tune.suggested_table(rows) == table
