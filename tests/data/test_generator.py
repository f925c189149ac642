"""The workload generator is deterministic, realistic and matches its recorded checksums."""

import json
import math
import shutil

import numpy as np
import pytest

from harness.data import generator
from harness.data.dataset import open_dataset
from harness.paths import REPO_ROOT, WORKLOADS_DIR


def test_layer_params_follow_the_model_init():
    for layer in range(generator.NUM_LAYERS):
        A_log, dt_bias = generator.layer_params(layer)
        A = np.exp(A_log.astype(np.float64))
        dt = np.log1p(np.exp(dt_bias.astype(np.float64)))  # softplus(dt_bias) recovers dt
        assert A_log.dtype == np.float32 and A.min() >= 1 - 1e-5 and A.max() <= 16 + 1e-4
        assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 1e-1 * (1 + 1e-4)


def test_context_lengths_span_zero_to_thousands():
    lengths = [generator.context_length(l, s) for l in range(generator.NUM_LAYERS)
               for s in range(generator.SEQS_PER_LAYER)]
    assert min(lengths) == 0 and max(lengths) > 2000 and len(set(lengths)) > 40


def test_sequence_state_is_deterministic_and_bounded():
    layer, seq = 2, 3  # a short context (4 tokens), fast
    a, b = generator.sequence_state(layer, seq), generator.sequence_state(layer, seq)
    assert a.dtype == np.float32 and a.shape == (8, 128, 128)
    assert np.array_equal(a, b) and np.abs(a).max() < 10
    assert np.abs(a).max() > 0  # a non-empty context leaves a non-zero state


def test_tree_sum_matches_plain_sum():
    x = np.random.default_rng(0).standard_normal((3, 128))
    assert np.allclose(generator._tree_sum_last(x), x.sum(-1), rtol=1e-12)


@pytest.mark.parametrize("set_name", list(generator.SET_BATCH_SIZES))
def test_committed_jsonl_matches_recipes(set_name):
    lines = (WORKLOADS_DIR / f"{set_name}.jsonl").read_text().splitlines()
    assert [json.loads(l) for l in lines] == [generator.workload_json(r) for r in generator.set_recipes(set_name)]


def test_set_shapes():
    assert len(generator.set_recipes("contest-v1")) == 20
    v2 = [r.batch_size for r in generator.set_recipes("contest-v2")]
    assert len(v2) == 54 and {b: v2.count(b) for b in set(v2)} == {1: 10, 4: 8, 8: 7, 16: 7, 32: 7, 48: 7, 64: 8}
    assert [r.batch_size for r in generator.set_recipes("sweep")] == [2**i for i in range(10)]
    # the 20 single-sequence contest-v1 workloads use 20 different bank sequences
    assert len({(r.layer, r.bank_sequences[0]) for r in generator.set_recipes("contest-v1")}) == 20


@pytest.fixture(scope="module")
def generated_contest_v1(tmp_path_factory):
    """``(cache folder, dataset)``: contest-v1 generated from scratch into a cache folder of this
    module's own, once per worker (a generation takes ~10 s of CI's two cores; three tests read
    one). Read it, never change it: a test that spoils files works on a copy."""
    cache = tmp_path_factory.mktemp("contest-v1-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GDN_BENCH_CACHE", str(cache))
        return cache, open_dataset("contest-v1", show_progress=False)


def test_contest_v1_tensors_match_recorded_checksums(generated_contest_v1):
    """Generating from scratch reproduces every recorded checksum bit for bit
    (materialize raises on any mismatch)."""
    _, dataset = generated_contest_v1
    checksums = json.loads((WORKLOADS_DIR / "checksums.json").read_text())
    for workload in dataset.workloads:
        state = dataset.files.get(workload.inputs["state"], workload.where).numpy()
        assert generator.sha256(state) == checksums[workload.uuid]["state"]


def test_a_changed_or_truncated_cached_file_is_made_again(generated_contest_v1, tmp_path, monkeypatch, capsys):
    """Cached tensors are checked against checksums.json (again only after their size or mtime changed)."""
    shutil.copytree(generated_contest_v1[0], tmp_path, dirs_exist_ok=True)  # copy2: sizes and mtimes kept, stamps valid
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))
    first = open_dataset("contest-v1", show_progress=False).workloads[0]
    blob = tmp_path / "dataset" / first.inputs["state"].path
    good = blob.read_bytes()
    changed = bytearray(good)
    changed[-8:] = b"\x7f" * 8  # same size: only the hash can tell
    for spoiled in (bytes(changed), good[: len(good) // 2]):
        blob.write_bytes(spoiled)
        dataset = open_dataset("contest-v1", show_progress=False)
        assert "generating it again" in capsys.readouterr().err and blob.read_bytes() == good
        assert dataset.workloads[0].uuid == first.uuid
    open_dataset("contest-v1", show_progress=False)  # intact: not hashed again, nothing said
    assert capsys.readouterr().err == ""


def test_a_dataset_names_every_file_a_run_reads(generated_contest_v1):
    """What the judge's vault keeps of a set: the definition, the set's JSONL, the checksums, every
    tensor file the workloads name and its stamp (a solution could forge a stamp)."""
    from harness.data.dataset import CHECKSUMS_FILE, OUR_DEFINITION

    cache, dataset = generated_contest_v1
    files = dataset.read_files()
    blob = cache / "dataset" / dataset.workloads[0].inputs["state"].path
    assert {OUR_DEFINITION, CHECKSUMS_FILE, blob, blob.with_name(blob.name + ".verified")} <= set(files)
    assert all(f.is_file() for f in files)


def test_checksum_mismatch_is_refused(tmp_path):
    recipe = generator.set_recipes("contest-v1")[0]
    bank = generator.Bank(tmp_path)
    wrong = {recipe.uuid: {"state": "0" * 64, "A_log": "0" * 64, "dt_bias": "0" * 64}}
    with pytest.raises(RuntimeError, match="checksum"):
        generator.materialize(recipe, tmp_path / "dataset", bank, wrong)


def test_default_scale_constant():
    assert generator.DEFAULT_SCALE == 1 / math.sqrt(128)


def test_bank_states_made_by_parallel_processes_are_the_ones_made_in_process(tmp_path):
    recipes = generator.set_recipes("contest-v1")[:3]
    generator.Bank(tmp_path / "parallel").fill(recipes, processes=2)
    in_process = generator.Bank(tmp_path / "here")
    keys = {(r.layer, s) for r in recipes for s in r.bank_sequences}
    for layer, seq in keys:
        made = generator.Bank(tmp_path / "parallel")
        assert made.path(layer, seq).exists()
        assert np.array_equal(made.state(layer, seq), in_process.state(layer, seq))


def test_a_failed_bank_process_is_an_error(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(RuntimeError, match="computing bank states failed"):
        generator.Bank(tmp_path / "file").fill(generator.set_recipes("contest-v1")[:2], processes=2)


def test_the_generator_imports_no_torch():
    """The bank's worker processes import the generator: torch would cost each of them ~1.5 s
    (it did, once the head counts were read through harness.data.definition)."""
    import subprocess
    import sys

    code = "import sys, harness.data.generator; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert done.stdout.strip() == "False"
