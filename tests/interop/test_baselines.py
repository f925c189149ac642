"""baselines/: the contest's official baseline in the form it shipped, for `--solutions` and the
final-rules score (docs/interop.md, "The contest's baseline")."""

import importlib.util
from pathlib import Path

from harness.judge import dps, entries

BASELINES = Path(__file__).resolve().parents[2] / "baselines"


def _writer():
    spec = importlib.util.spec_from_file_location("write_json", BASELINES / "write_json.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_json_is_what_the_writer_writes_from_the_source():
    writer = _writer()
    assert writer.JSON_FILE.read_text() == writer.json_text()


def test_the_folder_holds_one_value_returning_python_entry_of_our_definition(our_definition):
    found = entries.discover_all(BASELINES, our_definition.name).found
    assert list(found) == ["fi-baseline-wrapper"]
    meta = entries.load(found["fi-baseline-wrapper"], our_definition).meta
    assert (meta.language, meta.calling, meta.function) == ("python", "value", "run")
    assert "flashinfer" in meta.packages  # missing where FlashInfer is not installed: SKIPPED, not an error
    source = entries.load(found["fi-baseline-wrapper"], our_definition).files[f"{entries.SUBMISSION_DIR}/main.py"]
    entry = entries.load(found["fi-baseline-wrapper"], our_definition).files[dps.ENTRY_FILE].decode()
    assert b"use_qk_l2norm=False" in source and "HANDS_OVER = True" in entry
