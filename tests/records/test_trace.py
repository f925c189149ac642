"""The typed trace (harness.records.trace), its store and the annotation pass."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.records import STAMP, make_floor, make_trace

from harness.records.annotate import annotate
from harness.records.store import (FLOORS_FILE, MANIFEST_KEY, SKIPPED_FILE, TRACES_FILE, RunWriter, load_run, read_stored,
                                   run_dirs)
from harness.records.trace import (Correctness, CorrectnessExtra, Environment, Evaluation, EvaluationStatus,
                                   Performance, TensorErrors, Trace, floor_label, is_floor_label, label_state_dtype)

REPO = Path(__file__).resolve().parents[2]
STORED_RUNS = run_dirs(REPO / "results")
BF16 = "cutedsl-bf16[bfloat16-state]"


def evaluation(status, correctness=None, performance=None) -> Evaluation:
    return Evaluation(status=status, environment=Environment(hardware="GPU"), timestamp=STAMP,
                      correctness=correctness, performance=performance)


# ------------------------------------------------------------------ models


def test_status_ties_correctness_and_performance():
    ok, perf = Correctness(), Performance()
    evaluation("PASSED", ok, perf)
    evaluation("INCORRECT_NUMERICAL", ok)
    evaluation("SKIPPED")
    evaluation("RUNTIME_ERROR")
    for status, correctness, performance in [("PASSED", None, perf), ("PASSED", ok, None),
                                             ("INCORRECT_NUMERICAL", None, None), ("INCORRECT_NUMERICAL", ok, perf),
                                             ("SKIPPED", ok, None), ("COMPILE_ERROR", None, perf)]:
        with pytest.raises(ValidationError):
            evaluation(status, correctness, performance)


def test_fields_are_checked():
    with pytest.raises(ValidationError):
        Correctness(max_absolute_error=-1.0)
    with pytest.raises(ValidationError):
        Environment(hardware="")
    with pytest.raises(ValidationError):
        Performance(latency_ms=-1.0)
    with pytest.raises(ValidationError):  # an unknown key is a mistake, not an extra
        Performance(latency_ms=1.0, latency_us=1000.0)
    with pytest.raises(ValidationError):  # a tier filed under another tier's name
        Performance(tiers={"cupti": {"tier": "events", "available": False}})
    assert EvaluationStatus.SKIPPED.value == "SKIPPED"


def test_inf_and_nan_round_trip_as_strings():
    errors = TensorErrors(max_abs=math.inf, max_rel=math.nan, rel_l2=math.inf, failed=3, nonfinite=3, numel=8)
    correctness = Correctness(max_relative_error=math.nan, max_absolute_error=math.inf,
                              extra=CorrectnessExtra(per_output={"output": errors}, trials=1, atol=0.01, rtol=0.01))
    trace = make_trace("x", "w0", {}, status="INCORRECT_NUMERICAL")
    trace.evaluation.correctness = correctness
    text = trace.model_dump_json()
    raw = json.loads(text)  # strict JSON: no bare Infinity/NaN tokens
    assert raw["evaluation"]["correctness"]["max_absolute_error"] == "Infinity"
    assert raw["evaluation"]["correctness"]["extra"]["per_output"]["output"]["max_rel"] == "NaN"
    back = Trace.model_validate_json(text)
    assert back.evaluation.correctness.max_absolute_error == math.inf
    assert math.isnan(back.evaluation.correctness.max_relative_error)
    assert back.evaluation.correctness.extra.per_output["output"].rel_l2 == math.inf


def test_labels():
    assert label_state_dtype(BF16) == "bfloat16" and label_state_dtype("cuda-v4") == "float32"
    assert floor_label() == "copy-floor" and floor_label("bfloat16") == "copy-floor[bfloat16-state]"
    assert is_floor_label("copy-floor[bfloat16-state]") and not is_floor_label("copy-floor-ish")


# ------------------------------------------------------------------ store


@pytest.mark.parametrize("run_dir", STORED_RUNS, ids=[p.name for p in STORED_RUNS])
def test_every_stored_run_loads(run_dir, capsys):
    run = load_run(run_dir)
    assert capsys.readouterr().err == ""  # nothing skipped
    lines = [line for name in (TRACES_FILE, FLOORS_FILE)
             for line in (read_stored(run_dir / name) or b"").decode().splitlines() if line.strip()]
    assert len(run.traces) + len(run.floors) == len(lines)
    assert run.floors and run.traces and run.meta
    assert {f.workload for f in run.floors} == {t.workload.uuid for t in run.traces}
    for floor in run.floors:
        assert floor.environment.hardware == run.hardware and floor.nbytes > 0
        assert all(name == figure.tier for name, figure in floor.tiers.items())


def test_writer_round_trip_and_rewrites_whole_files(tmp_path):
    traces = [make_trace("a", "w0", {"events": 2.0}), make_trace("b", "w0", {}, status="SKIPPED")]
    floors = [make_floor("w0", {"events": 1.0, "cupti": None})]
    writer = RunWriter(tmp_path / "run")
    writer.write_run({"workloads": "sweep"}, [], traces[:1])
    (writer.run_dir / TRACES_FILE).write_text("tampered\n")
    writer.write_run({"workloads": "sweep"}, floors, traces)
    frame = writer.write_summary(traces, floors)
    assert sorted(p.name for p in writer.run_dir.iterdir()) == ["floors.jsonl", "run.json", "skipped.jsonl",
                                                                 "summary.csv", "traces.jsonl"]  # no temporary files
    assert [json.loads(line)["solution"] for line in (writer.run_dir / TRACES_FILE).read_text().splitlines()] == ["a"]
    assert [json.loads(line)["solution"] for line in (writer.run_dir / SKIPPED_FILE).read_text().splitlines()] == ["b"]
    run = load_run(writer.run_dir)
    assert (run.traces, run.floors) == (traces, floors) and run.meta["workloads"] == "sweep"
    assert set(run.meta[MANIFEST_KEY]) == {TRACES_FILE, SKIPPED_FILE, "floors.jsonl"}
    assert list(frame["solution"]) == ["copy-floor", "a", "b"]
    assert frame.loc[0, "events_value_us"] == 1.0 and frame.loc[0, "cupti_unavailable"] == "not here"


def test_bad_lines_are_skipped_with_a_note(tmp_path, capsys):
    writer = RunWriter(tmp_path / "run")
    writer.write_run({}, [], [make_trace("a", f"w{i}", {"events": 2.0}) for i in range(3)])
    path = writer.run_dir / TRACES_FILE
    lines = path.read_text().splitlines()
    passed_without_correctness = json.loads(lines[1])
    passed_without_correctness["evaluation"]["correctness"] = None
    path.write_text("\n".join([lines[0], json.dumps(passed_without_correctness), "{not json", lines[2],
                               lines[2][:40]]) + "\n")
    run = load_run(writer.run_dir)
    assert [t.workload.uuid for t in run.traces] == ["w0", "w2"]
    err = capsys.readouterr().err
    assert f"{path}:2: not a valid record" in err and f"{path}:3: not valid JSON" in err
    assert f"{path}:5: truncated last line" in err


def test_old_format_floor_rows_become_floor_measurements(tmp_path):
    """Before floors.jsonl, the floor was a PASSED ``copy-floor`` trace without correctness."""
    floor = make_floor("w0", {"events": 1.5}, batch=4)
    old_row = {"definition": "gdn_decode_qk4_v8_d128_k_last", "solution": "copy-floor",
               "workload": {"uuid": "w0", "axes": {"batch_size": 4}, "inputs": {}},
               "evaluation": {"status": "PASSED", "log": "physical limit, not checked",
                              "environment": {"hardware": "GPU X", "libs": {}}, "timestamp": STAMP,
                              "performance": {"latency_ms": 0.0015, "headline_tier": "events",
                                              "reference_latency_ms": 0.0, "speedup_factor": 0.0,
                                              "bytes_moved": 1 << 20,
                                              "tiers": {"events": {"available": True, "value_us": 1.5,
                                                                   "median_us": 1.5}}}}}
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    trace = make_trace("a", "w0", {"events": 3.0}, batch=4, hardware="GPU X").model_dump_json()
    (run_dir / TRACES_FILE).write_text(json.dumps(old_row) + "\n" + trace + "\n")
    run = load_run(run_dir)
    assert len(run.traces) == 1 and run.hardware == "GPU X"
    assert run.floors == [floor.model_copy(update={"environment": Environment(hardware="GPU X")})]


# ------------------------------------------------------------------ annotate


def annotated_run():
    traces = [make_trace("pt-reference", f"w{i}", {"events": 100.0 * (i + 1), "cupti": 50.0}) for i in range(2)]
    traces += [make_trace("fast", f"w{i}", {"events": 10.0, "cupti": None}) for i in range(2)]
    traces += [make_trace(BF16, "w0", {"events": 5.0}), make_trace("broken", "w0", {}, status="RUNTIME_ERROR")]
    floors = [make_floor(f"w{i}", {"events": 2.0 + i}) for i in range(2)]
    floors.append(make_floor("w1", {"events": 1.0}, state_dtype="bfloat16"))
    return traces, floors


def test_annotate_fills_floor_multiples_and_speedups():
    traces, floors = annotated_run()
    before = [t.model_copy(deep=True) for t in traces]
    out = {(t.solution, t.workload.uuid): t for t in annotate(traces, floors)}
    assert traces == before  # pure: the inputs are untouched
    fast = out[("fast", "w1")].evaluation.performance
    assert fast.tiers["events"].copy_floor_us == 3.0 and fast.tiers["events"].x_copy_floor == pytest.approx(10 / 3)
    assert fast.tiers["events"].speedup_vs_reference == pytest.approx(20.0)
    assert fast.tiers["cupti"].speedup_vs_reference is None  # unavailable tier
    assert fast.speedup_factor == pytest.approx(20.0) and fast.reference_latency_ms == pytest.approx(0.2)
    reference = out[("pt-reference", "w0")].evaluation.performance
    assert reference.headline_tier == "cupti" and reference.speedup_factor == pytest.approx(1.0)
    assert reference.tiers["cupti"].x_copy_floor is None  # no cupti floor
    # a bf16-state variant: the fp32 reference, but only a bf16 floor (none for w0)
    bf16 = out[(BF16, "w0")].evaluation.performance.tiers["events"]
    assert bf16.speedup_vs_reference == pytest.approx(20.0) and bf16.x_copy_floor is None
    assert out[("broken", "w0")] == traces[-1]


def test_an_earlier_runs_reference_fills_in_only_where_this_run_has_none():
    traces, floors = annotated_run()
    earlier = [make_trace("pt-reference", "w0", {"events": 999.0}), make_trace("pt-reference", "w2", {"events": 40.0})]
    traces.append(make_trace("fast", "w2", {"events": 10.0}))
    out = {(t.solution, t.workload.uuid): t for t in annotate(traces, floors, references=earlier)}
    assert out[("fast", "w0")].evaluation.performance.speedup_factor == pytest.approx(10.0)  # this run's own 100
    assert out[("fast", "w2")].evaluation.performance.speedup_factor == pytest.approx(4.0)  # the earlier run's 40


def test_annotate_uses_the_floor_of_the_same_state_dtype():
    traces, floors = annotated_run()
    traces.append(make_trace(BF16, "w1", {"events": 2.5}))
    figure = annotate(traces, floors)[-1].evaluation.performance.tiers["events"]
    assert figure.copy_floor_us == 1.0 and figure.x_copy_floor == pytest.approx(2.5)


def test_annotate_is_order_independent_and_idempotent():
    traces, floors = annotated_run()
    expected = {(t.solution, t.workload.uuid): t for t in annotate(traces, floors)}
    rng = random.Random(0)
    for _ in range(10):
        shuffled_traces, shuffled_floors = traces[:], floors[:]
        rng.shuffle(shuffled_traces)
        rng.shuffle(shuffled_floors)
        out = annotate(shuffled_traces, shuffled_floors)
        assert [(t.solution, t.workload.uuid) for t in out] == [(t.solution, t.workload.uuid) for t in shuffled_traces]
        assert {(t.solution, t.workload.uuid): t for t in out} == expected
    again = annotate(list(expected.values()), floors)
    assert {(t.solution, t.workload.uuid): t for t in again} == expected


def test_annotate_clears_stale_values():
    traces, floors = annotated_run()
    out = annotate(traces, floors)
    without_reference = annotate([t for t in out if t.solution != "pt-reference"], [])
    fast = next(t for t in without_reference if t.solution == "fast").evaluation.performance
    assert fast.tiers["events"].speedup_vs_reference is None and fast.tiers["events"].x_copy_floor is None
    assert fast.speedup_factor == 0.0 and fast.reference_latency_ms == 0.0


@pytest.mark.parametrize("run_dir", STORED_RUNS, ids=[p.name for p in STORED_RUNS])
def test_annotate_agrees_with_the_stored_runs(run_dir):
    """This pass gives the per-tier numbers the judge stored: the older runs' fp32 traces were
    annotated by its old in-order pass, and their bf16-state variants now get no fp32 floor
    multiple (those runs measured no bf16 floor); a run that measured one gets its multiple."""
    run = load_run(run_dir)
    bf16_floor = any(floor.state_dtype == "bfloat16" for floor in run.floors)
    for stored, new in zip(run.traces, annotate(run.traces, run.floors)):
        if stored.evaluation.performance is None:
            continue
        for tier, old in stored.evaluation.performance.tiers.items():
            figure = new.evaluation.performance.tiers[tier]
            assert figure.speedup_vs_reference == pytest.approx(old.speedup_vs_reference)
            if stored.state_dtype == "float32" or bf16_floor:
                assert figure.x_copy_floor == pytest.approx(old.x_copy_floor)
                assert figure.copy_floor_us == old.copy_floor_us
            else:
                assert figure.x_copy_floor is None


def test_only_folders_the_writer_left_are_read_as_runs(tmp_path, capsys):
    """score, the leaderboard and the earlier-reference lookup read :func:`run_dirs`: a folder
    without the writer's manifest (forged, or hand-made) or with a file changed since is skipped,
    and the note names it."""
    traces = [make_trace("a", "w0", {"events": 2.0})]
    good = RunWriter(tmp_path / "runs" / "1-good")
    good.write_run({"workloads": "sweep"}, [], traces)
    edited = RunWriter(tmp_path / "runs" / "2-edited")
    edited.write_run({"workloads": "sweep"}, [], traces)
    with open(edited.run_dir / TRACES_FILE, "a") as f:
        f.write(make_trace("forged", "w0", {"events": 0.1}).model_dump_json() + "\n")
    forged = tmp_path / "runs" / "3-forged"
    forged.mkdir()
    (forged / TRACES_FILE).write_text(make_trace("forged", "w0", {"events": 0.1}).model_dump_json() + "\n")
    (forged / "run.json").write_text(json.dumps({"workloads": "sweep"}))
    assert run_dirs(tmp_path) == [good.run_dir]
    err = capsys.readouterr().err
    assert "2-edited" in err and "3-forged" in err and "manifest" in err


def test_a_folder_kept_compressed_reads_the_same_and_its_manifest_still_holds(tmp_path, capsys):
    """Older evidence is kept as ``<file>.gz`` (gzip -n); the manifest names the bytes inside, so a
    compressed folder is still the writer's, and one whose .gz was rewritten is not."""
    import gzip

    traces = [make_trace("a", "w0", {"events": 2.0})]
    floors = [make_floor("w0", {"events": 1.0, "cupti": None})]
    for name in ("plain", "compressed", "rewritten"):
        RunWriter(tmp_path / "runs" / name).write_run({"workloads": "sweep"}, floors, traces)
    for name in ("compressed", "rewritten"):
        for data_file in (TRACES_FILE, FLOORS_FILE, SKIPPED_FILE):
            path = tmp_path / "runs" / name / data_file
            path.with_name(data_file + ".gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))
            path.unlink()
    forged = gzip.compress(make_trace("forged", "w0", {"events": 0.1}).model_dump_json().encode() + b"\n", mtime=0)
    (tmp_path / "runs" / "rewritten" / (TRACES_FILE + ".gz")).write_bytes(forged)
    assert [p.name for p in run_dirs(tmp_path)] == ["compressed", "plain"]
    assert "rewritten" in capsys.readouterr().err
    plain, compressed = (load_run(tmp_path / "runs" / name) for name in ("plain", "compressed"))
    assert (compressed.traces, compressed.floors) == (plain.traces, plain.floors) == (traces, floors)


def test_a_cut_or_unreadable_file_is_named_and_only_its_folder_is_skipped(tmp_path, capsys):
    """A run killed while a ``.gz`` was written, or a ``run.json`` that is not UTF-8, must not stop
    the readers of every other run (run_local's earlier-reference lookup, score, the leaderboard):
    the folder is skipped with a note naming the file, and a direct read names it in its error."""
    import gzip

    traces = [make_trace("a", "w0", {"events": 2.0})]
    for name in ("cut", "good", "utf"):
        RunWriter(tmp_path / "runs" / name).write_run({"workloads": "sweep"}, [], traces)
    cut = tmp_path / "runs" / "cut" / TRACES_FILE
    whole = gzip.compress(cut.read_bytes(), mtime=0)
    cut.with_name(TRACES_FILE + ".gz").write_bytes(whole[: len(whole) // 2])
    cut.unlink()
    (tmp_path / "runs" / "utf" / "run.json").write_bytes(b"\xff\xfe not text")
    assert [p.name for p in run_dirs(tmp_path)] == ["good"]
    err = capsys.readouterr().err
    assert f"{cut}.gz: cannot be read back (cut short)" in err and str(tmp_path / "runs" / "utf" / "run.json") in err
    with pytest.raises(OSError, match="cut short") as raised:
        read_stored(cut)
    assert str(cut) in str(raised.value)
    assert load_run(cut.parent).traces == [] and "cut short" in capsys.readouterr().err


def test_a_run_json_field_of_another_type_is_left_out_and_the_run_still_reads(tmp_path, capsys):
    """A hand-edited run.json (``"environment": 7``) must not stop the leaderboard and the plots from reading
    every run: the field is left out with a note, and the hardware comes from the traces as for an old run."""
    traces = [make_trace("a", "w0", {"events": 2.0})]
    writer = RunWriter(tmp_path / "runs" / "edited")
    writer.write_run({"workloads": "sweep", "environment": {"hardware": "another GPU"}}, [], traces)
    meta = json.loads((writer.run_dir / "run.json").read_text())
    (writer.run_dir / "run.json").write_text(json.dumps({**meta, "environment": 7, "started": 3}))
    run = load_run(writer.run_dir)
    assert "environment" not in run.meta and "started" not in run.meta and run.hardware == traces[0].evaluation.environment.hardware
    err = capsys.readouterr().err
    assert "field 'environment' is of type int, not dict; ignored" in err and "field 'started'" in err
    assert run_dirs(tmp_path) == [writer.run_dir]  # the manifest is still the writer's
