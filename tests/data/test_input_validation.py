"""Malformed definition, workload, tensor and solution files are rejected with
an error naming the file and the field."""

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

from harness.data.dataset import OUR_DEFINITION, open_dataset
from harness.data.definition import load_definition
from harness.errors import HarnessInputError
from harness.judge.solutions import load_meta
from harness.data.workloads import load_workloads, materialize_inputs
from support.definition import tensor_input_names


def definition_with(tmp_path, mutate):
    data = json.loads(OUR_DEFINITION.read_text())
    mutate(data)
    path = tmp_path / "def.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.pop("name"), "name"),
    (lambda d: d["inputs"]["q"].update(dtype="bf17"), "inputs.q.dtype"),
    (lambda d: d["inputs"]["q"].update(shape=["batch_size", "nope"]), "inputs.q.shape"),
    (lambda d: d["axes"]["head_size"].update(value=-1), "axes.head_size.value"),
    (lambda d: d["axes"]["head_size"].update(type="fixed"), "axes.head_size.type"),
    (lambda d: d.update(reference="def not_run(): pass"), "reference"),
    (lambda d: d.update(reference="def run(:"), "reference"),
    (lambda d: d["outputs"].update(q=d["inputs"]["q"]), "outputs"),
    (lambda d: d.update(tags=5), "tags"),
    (lambda d: d["inputs"]["state"].update(optional="no"), "inputs.state.optional"),  # would read as true
])
def test_bad_definition(tmp_path, mutate, field):
    path = definition_with(tmp_path, mutate)
    with pytest.raises(HarnessInputError) as err:
        load_definition(path)
    assert str(path) in str(err.value) and f"'{field}'" in str(err.value)


def test_definition_not_json(tmp_path):
    path = tmp_path / "def.json"
    path.write_text("{nope")
    with pytest.raises(HarnessInputError, match="not valid JSON") as err:
        load_definition(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("make, said", [
    (lambda p: p.write_bytes(b'{"name": "\xff"}'), "not UTF-8 text"),
    (lambda p: p.mkdir(), "is a folder, not a file"),
])
def test_a_definition_or_workload_file_that_is_no_text_file_is_named(tmp_path, our_definition, make, said):
    for name, load in (("def.json", load_definition), ("w.jsonl", lambda p: load_workloads(p, our_definition))):
        path = tmp_path / name
        make(path)
        with pytest.raises(HarnessInputError, match=said) as err:
            load(path)
        assert str(err.value).startswith(str(path)), name


GOOD = {"uuid": "u1", "axes": {"batch_size": 1},
        "inputs": {**{n: {"type": "random"} for n in tensor_input_names()},
                   "scale": {"type": "scalar", "value": 0.0}}}


def mutated(change):
    obj = json.loads(json.dumps(GOOD))
    change(obj)
    return obj


@pytest.mark.parametrize("obj,field", [
    (mutated(lambda o: o.pop("uuid")), "uuid"),
    (mutated(lambda o: o["axes"].update(batch_size=-3)), "axes.batch_size"),
    (mutated(lambda o: o["axes"].pop("batch_size")), "axes.batch_size"),
    (mutated(lambda o: o["axes"].update(heads=2)), "axes"),
    (mutated(lambda o: o["inputs"].pop("q")), "inputs.q"),
    (mutated(lambda o: o["inputs"].update(q={"type": "zeros"})), "inputs.q.type"),
    (mutated(lambda o: o["inputs"].update(scale={"type": "scalar"})), "inputs.scale.value"),
    (mutated(lambda o: o["inputs"].update(state={"type": "safetensors", "path": "x"})), "inputs.state.tensor_key"),
    (mutated(lambda o: o["inputs"].update(extra={"type": "random"})), "inputs"),
    (mutated(lambda o: o["inputs"].update(q={"type": "scalar", "value": 1.0})), "inputs.q"),  # a tensor input
])
def test_bad_workload_line(tmp_path, our_definition, obj, field):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(GOOD | {"uuid": "first"}) + "\n" + json.dumps(obj) + "\n")
    with pytest.raises(HarnessInputError) as err:
        load_workloads(path, our_definition)
    assert f"{path}:2" in str(err.value) and f"'{field}'" in str(err.value)


def test_workload_not_json_and_duplicates(tmp_path, our_definition):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{oops\n")
    with pytest.raises(HarnessInputError, match=f"{path}:2.*not valid JSON"):
        load_workloads(path, our_definition)
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(HarnessInputError, match="duplicate uuid"):
        load_workloads(path, our_definition)


def test_workload_trace_wrapper_accepted(tmp_path, our_definition):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"definition": our_definition.name, "solution": None, "workload": GOOD}) + "\n")
    assert load_workloads(path, our_definition)[0].uuid == "u1"


def dataset_with_tensor(root, tensors, key="state"):
    (root / "definitions" / "gdn").mkdir(parents=True)
    (root / "workloads" / "gdn").mkdir(parents=True)
    shutil.copy(OUR_DEFINITION, root / "definitions" / "gdn")
    (root / "blob").mkdir()
    if tensors is not None:
        save_file(tensors, root / "blob" / "t.safetensors")
    obj = mutated(lambda o: o["inputs"].update(state={"type": "safetensors", "path": "blob/t.safetensors",
                                                      "tensor_key": key}))
    (root / "workloads" / "gdn" / f"{OUR_DEFINITION.stem}.jsonl").write_text(json.dumps(obj) + "\n")
    return open_dataset(str(root))


@pytest.mark.parametrize("tensors,key,match", [
    ({"state": torch.zeros(1, 8, 128, 64)}, "state", r"shape \(1, 8, 128, 64\)"),
    ({"state": torch.zeros(1, 8, 128, 128, dtype=torch.bfloat16)}, "state", "dtype torch.bfloat16"),
    ({"state": torch.zeros(1, 8, 128, 128)}, "h0", "no such tensor"),
    (None, "state", "tensor file not found"),
])
def test_bad_tensor_file(tmp_path, tensors, key, match):
    dataset = dataset_with_tensor(tmp_path, tensors, key)
    with pytest.raises(HarnessInputError, match=match) as err:
        materialize_inputs(dataset.workloads[0], dataset.definition, dataset.files, "cpu")
    assert "t.safetensors" in str(err.value)


def test_corrupt_tensor_file(tmp_path):
    dataset = dataset_with_tensor(tmp_path, {"state": torch.zeros(1, 8, 128, 128)})
    (tmp_path / "blob" / "t.safetensors").write_bytes(b"garbage" * 10)
    with pytest.raises(HarnessInputError, match="not a readable safetensors file"):
        materialize_inputs(dataset.workloads[0], dataset.definition, dataset.files, "cpu")


def test_unknown_dataset_spec():
    with pytest.raises(HarnessInputError, match="neither a workload set"):
        open_dataset("contest-v9")


@pytest.mark.parametrize("toml,field", [
    ('[solution]\nname = "x"\n', "solution.language"),
    ('[solution]\nname = "other"\n', "solution.name"),
    ('[solution]\nname = "x"\nlanguage = "fortran"\n', "solution.language"),
    ('[solution]\nname = "x"\nlanguage = "python"\ndefinition = "d"\nentry = "missing.py"\n', "solution.entry"),
    ('[solution]\nname = "x"\nlanguage = "python"\ndefinition = "d"\nentry = "main.py"\nstate_dtypes = ["fp8"]\n',
     "solution.state_dtypes"),
    ('[solution]\nname = "x"\nlanguage = "python"\ndefinition = "d"\nentry = "main.py"\n[tolerance.bfloat16]\natol = 1\n',
     "tolerance"),  # no solution declares a tolerance (docs/judging.md)
    ('solution = [', None),
])
def test_bad_solution_toml(tmp_path, toml, field):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "main.py").write_text("def run(inputs): pass\n")
    (folder / "solution.toml").write_text(toml)
    with pytest.raises(HarnessInputError) as err:
        load_meta(folder)
    assert "solution.toml" in str(err.value)
    if field:
        assert f"'{field}'" in str(err.value)
