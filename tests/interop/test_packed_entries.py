"""What ``python -m harness pack`` writes is judged as shipped, with the verdicts of the folders it
came from: a dataset whose ``solutions/`` holds packed Solution JSONs (the layout flashinfer-bench's
validator wants) and a packed starter kit, through ``run_local.py --solutions`` on the CPU
(harness/judge/entries.py; docs/interop.md, "Judging a contest entry")."""

from __future__ import annotations

import pytest

from conftest import write_small_dataset
from harness.data.dataset import OUR_DEFINITION
from harness.data.definition import load_definition
from harness.interop.export import export_dataset
from harness.interop.pack import pack
from harness.judge import entries
from harness.judge.isolation import Timeouts
from harness.judge.run import RunConfig, run_benchmark
from harness.judge.solutions import discover, load_meta
from harness.judge.timing import TimingConfig
from harness.paths import SOLUTIONS_DIR

#: pt-reference runs on the CPU; the others are GPU-only, SKIPPED either way.
NAMES = ("pt-reference", "cuda-v1", "fla-recurrent", "fi-baseline")


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """The small dataset exported, NAMES packed into its solutions/<author>/gdn/<definition>/ and
    as starter kits beside it: (dataset folder, kits folder)."""
    root = tmp_path_factory.mktemp("packed-entries")
    dataset = export_dataset(str(write_small_dataset(root / "small")), root / "dataset", show_progress=False)
    definition = load_definition(OUR_DEFINITION)
    folders = discover()
    for name in NAMES:
        meta = load_meta(folders[name])
        pack(meta, definition, dataset / "solutions" / meta.author / "gdn" / definition.name, root / "kits")
    return dataset, root / "kits"


def verdicts(dataset, root, tmp_path) -> dict[tuple[str, str], str]:
    config = RunConfig(device="cpu", tiers=("wallclock",), trials=2,
                       timing=TimingConfig(warmup=1, iters=5, budget_s=0.2, warm_s=0.0))
    result = run_benchmark(",".join(NAMES), str(dataset), config, tmp_path, solutions_root=root, progress=False,
                           timeouts=Timeouts(startup_s=120, workload_s=120, total_s=600))
    return {(t.solution, t.workload.uuid): t.evaluation.status.value for t in result.traces}


def test_a_packed_dataset_is_judged_as_its_solution_folders_are(packed, tmp_path):
    dataset, _ = packed
    found = entries.discover_all(dataset).found
    assert {name: path.suffix for name, path in found.items()} == {name: ".json" for name in NAMES}
    as_shipped = verdicts(dataset, dataset, tmp_path / "shipped")
    as_folders = verdicts(dataset, SOLUTIONS_DIR, tmp_path / "folders")
    assert as_shipped == as_folders
    assert {s for (name, _), s in as_shipped.items() if name == "pt-reference"} == {"PASSED"}


def test_a_packed_starter_kit_is_read_as_the_kits_pack_script_reads_it(packed):
    """Our kit (config.toml + solution/python/) converts to the JSON's solution, files and entry
    point alike; the kit names no target_hardware, so it is GPU-only, as the kit's script packs it."""
    dataset, kits = packed
    definition = load_definition(OUR_DEFINITION)
    kit = entries.load(kits / "pt-reference", definition)
    shipped = entries.load(entries.discover_all(dataset).found["pt-reference"], definition)
    assert kit.files == shipped.files
    assert (kit.meta.function, kit.meta.calling, kit.meta.entry) == (shipped.meta.function, "dps",
                                                                     shipped.meta.entry)
    assert kit.meta.gpu_only and not shipped.meta.gpu_only
