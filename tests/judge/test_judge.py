"""The judge's own checks, piece by piece, on synthetic input (no worker process):
figure rejection, the channel's validation, solution-folder validation, file
guards and process-tree cleanup. tests/judge/test_attacks.py runs the whole judge."""

import os
import struct
import subprocess
import sys
import time
from multiprocessing.connection import Pipe
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.facts import DEFAULT_TOLERANCE, Rules
from harness.judge import protocol as msg
from harness.judge.check import Status
from harness.judge import vault as vault_module
from harness.judge.vault import FileVault
from harness.judge.isolation import (PR_GET_DUMPABLE, become_subreaper,
                                     descendants, kill_tree, protect_memory)
from harness.judge.figures import Rejected
from harness.judge.session import VariantJudge
from harness.judge.solutions import SolutionLoadError, load_meta
from harness.judge.timing import SYNC_ITERS, TimingConfig
from harness.records.trace import Environment, FloorMeasurement, TierFigure

GOOD_TOML = """[solution]
name = "{name}"
definition = "gdn_decode_qk4_v8_d128_k_last"
language = "python"
entry = "{entry}"
"""


def make_judge(floor_us=None, trials=3, min_iters=1):
    """A VariantJudge with just what tier_result needs: config, a floor for workload 'w'."""
    floors = {}
    if floor_us is not None:
        floors[("w", "float32")] = [FloorMeasurement(
            workload="w", batch_size=1, nbytes=8, tiers={"cupti": TierFigure(tier="cupti", available=True,
                                                                            value_us=floor_us, min_us=floor_us)},
            environment=Environment(hardware="test"), timestamp="2026-11-23T00:00:00+00:00")]
    config = SimpleNamespace(timing=TimingConfig(trials=trials, min_iters=min_iters), trials=3,
                             tolerance=DEFAULT_TOLERANCE)
    judge = VariantJudge.__new__(VariantJudge)
    judge.ctx = SimpleNamespace(floors=floors, config=config)
    judge.variant = SimpleNamespace(state_dtype="float32")
    judge.bytes_moved = lambda workload: 1000
    judge.rules, judge.inputs_modified = Rules.DEFAULT, []
    return judge


WORKLOAD = SimpleNamespace(uuid="w")


def end(samples, tier="cupti"):
    return msg.TierEnd(tier=tier, available=True, samples_us=samples)


def test_an_honest_figure_is_kept_with_its_wall_clock_and_verified_calls():
    figure = make_judge(floor_us=2.0).tier_result(WORKLOAD, "cupti", end([2.5, 2.4, 2.6]), 3, 1, wall_s=0.01)
    assert figure.available and figure.value_us == pytest.approx(2.5)
    assert figure.wall_s == 0.01 and figure.verified_calls == 1 and figure.achieved_gb_per_s > 0
    reported = end([2.5, 2.4, 2.6]).model_copy(update={"host_call_us": 31.5})
    events = make_judge(floor_us=2.0).tier_result(WORKLOAD, "events", reported, 3, 1, wall_s=0.01)
    assert events.host_call_us == 31.5  # the worker's diagnostic is kept beside the figure, never as it


@pytest.mark.parametrize("reported, kept", [(6.5, 6.5), (0.0, 0.0), (-1.0, None), (float("nan"), None),
                                            (float("inf"), None), (None, None)])
def test_the_workers_host_diagnostics_are_kept_only_where_they_could_be_true(reported, kept):
    message = end([2.5, 2.4, 2.6], "events").model_copy(update={"host_call_us": reported, "host_probe_us": reported})
    figure = make_judge(floor_us=2.0).tier_result(WORKLOAD, "events", message, 3, 1, wall_s=0.01)
    assert (figure.host_call_us, figure.host_probe_us) == (kept, kept) and figure.value_us == pytest.approx(2.5)


@pytest.mark.parametrize("samples, calls, wall_s, words", [
    ([1.0, 1.1, 1.2], 3, 0.01, "physical limit"),           # below 0.75 x the 2 µs floor
    ([1.75, 1.75, 1.75], 3, 0.01, "physical limit"),        # below 0.90 x the 2 µs CUPTI floor
    ([2.5, 2.5], 3, 0.01, "samples"),                         # fewer samples than calls the judge saw
    ([2.5, 2.5, 2.5, 2.5], 3, 0.01, "samples"),               # more
    ([2.5, float("nan"), 2.5], 3, 0.01, "non-finite"),
    ([2.5, -1.0, 2.5], 3, 0.01, "non-positive"),
    ([5000.0, 5000.0, 5000.0], 3, 0.01, "wall clock"),        # 15 ms of samples in a 10 ms tier
])
def test_impossible_figures_are_rejected(samples, calls, wall_s, words):
    with pytest.raises(Rejected) as caught:
        make_judge(floor_us=2.0).tier_result(WORKLOAD, "cupti", end(samples), calls, 0, wall_s)
    assert caught.value.status == Status.RUNTIME_ERROR and words in caught.value.log


def test_a_figure_just_above_the_cupti_floors_margin_is_kept_and_a_wall_clock_floor_keeps_the_old_margin():
    assert make_judge(floor_us=2.0).tier_result(WORKLOAD, "cupti", end([1.85] * 3), 3, 0, 0.01).available
    judge = make_judge(floor_us=2.0)
    floor = judge.ctx.floors[("w", "float32")][0]
    floor.tiers = {"wallclock": floor.tiers["cupti"].model_copy(update={"tier": "wallclock"})}
    assert judge.tier_result(WORKLOAD, "wallclock", end([1.55] * 3, "wallclock"), 3, 0, 0.01).available


def test_a_tier_with_fewer_calls_than_min_iters_is_rejected():
    """The call the judge must verify is drawn among the first min_iters: a tier that stops before
    them could dodge it, and no honest tier stops there (the stop rule waits for 20 calls)."""
    with pytest.raises(Rejected, match="fewer than the 5"):
        make_judge(floor_us=2.0, min_iters=5).tier_result(WORKLOAD, "cupti", end([2.5] * 4), 4, 0, wall_s=0.01)
    assert make_judge(floor_us=2.0, min_iters=5).tier_result(WORKLOAD, "cupti", end([2.5] * 5), 5, 0, 0.01).available


def test_the_judge_records_why_a_tier_stopped_from_the_samples_it_received():
    judge = make_judge(floor_us=2.0)
    judge.ctx.config.timing = TimingConfig(iters=100, min_iters=1)
    steady = judge.tier_result(WORKLOAD, "cupti", end([2.5] * 20), 20, 0, wall_s=0.01)
    assert (steady.stop, steady.noise) == ("stable", 0.0)
    spread = [2.5 + 0.1 * (i % 7) for i in range(30)]  # a median known to about ±3%: not stable
    cut = judge.tier_result(WORKLOAD, "events", end(spread, "events"), 30, 0, wall_s=0.01)
    assert cut.stop == "budget" and cut.noise > judge.ctx.config.timing.max_noise
    full = judge.tier_result(WORKLOAD, "cupti", end([2.5] * 100), 100, 0, wall_s=0.01)
    assert full.stop == "iters"
    trials = judge.ctx.config.timing.trials  # the sync tier reports one call a trial
    sync = judge.tier_result(WORKLOAD, "sync", end([2.5] * trials * SYNC_ITERS, "sync"), trials, 0, wall_s=0.01)
    assert sync.stop is None and sync.noise is None  # fixed counts: the contest's timer


def test_sync_figure_is_the_mean_of_trial_means_computed_by_the_judge():
    judge = make_judge(trials=2)
    skewed = [1.0] * (SYNC_ITERS - 1) + [1.0 + SYNC_ITERS]  # mean 2.0, median 1.0
    figure = judge.tier_result(WORKLOAD, "sync", end(skewed + [10.0] * SYNC_ITERS, "sync"), 2, 0, 1.0)
    assert figure.value_us == pytest.approx((2.0 + 10.0) / 2) and figure.trials == 2
    with pytest.raises(Rejected, match="sync tier reported"):  # samples that are no whole trials
        judge.tier_result(WORKLOAD, "sync", end(skewed + [10.0] * SYNC_ITERS + [1.0], "sync"), 2, 0, 1.0)


def test_an_event_pair_shorter_than_the_kernels_it_brackets_is_rejected():
    judge = make_judge()
    figures = {"cupti": TierFigure(tier="cupti", available=True, value_us=100.0),
               "events": TierFigure(tier="events", available=True, value_us=5.0)}
    with pytest.raises(Rejected, match="another stream"):
        judge.check_brackets(figures)
    figures["events"] = TierFigure(tier="events", available=True, value_us=95.0)
    judge.check_brackets(figures)  # within the slack: kept


# ---------------------------------------------------------------- the channel


def channel_pair(area_bytes=4096):
    a_read, b_write = Pipe(duplex=False)
    b_read, a_write = Pipe(duplex=False)
    to_worker, from_worker = msg.PayloadArea.create(area_bytes, "t"), msg.PayloadArea.create(area_bytes, "f")
    parent = msg.Channel.parent_side(a_read, a_write, to_worker, from_worker)
    worker = msg.Channel(b_read, b_write, msg._TO_WORKER, msg.PayloadArea(from_worker.fd),
                         msg.PayloadArea(to_worker.fd))
    return parent, worker


@pytest.mark.parametrize("frame", [
    b"not json", b'{"kind": "ready", "extra": 1}', b'{"kind": "result", "status": "PASSED"}',
    b'{"kind": "called", "index": "many"}', b"[]",
])
def test_malformed_frames_are_protocol_errors(frame):
    parent, worker = channel_pair()
    worker.writer.send_bytes(frame)
    with pytest.raises(msg.ProtocolError):
        parent.recv(msg.Ready, msg.Called)


def test_an_out_of_turn_message_is_a_protocol_error():
    parent, worker = channel_pair()
    worker.send(msg.Ready())
    with pytest.raises(msg.ProtocolError, match="expected"):
        parent.recv(msg.Checked)


def test_payloads_must_be_the_size_and_layout_announced():
    parent, worker = channel_pair()
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    header = msg.tensor_header("new_state", tensor)
    worker.send(msg.Ready())
    worker.send_tensor(tensor)
    worker.send_tensor(tensor * 2)  # the second payload of a frame goes after the first
    parent.recv(msg.Ready)
    assert torch.equal(parent.recv_tensor(header, (2, 3), "float32"), tensor)
    assert torch.equal(parent.recv_tensor(header, (2, 3), "float32"), tensor * 2)
    worker.send_tensor(tensor)
    with pytest.raises(msg.ProtocolError, match="announced"):
        parent.recv_tensor(header, (3, 2), "float32")  # the judge expected another shape
    parent, worker = channel_pair()  # after a protocol error the judge talks to that worker no more
    worker.writer.send_bytes(b"\0" * 8)
    with pytest.raises(msg.ProtocolError, match="payload frame"):
        parent.recv_tensor(header, (2, 3), "float32")


@pytest.mark.parametrize("offset, nbytes, match", [
    (0, 12, "announced"), (4096 - 8, 24, "outside"), (1 << 62, 24, "outside"), (4, 24, "outside")])
def test_a_payload_frame_pointing_elsewhere_is_a_protocol_error(offset, nbytes, match):
    parent, worker = channel_pair()
    worker.writer.send_bytes(struct.pack("<QQ", offset, nbytes))
    with pytest.raises(msg.ProtocolError, match=match):
        parent.recv_tensor(msg.TensorHeader(name="output", dtype="float32", shape=[2, 3]), (2, 3), "float32")


def test_a_received_payload_is_the_judges_own_copy():
    """Rewriting the shared area after the frame changes nothing the judge holds."""
    parent, worker = channel_pair()
    tensor = torch.ones(4)
    worker.send_tensor(tensor)
    got = parent.recv_tensor(msg.tensor_header("output", tensor), (4,), "float32")
    worker.send_area.view(0, msg.tensor_header("output", tensor)).fill_(7.0)
    assert torch.equal(got, torch.ones(4))


def test_a_payload_area_pins_only_where_cuda_can_and_closes_either_way():
    """Page-locking is a speed-up, never a condition: without a GPU the area is not locked, the copies
    work as before, and closing it (with or without a lock to undo) never raises."""
    parent, worker = channel_pair()
    assert parent.recv_area.pin() is torch.cuda.is_available()
    tensor = torch.arange(4.0)
    worker.send_tensor(tensor)
    assert torch.equal(parent.recv_tensor(msg.tensor_header("output", tensor), (4,), "float32"), tensor)
    parent.recv_area.close()
    parent.recv_area.close()  # a killed worker's areas may be closed twice


def test_the_worker_cannot_shrink_a_payload_area():
    """The area is sealed at its size: a truncated file under the judge's mapping would be a SIGBUS."""
    area = msg.PayloadArea.create(8192, "t")
    with pytest.raises(PermissionError):
        os.ftruncate(area.fd, 0)
    assert area.size == 8192


def test_no_pickle_crosses_the_channel():
    parent, worker = channel_pair()
    import pickle

    worker.writer.send_bytes(pickle.dumps({"kind": "ready"}))
    with pytest.raises(msg.ProtocolError):
        parent.recv(msg.Ready)


# ---------------------------------------------------------------- solution folders


def write_solution(root, folder, toml, files=("main.py",)):
    directory = root / folder
    directory.mkdir(parents=True)
    (directory / "solution.toml").write_text(toml)
    for name in files:
        (directory / name).write_text("def run(inputs):\n    return inputs\n")
    return directory


@pytest.mark.parametrize("folder, toml, field", [
    ("a", GOOD_TOML.format(name="b", entry="main.py"), "solution.name"),
    ("copy-floor", GOOD_TOML.format(name="copy-floor", entry="main.py"), "solution.name"),
    ("x" * 80, GOOD_TOML.format(name="x" * 80, entry="main.py"), "solution.name"),
    ("Upper", GOOD_TOML.format(name="Upper", entry="main.py"), "solution.name"),
    ("a", GOOD_TOML.format(name="a", entry="../b/main.py"), "solution.entry"),
    ("a", GOOD_TOML.format(name="a", entry="/etc/passwd"), "solution.entry"),
    ("a", GOOD_TOML.format(name="a", entry="nope.py"), "solution.entry"),
    ("a", GOOD_TOML.format(name="a", entry="main.py") + "[tolerance.float32]\natol = 1e9\nrtol = 1e9\n", "tolerance"),
    ("a", GOOD_TOML.format(name="a", entry="main.py") + 'atol = 1.0\n', "solution.atol"),
    ("a", GOOD_TOML.format(name="a", entry="main.py").replace('"python"', '"cuda"'), "solution.sources"),
    ("a", GOOD_TOML.format(name="a", entry="main.py") + 'ffi_function = "gdn_decode"\n', "solution.ffi_function"),
])
def test_malformed_solution_folders_name_the_file_and_field(tmp_path, folder, toml, field):
    directory = write_solution(tmp_path, folder, toml)
    with pytest.raises(SolutionLoadError) as caught:
        load_meta(directory)
    assert str(directory / "solution.toml") in str(caught.value) and field in str(caught.value)


def test_a_package_that_cannot_even_be_looked_up_is_missing_not_a_crash(tmp_path):
    """``find_spec`` imports a dotted name's parent and refuses a relative one: such a name in
    ``packages`` makes the solution SKIPPED (missing), not a traceback that ends the run."""
    toml = GOOD_TOML.format(name="a", entry="main.py") + 'packages = ["torch", "no_such_pkg_gdn.sub", ".torch", "torch.nn"]\n'
    assert load_meta(write_solution(tmp_path, "a", toml)).missing_packages() == ["no_such_pkg_gdn.sub", ".torch"]


def test_a_good_folder_loads_as_a_package(tmp_path):
    meta = load_meta(write_solution(tmp_path, "ok-1", GOOD_TOML.format(name="ok-1", entry="main.py")))
    assert meta.package_name == "gdn_solution_ok_1" and meta.entry_module == "main"


# ---------------------------------------------------------------- files and processes


def test_the_vault_sees_edits_additions_deletions_and_links(tmp_path):
    (tmp_path / "a").write_text("1")
    (tmp_path / "b").write_text("2")
    (tmp_path / "d").write_text("4")
    vault = FileVault([tmp_path])
    assert vault.changes() == []
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").unlink()
    (tmp_path / "c").write_text("3")
    (tmp_path / "d").unlink()
    (tmp_path / "d").symlink_to(tmp_path / "c")  # a link put in a file's place
    (tmp_path / "e.py").symlink_to(tmp_path / "c")  # an added link
    assert vault.changes() == sorted(str(tmp_path / n) for n in ("a", "b", "c", "d", "e.py"))


def test_a_users_dangling_link_is_kept_as_a_link_not_seen_as_added(tmp_path):
    """A ``latest`` link to a run folder deleted since: no change while it stays, and put back as the same
    link where a worker removes it or points it elsewhere (it was once blamed as tampering and deleted)."""
    root = tmp_path / "results"
    (root / "runs").mkdir(parents=True)
    (root / "latest").symlink_to("runs/gone")
    (root / "to-runs").symlink_to("runs")  # a link to a folder inside: what it leads to is kept as itself
    vault = FileVault([root])
    assert vault.changes() == []
    (root / "latest").unlink()
    (root / "latest").symlink_to("runs/other")
    (root / "to-runs").unlink()
    assert vault.changes() == [str(root / "latest"), str(root / "to-runs")]
    vault.restore()
    assert os.readlink(root / "latest") == "runs/gone" and os.readlink(root / "to-runs") == "runs"
    assert vault.changes() == []


def test_a_dangling_link_whose_target_a_worker_makes_is_taken_out(tmp_path):
    """Through it the next run would read what the worker wrote (a link may lead outside every kept folder)."""
    root, outside = tmp_path / "results", tmp_path / "elsewhere"
    root.mkdir()
    (root / "latest").symlink_to(outside / "run")
    vault = FileVault([root])
    (outside / "run").mkdir(parents=True)  # what a worker of the same user can do
    assert vault.changes() == [str(root / "latest")]
    vault.restore()
    assert not os.path.lexists(root / "latest") and vault.changes() == []


def test_a_link_to_a_fifo_is_kept_as_a_link_never_read(tmp_path):
    """Reading through it waited forever before anything was judged (2026-11-28)."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "pipe").symlink_to(tmp_path / "pipe")
    vault = FileVault([tmp_path / "results"])  # returns: nothing reads the FIFO
    assert vault.changes() == []


def test_a_link_to_a_folder_outside_the_kept_ones_is_found(tmp_path):
    root, outside = tmp_path / "results", tmp_path / "elsewhere"
    (root / "runs").mkdir(parents=True)
    outside.mkdir()
    (root / "runs" / "mine").symlink_to(outside)
    (root / "inside").symlink_to(root / "runs")
    assert FileVault([root]).links_out() == [root / "runs" / "mine"]


def test_the_vault_puts_everything_back(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "old.jsonl").write_text("old\n")
    (tmp_path / "def.json").write_text("{}")
    vault = FileVault([tmp_path / "runs"], files=[tmp_path / "def.json"])
    (tmp_path / "runs" / "old.jsonl").write_text("old\njunk\n")
    (tmp_path / "runs" / "forged").mkdir()
    (tmp_path / "runs" / "forged" / "traces.jsonl").write_text("x")
    (tmp_path / "def.json").unlink()
    (tmp_path / "def.json").symlink_to(tmp_path / "runs" / "old.jsonl")
    assert len(vault.restore()) == 3
    assert (tmp_path / "runs" / "old.jsonl").read_text() == "old\n"
    assert not (tmp_path / "runs" / "forged").exists()  # the folder it made goes too
    assert (tmp_path / "def.json").read_text() == "{}" and not (tmp_path / "def.json").is_symlink()
    assert vault.changes() == []


def test_the_vault_keeps_aside_what_it_takes_out(tmp_path):
    """An added file, a changed file's new bytes and an added package leave the checkout as before, but into
    the set-aside folder under their absolute paths (a person's file written while a run went is not lost);
    a second worker's version of the same path goes beside the first's."""
    runs, root, aside = tmp_path / "runs", tmp_path / "root", tmp_path / "aside"
    runs.mkdir()
    root.mkdir()
    (runs / "old.jsonl").write_text("old\n")
    vault = FileVault([runs], shallow=[root], set_aside=aside)
    (runs / "old.jsonl").write_text("edited\n")
    (runs / "new").mkdir()
    (runs / "new" / "PREDICTION.md").write_text("written during the run\n")
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text("evil")
    vault.restore()
    assert (runs / "old.jsonl").read_text() == "old\n" and not (runs / "new").exists()
    assert not (root / "torch").exists()
    mirror = lambda path: aside / path.relative_to(path.anchor)  # noqa: E731
    assert mirror(runs / "old.jsonl").read_text() == "edited\n"
    assert mirror(runs / "new" / "PREDICTION.md").read_text() == "written during the run\n"
    assert mirror(root / "torch" / "__init__.py").read_text() == "evil"
    assert sorted(vault.kept_aside) == sorted(mirror(p) for p in (runs / "old.jsonl", runs / "new" / "PREDICTION.md",
                                                                   root / "torch"))
    (runs / "old.jsonl").write_text("edited again\n")
    vault.restore()
    assert (mirror(runs / "old.jsonl").parent / "old.jsonl.1").read_text() == "edited again\n"
    assert vault.changes() == []


def test_the_vault_copies_aside_across_file_systems_within_its_cap(tmp_path, monkeypatch):
    """Where a move fails (another file system) a file is copied aside while the copies stay within
    SET_ASIDE_COPY_BYTES; past that it is deleted, as without a set-aside folder."""
    def no_rename(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(vault_module.os, "rename", no_rename)
    monkeypatch.setattr(vault_module, "SET_ASIDE_COPY_BYTES", 100)
    runs, aside = tmp_path / "runs", tmp_path / "aside"
    runs.mkdir()
    vault = FileVault([runs], set_aside=aside)
    (runs / "small").write_bytes(b"s" * 60)
    (runs / "second").write_bytes(b"t" * 60)  # 120 bytes in all: over the cap
    vault.restore()
    assert not (runs / "small").exists() and not (runs / "second").exists()
    kept = [p.name for p in vault.kept_aside]
    assert len(kept) == 1 and vault.copied_bytes == 60  # the first copied, the second deleted
    assert (vault.kept_aside[0]).read_bytes() in (b"s" * 60, b"t" * 60)


def test_set_aside_folders_go_after_their_days(tmp_path):
    for stamp, age_days in (("20261101T000000Z-1", 20), ("20261120T000000Z-1", 1), ("old-notes", 20)):
        (tmp_path / stamp).mkdir()
        then = time.time() - 86400 * age_days
        os.utime(tmp_path / stamp, (then, then))
    vault_module.prune_set_aside(tmp_path, days=14)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["20261120T000000Z-1", "old-notes"]  # only run folders go


def test_a_set_aside_root_made_a_link_prunes_nothing(tmp_path):
    """A worker that points the set-aside root at the checkout (or home) must not have the next run delete
    old folders there."""
    elsewhere = tmp_path / "checkout"
    (elsewhere / "20261101T000000Z-1").mkdir(parents=True)
    then = time.time() - 86400 * 20
    os.utime(elsewhere / "20261101T000000Z-1", (then, then))
    (tmp_path / "set-aside").symlink_to(elsewhere)
    vault_module.prune_set_aside(tmp_path / "set-aside", days=14)
    assert (elsewhere / "20261101T000000Z-1").is_dir()


def test_links_in_the_set_aside_folder_do_not_steer_a_file_into_the_checkout(tmp_path):
    """The set-aside root a link into a kept folder, or a link planted where the mirrored folder will be:
    the judge moves nothing through them (the next run would read the file there); the file is taken out
    as without a set-aside folder."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (tmp_path / "aside-link").symlink_to(runs)  # the whole set-aside folder a link into the checkout
    vault = FileVault([runs], set_aside=tmp_path / "aside-link")
    (runs / "torch.py").write_text("planted")
    vault.restore()
    assert sorted(p.name for p in runs.iterdir()) == [] and vault.kept_aside == []

    aside = tmp_path / "aside"
    vault = FileVault([runs], set_aside=aside)
    mirrored = aside / runs.relative_to(runs.anchor)
    mirrored.parent.mkdir(parents=True)
    mirrored.symlink_to(runs)  # a link where the mirrored runs/ folder would be made
    (runs / "planted.py").write_text("planted")
    vault.restore()
    assert sorted(p.name for p in runs.iterdir()) == [] and vault.kept_aside == []


def test_the_vault_knows_an_unchanged_file_without_reading_it(tmp_path, monkeypatch):
    """Same stat signature (size, inode, mtime, ctime): not read again; a rewrite with the same bytes
    and the mtime set back still moves the ctime, so the bytes are compared."""
    path = tmp_path / "big"
    path.write_bytes(b"a" * 1000)
    vault = FileVault([tmp_path])
    reads = []
    monkeypatch.setattr(vault_module, "_read", lambda p: reads.append(p) or Path(p).read_bytes())
    assert vault.changes() == [] and reads == []
    before = os.stat(path)
    path.write_bytes(b"b" * 1000)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # a forger sets the mtime back
    assert vault.changes() == [str(path)] and reads == [path]


def test_a_shallow_root_keeps_its_modules_and_loses_new_importables(tmp_path):
    """The checkout's root: a new torch.py or package would shadow an import of the next run's judge;
    a log written beside the run is not the vault's."""
    (tmp_path / "run_local.py").write_text("print(1)")
    (tmp_path / "notes.log").write_text("")
    vault = FileVault(shallow=[tmp_path])
    (tmp_path / "run_local.py").write_text("evil")
    (tmp_path / "torch.py").write_text("evil")
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("evil")
    (tmp_path / "notes.log").write_text("a line the user's shell wrote")
    (tmp_path / "data").mkdir()
    assert vault.changes() == sorted(str(tmp_path / n) for n in ("numpy", "run_local.py", "torch.py"))
    vault.restore()
    assert (tmp_path / "run_local.py").read_text() == "print(1)"
    assert not (tmp_path / "torch.py").exists() and not (tmp_path / "numpy").exists()
    assert (tmp_path / "notes.log").read_text() and (tmp_path / "data").is_dir()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper and /proc are Linux")
def test_kill_tree_reaches_a_double_forked_daemon(tmp_path):
    assert become_subreaper()
    pidfile = tmp_path / "pid"
    code = (f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n        time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    proc.wait(10)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    daemon = int(pidfile.read_text())
    for _ in range(100):  # the middle process may still be exiting: its child moves to us when it is gone
        if daemon in descendants():
            break
        time.sleep(0.05)
    assert daemon in descendants()  # re-parented to us, not to init
    kill_tree(proc.pid)
    with pytest.raises(ProcessLookupError):
        os.kill(daemon, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux")
def test_the_judge_hides_its_memory_from_workers():
    import ctypes

    assert protect_memory()
    assert ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0  # no ptrace, no /proc/<pid>/mem


class ScriptedWorker:
    """Stands in for a WorkerProcess: hands the judge the scripted messages, records what it sends."""

    def __init__(self, *messages):
        self.messages, self.sent = list(messages), []

    def recv(self, deadline, *expected):
        message = self.messages.pop(0)
        assert isinstance(message, expected)
        return message

    def send(self, message, tensors=()):
        self.sent.append(message)


@pytest.mark.parametrize("script, words", [
    # one call only: a second would be sampled at random, and the list of unanswered calls with it
    ((msg.Called(index=0), end([2.5])), "without the outputs of timed calls [0]"),
    ((msg.Called(index=0), msg.Checked(outputs=[], call=1)), "outputs of timed call 1 sent, expected call 0"),
    ((msg.Called(index=0), msg.Checked(outputs=[], call=None)), "expected call 0"),
])
def test_the_outputs_of_asked_timed_calls_must_come_in_order_before_the_tier_ends(script, words):
    """Call 0 is always asked when min_iters is 1; the worker answers lazily (its destination ring)."""
    judge = make_judge(floor_us=2.0, min_iters=1)
    judge.pending, judge.verified = [], 0
    worker = ScriptedWorker(*script)
    with pytest.raises(msg.ProtocolError, match=words.replace("[", r"\[").replace("]", r"\]")):
        judge.time_tier(worker, WORKLOAD, "cupti", 0, deadline=time.monotonic() + 5)
    assert worker.sent[0] == msg.Go(proceed=True)


@pytest.mark.parametrize("ring_bytes, sets", [(1, 1), (1 << 30, 8)])
def test_the_destination_ring_answers_before_reusing_a_set_and_ships_what_was_asked(monkeypatch, ring_bytes, sets):
    from harness.data.definition import load_definition
    from harness.judge import worker as worker_module

    monkeypatch.setattr(worker_module, "RING_BYTES", ring_bytes)
    incoming = [msg.Go(proceed=i in (1, 2)) for i in range(10)]  # the judge asks for calls 1 and 2
    log = []

    def ship(dests, call):  # the judge's receipt comes after two more answers: the worker reads on
        log.append(("ship", call, float(dests["output"][0, 0, 0, 0])))
        incoming.insert(min(2, len(incoming)), msg.Received())

    def recv(*types):
        log.append(("recv", type(incoming[0]).__name__))
        return incoming.pop(0)

    channel = SimpleNamespace(send=lambda m: log.append(("send", type(m).__name__, getattr(m, "index", None))),
                              recv=recv)
    definition = load_definition(Path(__file__).resolve().parents[2] / "workloads" / "gdn_decode_qk4_v8_d128_k_last.json")
    fake = SimpleNamespace(channel=channel, definition=definition, job=SimpleNamespace(state_dtype="float32"),
                           device="cpu", send_outputs=ship)
    ring = worker_module.DestinationRing(fake, definition.resolve_axes({"batch_size": 1}, "test"))
    assert ring.size == sets
    for index in range(10):
        handed = ring.poisoned(index)
        assert torch.isnan(handed["output"]).all()  # poisoned before every timed call
        handed["output"].fill_(index)
        ring.called(index)
    ring.drain()
    assert not ring.outstanding and not ring.unreceipted and not incoming
    ships = [i for i, e in enumerate(log) if e[0] == "ship"]
    assert [log[i] for i in ships] == [("ship", 1, 1.0), ("ship", 2, 2.0)]  # each call's own bytes
    assert ("recv", "Received") in log[ships[0]:ships[1]]  # the area is rewritten only after the receipt
    if sets == 1:  # no ring: each answer is read before the next call's set is poisoned
        assert log[:4] == [("send", "Called", 0), ("recv", "Go"), ("send", "Called", 1), ("recv", "Go")]
