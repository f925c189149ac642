"""cuda-v4's launch table lives twice: main.py (the harness's entry) and
kernel.cu's GDN_V4_LAUNCH_TABLE (the contest entry point's default_config, and
the variants a build without -DGDN_V4_ALL_VARIANTS compiles). They must agree."""

import re

import pytest

from harness.paths import SOLUTIONS_DIR
from solution_copies import import_copy
from tools import tune_cuda_v4 as tune

V4 = SOLUTIONS_DIR / "cuda-v4"


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


_POLICY = {"Stream": "stream", "Nc": "nc", "Plain": "plain", "NoAlloc": "noalloc"}  # kernel.cu's CachePolicy
#: one entry of kernel.cu's GDN_V4_LAUNCH_TABLE: X(largest batch, rows, CachePolicy, lanes per row, warps per block)
_ENTRY = re.compile(r"X\((\w+), (\d+), k(\w+), (\d+), (\d+)\)")


def _kernel_table() -> tuple[list[tuple[int, tuple[int, str, int, int]]], tuple[int, str, int, int]]:
    """(entries [(max batch, config)], the last entry's config: it covers every batch) parsed
    from kernel.cu's GDN_V4_LAUNCH_TABLE, a config being (rows, cache policy, lanes, warps)."""
    source = (V4 / "kernel.cu").read_text()
    body = source[source.index("#define GDN_V4_LAUNCH_TABLE(X)"):source.index("LaunchConfig default_config(")]
    found = [(limit, (int(rows), _POLICY[policy], int(lanes), int(warps)))
             for limit, rows, policy, lanes, warps in _ENTRY.findall(body)]
    assert found and found[-1][0] == "INT64_MAX", "the table's last entry must cover every batch"
    return [(int(limit), config) for limit, config in found[:-1]], found[-1][1]


def test_kernel_default_config_mirrors_main_launch_table(main):
    entries, fallback = _kernel_table()
    assert entries, "no table entries found in kernel.cu's default_config"
    for batch in range(1, 1025):
        config = main.launch_config(batch)
        expected = next((cfg for limit, cfg in entries if batch <= limit), fallback)
        assert tuple(config) == expected, f"B={batch}"


def test_every_table_entry_is_a_compiled_shape(main):
    assert all(cfg.is_compiled() for _, cfg in main.LAUNCH_TABLE)
    assert main.LAUNCH_TABLE[-1][0] is None  # the last entry serves every larger batch


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


def test_launch_table_is_what_the_recorded_tune_suggests(main):
    """main.py's table must follow from the tuning files it cites, by the tuner's own rule
    (tools/tune_cuda_v4.py). Those files hold both reduction forms; the ``.../rs`` names are the one kept."""
    import json

    from harness.paths import REPO_ROOT

    rows = []
    for part in ("small", "large"):
        report = json.loads((REPO_ROOT / "results" / "tuning" / f"cuda_tune_scatter_{part}.json").read_text())
        for row in report["batches"]:
            configs = {name.removesuffix("/rs"): r for name, r in row["configs"].items() if name.endswith("/rs")}
            rows.append(dict(row, configs=configs))
    assert tune.suggested_table(rows) == [[limit, tuple(config)] for limit, config in main.LAUNCH_TABLE]
