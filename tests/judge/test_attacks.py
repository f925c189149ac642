"""A run survives every attack class: each fixture under tests/fixtures/attacks/
gets the status the untrusted-solution judge owes it, and the run goes on.

All fixtures run in ONE ``run_benchmark`` call (``algo="all"``) on a tiny
two-workload dataset: ``w-b1-stored`` (batch 1; state, A_log and dt_bias from
a safetensors blob) and ``w-b2-random`` (batch 2, all random, scale 0).
tests/fixtures/attacks/README.md lists what each fixture attacks and which
guarantee of the judge defeats it.

:data:`EXPECTED` and :func:`check_expectation` need nothing but the standard
library, so a GPU run of tests/fixtures/attacks_gpu/ (or of this folder) can
reuse them::

    sys.path.insert(0, "tests/judge"); from test_attacks import EXPECTED_GPU, check_expectation
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent.parent  # tests/
REPO = HERE.parent
ATTACKS = HERE / "fixtures" / "attacks"
ATTACKS_GPU = HERE / "fixtures" / "attacks_gpu"
LONG_NAME = "l" * 250

#: The set runs alone, before the rest (README, "Tests"): its fixtures spoil files of the checkout while the judge
#: runs them, and the judge's vault reads any file a test beside it writes there (a planted module, a first import's
#: .pyc) as tampering. Under pytest-xdist it would share the checkout with other tests, and with itself in a second
#: worker: 30 false failures on an H200 (results/judge-check/20261128-H200-v1-all-main).
if os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.skip("the attack set runs alone, not under pytest-xdist: python -m pytest -q tests/judge/test_attacks.py",
                allow_module_level=True)

PASSED, NUMERICAL, RUNTIME, COMPILE, TIMEOUT = (
    "PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT")
#: Statuses of a trace that failed for a reason the log must explain.
ERROR_STATUSES = {RUNTIME, COMPILE, TIMEOUT}

#: fixture -> (statuses, log substrings).
#:
#: ``statuses``: a set of statuses every workload's trace may have, or a tuple
#: of such sets, one per workload in dataset order (the last one applies to any
#: further workloads); None means any status.
#: ``log substrings``: each must occur (case-insensitively) in the log of at
#: least one of the fixture's traces with a status in ERROR_STATUSES, when it
#: has any; an entry that is a tuple is satisfied by any one of its strings.
EXPECTED: dict[str, tuple] = {
    "honest": ({PASSED}, ()),
    "zz-honest-last": ({PASSED}, ()),
    "cache-by-pointer": ({NUMERICAL}, ()),
    "skip-after-checks": ({NUMERICAL}, ()),
    "skip-then-crash": ({NUMERICAL}, ()),
    "patch-timer": ({PASSED}, ()),  # its patched clocks are not the core's: an honest figure (see below)
    "patch-checker": ({NUMERICAL}, ()),
    "patch-torch": ({NUMERICAL}, ()),
    "gc-steal": ({NUMERICAL}, ()),
    "own-tolerance": ({COMPILE}, ("solution.toml", "tolerance")),
    "set-rebind": ({RUNTIME}, ("destination",)),
    "restrided-view": ({RUNTIME, NUMERICAL}, ("destination",)),
    "returns-new-tensor": ({NUMERICAL}, ()),  # DPS: the destinations are read, what run returns is not
    "positional-differs": ({NUMERICAL}, ()),  # judged through the positional entry pack ships
    # the run's rules are the default, the contest's: accepted and recorded (test below); under
    # --rules strict it is RUNTIME_ERROR "was modified by run" (tests/judge/test_contest_entries.py)
    "modifies-inputs": ({PASSED}, ()),
    "forge-events": ({RUNTIME}, ("protocol",)),
    "duplicate-frame": ({RUNTIME}, ("protocol",)),
    "garbage-stream": ({RUNTIME}, ()),
    "tamper-blob": ({RUNTIME}, ("tamper",)),
    "tamper-harness": ({RUNTIME}, ("tamper",)),
    "tamper-results": ({RUNTIME}, ("tamper",)),
    "foresee-inputs": ({NUMERICAL}, ()),  # its correctness trials pass: caught while timed (test below)
    "setup-window": ({NUMERICAL}, ()),
    "compute-when-asked": ({NUMERICAL}, ()),
    "forge-result": ({RUNTIME}, ("did not sign",)),
    "rewrite-capture": ({RUNTIME}, ("changed after the timing core signed",)),
    "replay-command": ({RUNTIME}, ("out of turn",)),
    "tamper-definition": ({RUNTIME}, ("tamper", "definitions")),
    "forge-run": ({RUNTIME}, ("tamper", "leaderboard.csv")),
    "plant-module": ({RUNTIME}, ("tamper", "gdn_attack_planted.py")),
    "double-fork": (None, ()),
    "hang": (({TIMEOUT}, {TIMEOUT, RUNTIME}), ()),
    "stall-reader": ({TIMEOUT, RUNTIME}, ()),   # and the judge must not block on it: see _stuck_on
    "partial-frame": ({TIMEOUT, RUNTIME}, ()),
    "crash": ({RUNTIME}, ()),
    "stdout-spam": ({PASSED}, ()),
    "bad-toml": ({COMPILE}, ("solution.toml",)),
    "missing-entry": ({COMPILE}, ("solution.toml", "entry")),
    "name-mismatch": ({COMPILE}, ("solution.toml", "name")),
    "entry-outside": ({COMPILE}, ("solution.toml", "entry")),
    LONG_NAME: ({COMPILE}, ("solution.toml", "name")),
    "copy-floor": ({COMPILE}, ("solution.toml", "name")),
}

#: Where a fixture of tests/fixtures/attacks owes another status when judged with the GPU tiers
#: (scripts/gpu_attacks.py): skip-then-crash's 20th call comes during the clock warm-up of the
#: first GPU tier, before any timed call, so nothing sampled precedes its failure. patch-timer's
#: fake torch.cuda.Event.elapsed_time reaches the sync tier, flashinfer-bench's loop in its own
#: process: a figure under CUPTI's and the copy floor, rejected (PASSED only where flashinfer-bench
#: is missing and the sync tier is unavailable).
EXPECTED_ON_GPU = {**EXPECTED, "skip-then-crash": ({RUNTIME, NUMERICAL}, ()),
                   "patch-timer": ({RUNTIME, PASSED}, ("timing rejected",))}

#: The same for tests/fixtures/attacks_gpu/ (a run on a GPU, workloads as here:
#: the batch-1 workload first).
EXPECTED_GPU: dict[str, tuple] = {
    "honest": ({PASSED}, ()),
    "zz-honest-last": ({PASSED}, ()),
    "side-stream": ({RUNTIME, NUMERICAL}, ()),
    "device-assert": (({RUNTIME}, {PASSED}), ()),
    # counted whole by the core's CUPTI (test_work_hidden_from_cupti_is_counted_or_rejected)
    "hide-from-cupti": ({PASSED}, ()),
    # CUPTI's kernel records switched off: the GPU's time after run() returned exceeds what CUPTI saw
    # (PASSED only where cupti-python is missing and it times honestly)
    "cupti-off": ({RUNTIME, PASSED}, ()),
    # honest, its first sync order of each workload cut by an estimate hiccup yet fast: ordered again, kept in
    # full (figure_problems: retimed_calls > 0)
    "estimate-hiccup": ({PASSED}, ()),
}


def figure_problems(name: str, traces: list) -> list[str]:
    """What is wrong with the figures of fixture ``name``'s passing traces (typed or dict), where the
    fixture expects more of them than a status: estimate-hiccup's sync figure must be the second
    order's, in full, with the first order's calls counted in ``retimed_calls``
    (``harness.judge.session.CUT_RETIMES``). [] when all is as expected."""
    if name != "estimate-hiccup":
        return []
    from harness.judge.timing.settings import SYNC_ITERS

    problems, label = [], label_in(name, traces)
    for trace in traces:
        if _field(trace, "solution") != label or _status(trace) != PASSED:
            continue
        sync = _field(_field(trace, "evaluation", "performance"), "tiers")["sync"]
        retimed, iters = _field(sync, "retimed_calls"), _field(sync, "iters")
        full = (_field(sync, "trials") or 0) * SYNC_ITERS
        if not retimed or iters != full:
            problems.append(f"{name} on {_field(trace, 'workload', 'uuid')}: sync retimed_calls {retimed}, "
                            f"{iters} calls, expected > 0 and {full} (the second order in full)")
    return problems


def _field(trace, *path):
    """``trace.a.b`` for a typed Trace, ``trace["a"]["b"]`` for a dict."""
    for key in path:
        trace = trace[key] if isinstance(trace, dict) else getattr(trace, key)
    return trace


def _status(trace) -> str:
    status = _field(trace, "evaluation", "status")
    return getattr(status, "value", status)


def label_in(name: str, traces: list) -> str:
    """The label the traces give fixture ``name``: the name itself, or (for a
    folder name too long to be a solution name) the judge's truncation of it."""
    labels = {_field(t, "solution") for t in traces}
    if name in labels:
        return name
    truncated = sorted((lab for lab in labels if len(lab) >= 32 and name.startswith(lab)), key=len)
    return truncated[-1] if truncated else name


def check_expectation(name: str, traces: list, uuids: list[str], expected: dict = EXPECTED) -> list[str]:
    """What is wrong with fixture ``name``'s traces (typed or dict) against
    ``expected[name]``, as readable lines; [] when all is as expected.

    ``uuids``: the dataset's workloads in order (per-workload expectations)."""
    statuses, substrings = expected[name]
    label = label_in(name, traces)
    mine = {_field(t, "workload", "uuid"): t for t in traces if _field(t, "solution") == label}
    problems = []
    missing = [u for u in uuids if u not in mine]
    if missing:
        problems.append(f"{name}: no trace for workloads {missing}")
    for index, uuid in enumerate(uuids):
        if uuid not in mine or statuses is None:
            continue
        allowed = statuses if isinstance(statuses, set) else statuses[min(index, len(statuses) - 1)]
        got = _status(mine[uuid])
        if got not in allowed:
            log = _field(mine[uuid], "evaluation", "log") or ""
            problems.append(f"{name} on {uuid}: {got}, expected one of {sorted(allowed)}; log: {log[-600:]!r}")
    errors = [t for t in mine.values() if _status(t) in ERROR_STATUSES]
    logs = [(_field(t, "evaluation", "log") or "").lower() for t in errors]
    for want in substrings:
        options = (want,) if isinstance(want, str) else want
        if errors and not any(o.lower() in log for log in logs for o in options):
            problems.append(f"{name}: no {'/'.join(options)!r} in the log of its failed traces; "
                            f"logs: {[log[-600:] for log in logs]}")
    return problems


# ---------------------------------------------------------------------------- the run

HAVE_WORKER = importlib.util.find_spec("harness.judge.worker") is not None
pytestmark = pytest.mark.skipif(not HAVE_WORKER, reason="harness.judge.worker does not exist yet: "
                                "the attack fixtures need the untrusted-solution judge")

WORKLOADS = ("w-b1-stored", "w-b2-random")
OLD_RUN_FILES = {"runs/old-run/traces.jsonl": '{"solution": "earlier", "note": "must survive"}\n',
                 "runs/old-run/summary.csv": "solution,status\nearlier,PASSED\n"}
ATTACK_ENV_FILE = Path(f"/tmp/gdn-attack-env-{os.getuid()}.json")
TAMPER_LINE = b"# tampered\n"


def write_attack_dataset(root: Path) -> Path:
    """A flashinfer-bench dataset folder with the two workloads of :data:`WORKLOADS`."""
    import torch
    from safetensors.torch import save_file

    definition = json.loads((REPO / "workloads" / "gdn_decode_qk4_v8_d128_k_last.json").read_text())
    op_type, name = definition["op_type"], definition["name"]
    (root / "definitions" / op_type).mkdir(parents=True)
    (root / "workloads" / op_type).mkdir(parents=True)
    (root / "blob" / op_type).mkdir(parents=True)
    (root / "definitions" / op_type / f"{name}.json").write_text(json.dumps(definition, indent=2))
    gen = torch.Generator().manual_seed(20260101)
    blob = f"blob/{op_type}/{WORKLOADS[0]}.safetensors"
    save_file({"state": torch.randn(1, 8, 128, 128, generator=gen) * 0.1,
               "A_log": torch.log(1 + 15 * torch.rand(8, generator=gen)),
               "dt_bias": torch.randn(8, generator=gen) * 0.5}, str(root / blob))
    from support.definition import tensor_input_names  # here: importing this module needs the stdlib only

    random = {"type": "random"}
    stored = {n: {"type": "safetensors", "path": blob, "tensor_key": n} for n in ("state", "A_log", "dt_bias")}
    lines = [
        {"uuid": WORKLOADS[0], "axes": {"batch_size": 1},
         "inputs": {"q": random, "k": random, "v": random, "a": random, "b": random, **stored,
                    "scale": {"type": "scalar", "value": 0.0883883476}}},
        {"uuid": WORKLOADS[1], "axes": {"batch_size": 2},
         "inputs": {**{n: random for n in tensor_input_names()},
                    "scale": {"type": "scalar", "value": 0.0}}},
    ]
    (root / "workloads" / op_type / f"{name}.jsonl").write_text("".join(json.dumps(w) + "\n" for w in lines))
    return root


#: Seconds each workload may take: the three fixtures that never finish one (hang,
#: partial-frame, stall-reader) cost twice this (a fresh worker for the second
#: workload), half of the attack set's time at 4 s, while the slowest one that finishes
#: takes about 0.7 s on two idle cores (stdout-spam; its wall clock tier is cut at
#: budget_s) and up to 1.8 s (patch-timer) with another process busy on them: 4x and
#: 1.7x margin. The set runs alone in CI (README's test command), on idle cores.
#: (foresee-inputs precomputes in its first trial: at 120 calls a tier it timed out with two
#: busy processes beside the set, at 40 it passes so; its FORESEEN_CALLS, 2026-11-28.)
WORKLOAD_S = 3

#: Seconds the run may go without producing a trace. A judge that keeps its
#: deadlines (startup_s 120 is only an upper bound: a worker starts in seconds
#: here; WORKLOAD_S) always makes a trace sooner. When it does not, it is
#: blocked for good (writing into a pipe nobody reads, reading a frame that
#: never completes): the watchdog (SIGALRM) then kills the worker it is stuck
#: on, so that the run goes on, and records it; test_the_run_was_not_stuck fails.
WATCHDOG_S = 90


class JudgeStuck(Exception):
    pass


def _worker_pids() -> dict[int, str]:
    """This process's descendants that are judge workers -> the private folder they run in."""
    found, todo = {}, [os.getpid()]
    while todo:
        pid = todo.pop()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                todo.append(child)
                try:  # started as python -m harness.judge.worker, or forked by the zygote into its work folder
                    cwd = os.readlink(f"/proc/{child}/cwd")
                    if (b"harness.judge.worker" in Path(f"/proc/{child}/cmdline").read_bytes()
                            or ("/gdn-judge-" in cwd and cwd.endswith("/work"))):
                        found[child] = cwd
                except OSError:
                    pass
    return found


class Watchdog:
    """SIGALRM after WATCHDOG_S without a trace: kill the stuck worker(s) and note it."""

    def __init__(self):
        self.events: list[str] = []

    def __call__(self, signum, frame):
        workers = _worker_pids()
        if not workers:
            raise JudgeStuck(f"run_benchmark produced no trace for {WATCHDOG_S} s and runs no worker")
        for pid, where in workers.items():
            self.events.append(f"no trace for {WATCHDOG_S} s: the test killed the judge's worker {pid} "
                               f"(running in {where}); the judge was blocked on it without a deadline")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        signal.alarm(WATCHDOG_S)


def _untamper(path: Path) -> None:
    """Remove the lines tamper-harness appended, keeping any other (concurrent) edit of the file."""
    data = path.read_bytes()
    stripped = data
    while stripped.endswith(TAMPER_LINE):
        stripped = stripped[: -len(TAMPER_LINE)]
    if stripped != data:
        path.write_bytes(stripped)


HARNESS_FILE = REPO / "harness" / "judge" / "check.py"
FORGED_RUN_DIR = REPO / "results" / "runs" / "20991231T000000Z_NVIDIA-H100-80GB-HBM3-contest-v1"


def attack_environment(dataset: Path, results: Path, root: Path) -> dict[str, str]:
    """What the fixtures read through attack_env.py: the dataset, the results folder, the daemon's
    pid file, the harness file and the checkout they attack, tamper-definition's marker."""
    return {"GDN_ATTACK_DATASET": str(dataset), "GDN_ATTACK_RESULTS": str(results),
            "GDN_ATTACK_PIDFILE": str(root / "daemon.pids"), "GDN_ATTACK_HARNESS_FILE": str(HARNESS_FILE),
            "GDN_ATTACK_REPO": str(REPO), "GDN_ATTACK_MARKER": str(root / "reference-ran")}


def files_attacked(dataset: Path) -> dict[Path, bytes]:
    """The bytes of the files tamper-definition and forge-run change outside the test's folder."""
    definition_file = next((dataset / "definitions").rglob("*.json"))
    return {path: path.read_bytes() for path in (definition_file, REPO / "results" / "leaderboard.csv")}
PLANTED_MODULE = REPO / "gdn_attack_planted.py"


def _undo_checkout_attacks(saved: dict[Path, bytes]) -> None:
    """Put back what forge-run, plant-module and tamper-definition change outside the test's folder."""
    for path, data in saved.items():
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
    shutil.rmtree(FORGED_RUN_DIR, ignore_errors=True)
    PLANTED_MODULE.unlink(missing_ok=True)


def _api():
    from harness.judge.run import RunConfig, run_benchmark
    from harness.judge.isolation import Timeouts
    from harness.judge.timing import TimingConfig

    return RunConfig, run_benchmark, Timeouts, TimingConfig


@pytest.fixture(scope="module")
def attack_run(tmp_path_factory):
    RunConfig, run_benchmark, Timeouts, TimingConfig = _api()
    root = tmp_path_factory.mktemp("attacks")
    dataset = write_attack_dataset(root / "dataset")
    blobs = {p: p.read_bytes() for p in dataset.rglob("*.safetensors")}
    results = root / "results"
    long_ago = time.time() - 86400
    for relative, text in OLD_RUN_FILES.items():
        (results / relative).parent.mkdir(parents=True, exist_ok=True)
        (results / relative).write_text(text)
        os.utime(results / relative, (long_ago, long_ago))
    harness_file = HARNESS_FILE
    env = attack_environment(dataset, results, root)
    checkout = files_attacked(dataset)
    saved_env = {k: os.environ.get(k) for k in env}
    config = RunConfig(device="cpu", tiers=("wallclock",), trials=2,
                       timing=TimingConfig(warmup=2, iters=20, budget_s=0.5, warm_s=0.0))
    os.environ.update(env)
    ATTACK_ENV_FILE.write_text(json.dumps(env))
    started = time.monotonic()
    watchdog = Watchdog()
    stuck = None

    previous = signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(WATCHDOG_S)
    try:
        result = run_benchmark("all", str(dataset), config, results, solutions_root=ATTACKS, progress=False,
                               timeouts=Timeouts(startup_s=120, workload_s=WORKLOAD_S, total_s=300),
                               on_trace=lambda trace: signal.alarm(WATCHDOG_S))
    except JudgeStuck as exc:
        stuck = str(exc)
        result = _partial_result(results)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        _untamper(harness_file)
        restored = {path: path.read_bytes() if path.is_file() else None for path in checkout}
        restored["left behind"] = [p for p in (PLANTED_MODULE, FORGED_RUN_DIR) if p.exists()]
        _undo_checkout_attacks(checkout)  # the judge should have; the test must not leave them either way
        ATTACK_ENV_FILE.unlink(missing_ok=True)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return SimpleNamespace(run_dir=Path(result.run_dir), traces=list(result.traces),
                           floors=list(getattr(result, "floors", []) or []), elapsed_s=time.monotonic() - started,
                           dataset=dataset, results=results, root=root, original_blobs=blobs,
                           original_checkout=checkout, restored_checkout=restored,
                           stuck="; ".join(watchdog.events + ([stuck] if stuck else [])) or None)


def _partial_result(results: Path) -> SimpleNamespace:
    """What a stuck run left on disk: its run folder and the traces it wrote."""
    from harness.records.trace import Trace

    run_dirs = [d for d in (results / "runs").iterdir() if d.name != "old-run"]
    run_dir = max(run_dirs, key=lambda d: d.stat().st_mtime)
    lines = (run_dir / "traces.jsonl").read_text().splitlines() if (run_dir / "traces.jsonl").exists() else []
    traces = []
    for line in lines:
        try:
            traces.append(Trace.model_validate_json(line))
        except ValueError:
            continue
    return SimpleNamespace(run_dir=run_dir, traces=traces, floors=[])


def _fixture_names() -> list[str]:
    return sorted(p.parent.name for p in ATTACKS.glob("*/solution.toml"))


def test_every_fixture_has_an_expectation():
    assert _fixture_names() == sorted(EXPECTED)
    assert sorted(p.parent.name for p in ATTACKS_GPU.glob("*/solution.toml")) == sorted(EXPECTED_GPU)


@pytest.mark.parametrize("name", sorted(EXPECTED, key=lambda n: (n == LONG_NAME, n)),
                         ids=lambda n: "l*250" if n == LONG_NAME else n)
def test_attack(attack_run, name):
    problems = _stuck_on(name, attack_run.stuck) + check_expectation(name, attack_run.traces, list(WORKLOADS))
    if problems and attack_run.stuck:
        problems.append(f"(the run was stuck: {attack_run.stuck})")
    assert not problems, "\n".join(problems)


def _stuck_on(name: str, stuck: str | None) -> list[str]:
    """A problem when the watchdog had to kill this fixture's worker (its private
    folder is named after the package ``gdn_solution_<name>``)."""
    slug = "gdn_solution_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if stuck and f"/{slug}-" in stuck:
        return [f"{name}: the judge blocked on this solution's worker without a deadline (the test's watchdog "
                "killed it)"]
    return []


def test_the_run_was_not_stuck(attack_run):
    assert attack_run.stuck is None, attack_run.stuck


def test_honest_solutions_pass_everywhere_with_a_figure(attack_run):
    for name in ("honest", "zz-honest-last", "stdout-spam"):
        traces = [t for t in attack_run.traces if _field(t, "solution") == name]
        assert [_status(t) for t in traces] == [PASSED] * len(WORKLOADS), name
        for trace in traces:
            perf = _field(trace, "evaluation", "performance")
            figure = _field(perf, "tiers")["wallclock"]
            assert _field(figure, "available") and _field(figure, "value_us") > 0


def test_no_attack_passes_with_a_figure(attack_run):
    honest = {"honest", "zz-honest-last", "stdout-spam", "double-fork", "patch-timer",
              "modifies-inputs"}  # allowed by the contest's rules, the run's: every call has inputs of its own
    cheats = [(_field(t, "solution"), _field(t, "workload", "uuid")) for t in attack_run.traces
              if _status(t) == PASSED and _field(t, "solution") not in honest]
    assert not cheats


@pytest.mark.parametrize("name", ["foresee-inputs", "setup-window", "compute-when-asked", "rewrite-capture"])
def test_the_timed_call_attacks_pass_their_correctness_trials_and_are_caught_while_timed(attack_run, name):
    """They attack the timed calls (work foreseen, done in an untimed window, only when asked,
    shown afterwards): an honest trial first shows the attack ran as meant, a timed call fails."""
    logs = [_field(t, "evaluation", "log") or "" for t in attack_run.traces if _field(t, "solution") == name]
    assert logs and all("timed call" in log and "trial" not in log.split("timed call")[0] for log in logs), logs


def test_a_solution_that_modifies_its_inputs_is_recorded_under_the_contest_rules(attack_run):
    """The default rules accept a call that changes its inputs, as the contest did, and say so
    in the trace; every later call still got inputs of its own (it passes every timed call)."""
    traces = [t for t in attack_run.traces if _field(t, "solution") == "modifies-inputs"]
    assert traces and all(_status(t) == PASSED for t in traces)
    for trace in traces:
        extra = _field(trace, "evaluation", "correctness", "extra")
        assert (_field(extra, "rules"), _field(extra, "inputs_modified")) == ("contest", ["q"])
        assert _field(extra, "timed_calls_verified") > 0


def _figure(traces, name: str, uuid: str, tier: str = "wallclock") -> float:
    trace = next(t for t in traces if _field(t, "solution") == name and _field(t, "workload", "uuid") == uuid)
    return _field(_field(_field(trace, "evaluation", "performance"), "tiers")[tier], "value_us")


def test_a_solution_that_patches_every_clock_gets_its_true_figure(attack_run):
    """patch-timer makes every Python clock (and torch's event timer) advance 1 ns per reading;
    the core's clock is C's, so its figure is that of the honest code it runs (hundreds of µs on a
    CPU, like the honest fixture's), not the nanoseconds its clocks would claim: a tenth of the
    honest figure leaves a busy CI machine's noise room and is still ~10^5 times what they claim."""
    for uuid in WORKLOADS:
        patched, honest = _figure(attack_run.traces, "patch-timer", uuid), _figure(attack_run.traces, "honest", uuid)
        assert patched > 0.1 * honest, (uuid, patched, honest)


def test_traces_validate_as_the_typed_model(attack_run):
    from harness.records.trace import Trace

    for trace in attack_run.traces:
        data = trace if isinstance(trace, dict) else trace.model_dump(mode="json")
        Trace.model_validate(data)


def test_results_folder_integrity(attack_run):
    results = attack_run.results
    for relative, text in OLD_RUN_FILES.items():
        assert (results / relative).is_file(), f"{relative} was deleted"
        assert (results / relative).read_text() == text, f"{relative} was changed"
    from harness.records.trace import Trace

    lines = (attack_run.run_dir / "traces.jsonl").read_text().splitlines()
    pairs = [(t.solution, t.workload.uuid) for t in map(Trace.model_validate_json, lines)]
    expected = {(label_in(name, attack_run.traces), uuid) for name in EXPECTED for uuid in WORKLOADS}
    assert sorted(pairs) == sorted(expected), "traces.jsonl must hold exactly one valid line per (solution, workload)"


def test_tamper_blob_names_the_file_is_restored_and_later_solutions_still_pass(attack_run):
    blobs = [str(p) for p in attack_run.original_blobs]
    logs = [_field(t, "evaluation", "log") or "" for t in attack_run.traces if _field(t, "solution") == "tamper-blob"]
    assert any(any(b in log or Path(b).name in log for b in blobs) for log in logs), logs
    changed = [p for p, data in attack_run.original_blobs.items() if p.read_bytes() != data]
    assert not changed, f"not put back: {changed}"
    later = [t for t in attack_run.traces if _field(t, "solution") == "zz-honest-last"]
    assert [_status(t) for t in later] == [PASSED] * len(WORKLOADS)


def test_what_was_spoiled_for_the_next_run_is_put_back(attack_run):
    """tamper-definition's reference, forge-run's run folder and deleted leaderboard, plant-module's
    module: the judge put every one back before the run ended (checked before the test's own undo)."""
    assert attack_run.restored_checkout == {**attack_run.original_checkout, "left behind": []}
    logs = " ".join(_field(t, "evaluation", "log") or "" for t in attack_run.traces
                    if _field(t, "solution") in ("forge-run", "plant-module"))
    assert FORGED_RUN_DIR.name in logs and PLANTED_MODULE.name in logs  # they did act
    assert not (attack_run.root / "reference-ran").exists()


def test_tamper_harness_was_restored(attack_run):
    assert not (REPO / "harness" / "judge" / "check.py").read_bytes().endswith(TAMPER_LINE)


def _process_gone(pid: int, wait_s: float = 2.0) -> bool:
    """True once ``pid`` no longer exists (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_double_fork_daemon_is_gone_after_the_run(attack_run):
    pidfile = attack_run.root / "daemon.pids"
    assert pidfile.exists(), "the double-fork daemon never wrote its pid (did the worker get GDN_ATTACK_PIDFILE?)"
    pids = [int(line) for line in pidfile.read_text().split()]
    assert pids
    alive = [pid for pid in pids if not _process_gone(pid)]
    for pid in alive:  # do not leave it behind even when the judge did
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not alive, f"daemon pids still alive after run_benchmark returned: {alive}"


# ---------------------------------------------------------------------------- GPU-only attacks

def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def gpu_attack_run(tmp_path_factory):
    if not _cuda_available():
        pytest.skip("GPU-only attacks (tests/fixtures/attacks_gpu) need a CUDA device")
    RunConfig, run_benchmark, Timeouts, TimingConfig = _api()
    root = tmp_path_factory.mktemp("attacks_gpu")
    dataset = write_attack_dataset(root / "dataset")
    config = RunConfig(device="cuda", tiers=("cupti", "events", "sync"), trials=2,
                       timing=TimingConfig(warmup=5, iters=50, budget_s=1.0, warm_s=0.05))
    watchdog = Watchdog()
    previous = signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(WATCHDOG_S)
    try:
        result = run_benchmark("all", str(dataset), config, root / "results", solutions_root=ATTACKS_GPU,
                               progress=False, timeouts=Timeouts(startup_s=120, workload_s=60, total_s=300),
                               on_trace=lambda trace: signal.alarm(WATCHDOG_S))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return SimpleNamespace(traces=list(result.traces), floors=list(getattr(result, "floors", []) or []),
                           stuck="; ".join(watchdog.events) or None)


@pytest.mark.parametrize("name", sorted(EXPECTED_GPU))
def test_gpu_attack(gpu_attack_run, name):
    problems = _stuck_on(name, gpu_attack_run.stuck) + check_expectation(name, gpu_attack_run.traces,
                                                                        list(WORKLOADS), EXPECTED_GPU)
    if problems and gpu_attack_run.stuck:
        problems.append(f"(the run was stuck: {gpu_attack_run.stuck})")
    assert not problems, "\n".join(problems)


def _hiccup_trace(retimed: int, iters: int) -> dict:
    sync = {"retimed_calls": retimed, "iters": iters, "trials": 3}
    return {"solution": "estimate-hiccup", "workload": {"uuid": "w"},
            "evaluation": {"status": PASSED, "performance": {"tiers": {"sync": sync}}}}


def test_figure_problems_wants_the_second_sync_order_in_full():
    """No GPU: the check the GPU run applies to estimate-hiccup fails a figure that was never ordered
    again, and one that was but came back cut."""
    from harness.judge.timing.settings import SYNC_ITERS

    assert figure_problems("estimate-hiccup", [_hiccup_trace(3, 3 * SYNC_ITERS)]) == []
    assert figure_problems("estimate-hiccup", [_hiccup_trace(0, 3 * SYNC_ITERS)])
    assert figure_problems("estimate-hiccup", [_hiccup_trace(3, 48)])
    assert figure_problems("honest", [_hiccup_trace(0, 48)]) == []


def test_a_sync_tier_cut_by_an_estimate_hiccup_is_ordered_again_and_kept_in_full(gpu_attack_run):
    problems = figure_problems("estimate-hiccup", gpu_attack_run.traces)
    assert not problems, "\n".join(problems)


def test_gpu_run_was_not_stuck(gpu_attack_run):
    assert gpu_attack_run.stuck is None, gpu_attack_run.stuck


#: The spin both CUPTI-hiding fixtures launch in every call (~2 ms; half of it leaves room for a
#: faster GPU clock): a figure below it did not count the spin.
SPIN_US = 1000.0


def test_work_hidden_from_cupti_is_counted_or_rejected(gpu_attack_run):
    """hide-from-cupti re-labels its work (foreign external correlation ids) and halves the old
    recorder's figures; cupti-off switches kernel recording off around its launches. Neither may
    pass with a CUPTI figure that leaves out its ~2 ms spin."""
    for name in ("hide-from-cupti", "cupti-off"):
        for trace in gpu_attack_run.traces:
            if _field(trace, "solution") != name or _status(trace) != PASSED:
                continue
            figure = _field(_field(_field(trace, "evaluation", "performance"), "tiers")["cupti"], "value_us")
            assert figure > SPIN_US, (name, _field(trace, "workload", "uuid"), figure)
