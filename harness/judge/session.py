"""The judge's side of one solution variant: drive its worker, decide every verdict.

For each workload the parent sends the stored input tensors and compares the output bytes of
every correctness trial with its own references. Then it times: the tiers of the timing core
chunk by chunk, every call's outputs checked (:mod:`harness.judge.core_tier`), and the contest
and sync tiers (the contest libraries' own timers) through the worker, the outputs their calls
left checked. When a tier ends its figure is
checked against what the judge saw (:mod:`harness.judge.figures`: the calls it counted, its own
wall clock, the physical limit, CUPTI). Only then is a :class:`Trace` made. Whatever the worker
does — crash, hang, lie, send garbage — ends as a status in the traces of this variant only.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import torch

from harness.data.dataset import Dataset
from harness.data.definition import TORCH_DTYPES
from harness.data.workloads import Workload
from harness.facts import CONTEST_TIER, HEADLINE_TIERS, STATE_DTYPE_TOLERANCES, Rules, Tier, Tolerance
from harness.judge import dps, figures
from harness.judge import protocol as msg
from harness.judge.check import CheckResult, Status, check_outputs
from harness.judge.core import CORE_TIERS, CoreLink, extension_file_name
from harness.judge.core_tier import CoreTier, NotHere, Rejection, capture_area_bytes, exchange_with, lay_out
from harness.judge.figures import Rejected
from harness.judge.floor import tier_figure
from harness.judge.isolation import Timeouts, WorkerGone, WorkerProcess, write_tree
from harness.judge.references import ReferenceFailed, References
from harness.judge.solutions import SolutionMeta, materialize
from harness.judge.timing import (CONTEST_TRIALS, STOP_RULE_TIERS, ClockWarmth, gpu_tier_unavailable_reason,
                                  median_noise, stop_reason, summarize)
from harness.judge.timing.stats import trial_means, trial_medians
from harness.judge.timing.tiers import describe_timer
from harness.records.trace import (Correctness, CorrectnessExtra, Environment, Evaluation,
                                   FloorMeasurement, Performance, TensorErrors, TierFigure, Trace, WorkloadRecord,
                                   variant_label)

#: First trial number of the timed calls (the correctness trials are 0, 1, ...).
TIMED_TRIAL_BASE = 1000
#: A contest or sync tier cut as a slow solution's yet faster than half its budget (figures.CutTooFast) is
#: timed this many times more, on fresh inputs, before it is rejected. An honest solution's estimate calls
#: can meet a host hiccup: pt-compiled was rejected so on one contest-v1 workload of 240 in two of the
#: H100 runs (2026-11-26 and results/judge-check/20261128-H100-int8-flush), the rest of each run fast.
#: A solution that claims to be slow on purpose is cut again and rejected all the same.
CUT_RETIMES = 1


class SnapshotUnwritable(OSError):
    """A solution's files cannot be written as named for its worker: its COMPILE_ERROR, not the run's end."""


@dataclass(frozen=True)
class Variant:
    """A solution run with one state dtype; non-fp32 variants are rows of their own."""

    meta: SolutionMeta
    state_dtype: str = "float32"

    @property
    def label(self) -> str:
        return variant_label(self.meta.name, self.state_dtype)

    @property
    def tolerance(self) -> Tolerance | None:
        """The harness's tolerance for a non-fp32 state (None: the run's fp32 one)."""
        return STATE_DTYPE_TOLERANCES.get(self.state_dtype)


@dataclass
class RunContext:
    """What every variant of a run is judged with."""

    dataset: Dataset
    config: "object"  # harness.judge.run.RunConfig
    references: References
    floors: dict[tuple[str, str], list[FloorMeasurement]]  # (workload uuid, state dtype) -> every copy measured
    environment: Environment
    harness_files: dict[str, bytes]  # the harness's sources as the run started
    scratch: Path
    core_library: bytes  # the compiled timing core (harness/judge/core.py), beside every worker's harness
    timeouts: Timeouts = field(default_factory=Timeouts)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def protocol_log(exc: Exception) -> str:
    return f"protocol violation by the solution process (its messages are not the judge's protocol): {exc}"


def to_tensor_errors(errors) -> dict[str, TensorErrors]:
    return {name: TensorErrors(**vars(e)) for name, e in errors.items()}


class VariantJudge:
    """Judges one variant on every workload of the run; see module doc."""

    def __init__(self, ctx: RunContext, variant: Variant, files: dict[str, bytes], library: bytes | None):
        self.ctx, self.variant, self.files, self.library = ctx, variant, files, library
        self.definition = ctx.dataset.definition
        self.tolerance = variant.tolerance or ctx.config.tolerance
        self.verified = 0
        self.pending: list = []  # (trial, outputs, what) of the sampled timed calls of this workload
        self.unbelievable: Rejected | None = None  # a figure rejected, judged after the sampled outputs
        self.deadline = 0.0  # of the workload being judged (time.monotonic())
        self.needs_restart = False  # the worker said its CUDA context is gone
        self.started = time.monotonic()
        self.load_seconds: list[float] = []  # per worker started: seconds from its start to Ready
        self.workload_seconds: list[float] = []  # per workload judged to its end, in order (run.json's timeline)
        self.link: CoreLink | None = None  # the running worker's timing core
        self.laid = None  # the workload being judged, as the core lays it out (core_tier.CoreWorkload)
        self.clock = ClockWarmth()  # when the running worker last kept the GPU busy (its core tiers' warm-up)
        self.awaiting_order = False  # the worker waits for the judge's next timing order of this workload
        self.rules = str(Rules(getattr(ctx.config, "rules", Rules.DEFAULT)))
        self.inputs_modified: list[str] = []  # inputs this workload's correctness trials changed (contest rules)

    # ------------------------------------------------------------------ traces

    def trace(self, workload: Workload, status: Status, log: str = "", check: CheckResult | None = None,
              performance: Performance | None = None) -> Trace:
        """A Trace for ``workload``; correctness where flashinfer-bench's rules want it."""
        correctness = None
        if check is not None and check.errors and status in (Status.PASSED, Status.INCORRECT_NUMERICAL):
            correctness = Correctness(
                max_relative_error=max(e.max_rel for e in check.errors.values()),
                max_absolute_error=max(e.max_abs for e in check.errors.values()),
                extra=CorrectnessExtra(per_output=to_tensor_errors(check.errors), trials=self.ctx.config.trials,
                                       atol=self.tolerance.atol, rtol=self.tolerance.rtol,
                                       state_dtype=self.variant.state_dtype, timed_calls_verified=self.verified,
                                       rules=self.rules, inputs_modified=self.inputs_modified))
        evaluation = Evaluation(status=status, environment=self.ctx.environment,
                                timestamp=now(), log=log, correctness=correctness,
                                performance=performance if status == Status.PASSED else None)
        return Trace(definition=self.definition.name, workload=WorkloadRecord(**workload.as_json()),
                     solution=self.variant.label, evaluation=evaluation)

    def all_remaining(self, workloads, status: Status, log: str) -> Iterator[Trace]:
        for workload in workloads:
            yield self.trace(workload, status, log)

    # ------------------------------------------------------------------ workers

    def start_worker(self, attempt: int) -> WorkerProcess:
        """A worker for this variant, its private copy of the harness, the core and the solution written first.

        Raises:
            SnapshotUnwritable: the solution's files cannot be written under the names it gives them.
        """
        private = self.ctx.scratch / f"{self.variant.meta.package_name}-{self.variant.state_dtype}-{attempt}"
        write_tree(self.ctx.harness_files, private / "code" / "harness")
        write_tree({extension_file_name(): self.ctx.core_library}, private / "code")
        try:
            package_dir = materialize(self.variant.meta, self.files, private / "code", self.library)
        except OSError as exc:
            raise SnapshotUnwritable(f"the solution's files could not be written for its process: {exc}") from exc
        self.link = CoreLink(capture_area_bytes([lay_out(self.definition, w, {}, self.variant.state_dtype, "cpu")
                                                 for w in self.ctx.dataset.workloads]))
        self.clock = ClockWarmth()
        worker = WorkerProcess(private, private / "worker.log", *self.payload_area_sizes(),
                               core_fds=(self.link.key_fd, self.link.area.fd))
        config = self.ctx.config
        if config.device.startswith("cuda"):  # outputs go straight from the area onto the GPU
            worker.pin_outputs_area()
        worker.send(msg.Solution(
            package_dir=str(package_dir), package_name=self.variant.meta.package_name,
            entry_module=dps.ENTRY_MODULE,
            state_dtype=self.variant.state_dtype, device=config.device, definition=self.definition.raw,
            tiers=list(config.tiers), trials=config.trials, timing=vars(config.timing)))
        return worker

    def payload_area_sizes(self) -> tuple[int, int]:
        """Bytes of the largest frame of tensors to the worker (stored inputs) and from it (outputs)."""
        workloads = self.ctx.dataset.workloads
        stored = max((msg.area_bytes(msg.tensor_header(n, t) for n, t in self.ctx.references.stored[w.uuid].items())
                      for w in workloads), default=0)
        outputs = max((msg.area_bytes(msg.destination_headers(self.definition, w.axes, self.variant.state_dtype))
                       for w in workloads), default=0)
        return stored, outputs

    def traces(self, max_restarts: int = 3) -> Iterator[Trace]:
        """One trace per workload of the dataset, whatever the worker does."""
        remaining = list(self.ctx.dataset.workloads)
        for attempt in range(max_restarts + 1):
            if not remaining:
                return
            if time.monotonic() - self.started > self.ctx.timeouts.total_s:
                break
            launched = time.monotonic()
            try:
                worker = self.start_worker(attempt)
            except SnapshotUnwritable as exc:  # entries.py refuses the names it can tell first
                yield from self.all_remaining(remaining, Status.COMPILE_ERROR, str(exc))
                return
            self.needs_restart = False
            try:
                deadline = launched + self.ctx.timeouts.startup_s
                try:
                    first = worker.recv(deadline, msg.Ready, msg.LoadFailed)
                    self.load_seconds.append(round(time.monotonic() - launched, 3))
                except WorkerGone as exc:
                    status = Status.TIMEOUT if exc.timed_out else Status.RUNTIME_ERROR
                    yield from self.all_remaining(remaining, status, f"{exc} while loading:\n{worker.log_tail()}")
                    return
                except msg.ProtocolError as exc:
                    yield from self.all_remaining(remaining, Status.RUNTIME_ERROR, protocol_log(exc))
                    return
                if isinstance(first, msg.LoadFailed):
                    status = Status.SKIPPED if first.skipped else Status.COMPILE_ERROR
                    yield from self.all_remaining(remaining, status, first.log)
                    return
                while remaining:
                    workload = remaining[0]
                    begun = time.monotonic()
                    try:
                        trace = self.judge_workload(worker, workload)
                        self.workload_seconds.append(round(time.monotonic() - begun, 3))
                    except WorkerGone as exc:
                        remaining.pop(0)
                        status = Status.TIMEOUT if exc.timed_out else Status.RUNTIME_ERROR
                        yield self.trace(workload, status, f"{exc} on this workload:\n{worker.log_tail()}")
                        break  # a fresh worker for the rest
                    except msg.ProtocolError as exc:
                        yield from self.all_remaining(remaining, Status.RUNTIME_ERROR, protocol_log(exc))
                        return
                    remaining.pop(0)
                    yield trace
                    if self.needs_restart or worker.proc.poll() is not None:
                        break  # it exited after its verdict (sticky CUDA error): a fresh worker for the rest
                else:
                    return
            finally:
                worker.kill()
                self.link.close()
                shutil.rmtree(worker.private_dir, ignore_errors=True)
        yield from self.all_remaining(remaining, Status.RUNTIME_ERROR,
                                      "not run: the solution process failed too often or ran out of its total time")

    # ------------------------------------------------------------------ one workload

    def judge_workload(self, worker: WorkerProcess, workload: Workload) -> Trace:
        deadline = self.deadline = time.monotonic() + self.ctx.timeouts.workload_s
        stored = self.ctx.references.stored[workload.uuid]
        self.laid = lay_out(self.definition, workload, stored, self.variant.state_dtype, self.ctx.config.device)
        command = self.link.workload_command(self.laid.nonce, self.laid.scale_kind, self.laid.scale,
                                             self.laid.inputs, self.laid.outputs)
        worker.send(msg.Workload(workload=workload.as_json(), timed_trial_base=TIMED_TRIAL_BASE, core=command.hex(),
                                 tensors=[msg.tensor_header(n, t) for n, t in stored.items()]), stored.values())
        self.verified, self.pending, self.unbelievable, self.awaiting_order = 0, [], None, False
        self.inputs_modified = []
        try:
            check = self.check_trials(worker, workload, deadline)
            tiers = self.time_tiers(worker, workload, deadline)
        except Rejected as failure:
            try:
                self.finish(worker, deadline)
            except WorkerGone:  # it exited after its failure (a sticky CUDA error): the verdict stands
                pass
            verdict = failure
            try:  # calls sampled before the failure: wrong outputs are the clearer verdict
                self.verify_timed_calls(workload, self.pending)
            except Rejected as wrong:
                verdict = wrong
            self.pending = []
            return self.trace(workload, verdict.status, verdict.log, verdict.check)
        worker.send(msg.EndWorkload())
        worker.recv(deadline, msg.WorkloadDone)
        try:
            self.verify_timed_calls(workload, self.pending)  # wrong outputs first: the clearer verdict
            if self.unbelievable is not None:
                raise self.unbelievable
        except Rejected as verdict:
            return self.trace(workload, verdict.status, verdict.log, verdict.check)
        finally:
            self.pending = []
        return self.trace(workload, Status.PASSED, "", check, self.performance(workload, tiers))

    def finish(self, worker: WorkerProcess, deadline: float) -> None:
        """Let the worker reach the end of a workload whose verdict is already known: answer what
        it still asks, and end the workload once it waits for the judge's next timing order."""
        if worker.proc.poll() is not None:
            raise WorkerGone(f"the solution process exited ({worker.exit_text()})")
        ended = False
        while True:
            if self.awaiting_order and not ended:
                worker.send(msg.EndWorkload())
                ended = True
            message = worker.recv(deadline, msg.WorkloadDone, msg.Called, msg.Checked, msg.TierBegin,
                                  msg.TierEnd, msg.Failed, msg.CoreChunkDone)
            if isinstance(message, msg.WorkloadDone):
                return
            if isinstance(message, msg.Failed) and message.fatal:
                self.needs_restart = True
                return
            if isinstance(message, (msg.TierEnd, msg.Failed, msg.CoreChunkDone)):
                self.awaiting_order = True  # back in its order loop
            elif isinstance(message, msg.Called):
                worker.send(msg.Go(proceed=False))
            elif isinstance(message, msg.Checked) and not message.problem:
                self.receive_outputs(worker, workload_axes=None, header=message)
                if message.call is not None:
                    worker.send(msg.Received())

    def receive_outputs(self, worker: WorkerProcess, workload_axes: dict | None, header: msg.Checked):
        """The payloads ``header`` announces, checked against the destinations' shapes and dtypes."""
        outputs = {}
        expected = (msg.destination_layout(self.definition, workload_axes, self.variant.state_dtype)
                    if workload_axes is not None else None)
        names = [h.name for h in header.outputs]
        if expected is not None and sorted(names) != sorted(expected):
            raise msg.ProtocolError(f"outputs {names}, expected {sorted(expected)}")
        for h in header.outputs:
            shape, dtype = expected[h.name] if expected is not None else (tuple(h.shape), h.dtype)
            outputs[h.name] = worker.recv_tensor(h, shape, dtype, self.deadline, self.ctx.config.device)
        return outputs

    def receive_call(self, worker, workload: Workload, deadline: float, what: str) -> dict[str, torch.Tensor]:
        """One correctness trial's output bytes (CPU tensors), or :class:`Rejected` when the call
        failed or broke the contract."""
        checked = worker.recv(deadline, msg.Checked, msg.Failed)
        if isinstance(checked, msg.Failed):
            self.failed(checked)
        if checked.call is not None:
            raise msg.ProtocolError(f"outputs of timed call {checked.call} sent for {what}")
        outputs = self.checked_outputs(worker, workload, checked, what)
        unknown = sorted(set(checked.inputs_modified) - set(self.definition.inputs))
        if unknown:
            raise msg.ProtocolError(f"{what}: inputs {unknown[:4]} reported modified; the definition has no such input")
        self.judge_inputs_modified(checked.inputs_modified, what)
        return outputs

    def judge_inputs_modified(self, names: list[str], what: str) -> None:
        """Inputs a correctness trial's call changed: :class:`Rejected` under strict rules, recorded
        (the trace's ``inputs_modified``) under the contest's (docs/judging.md, "The rules")."""
        if not names:
            return
        if self.rules == Rules.STRICT:
            raise Rejected(Status.RUNTIME_ERROR, (
                f"{what}: contract violation: input {', '.join(names)} was modified by run (--rules strict: "
                "inputs are read-only, and an in-place solution updates new_state, which its entry hands it as its "
                "state; --rules contest accepts it, as the contest did)"))
        self.inputs_modified = sorted(set(self.inputs_modified) | set(names))

    def checked_outputs(self, worker, workload: Workload, checked: msg.Checked, what: str) -> dict[str, torch.Tensor]:
        """The payloads of ``checked``, or :class:`Rejected` for the problem it reports."""
        if checked.problem:
            status = {"shape": Status.INCORRECT_SHAPE, "dtype": Status.INCORRECT_DTYPE}.get(checked.problem_kind,
                                                                                          Status.RUNTIME_ERROR)
            prefix = "contract violation: " if checked.problem_kind == "contract" else ""
            raise Rejected(status, f"{what}: {prefix}{checked.problem}")
        return self.receive_outputs(worker, workload.axes, checked)

    def compare(self, workload: Workload, trial: int, outputs: dict, keep: bool, what: str) -> CheckResult:
        """Outputs against the reference of ``trial``; :class:`Rejected` when they are wrong."""
        try:
            expected = self.ctx.references.expected(workload, trial, keep=keep)
        except ReferenceFailed as failed:  # not the solution's doing: not judged, said as such
            raise Rejected(Status.SKIPPED, f"not judged: {failed}") from failed
        on_device = {n: t.to(self.ctx.config.device) for n, t in outputs.items()}
        result = check_outputs(on_device, on_device, expected, self.tolerance,
                               dtypes={"new_state": TORCH_DTYPES[self.variant.state_dtype]})
        if result.status != Status.PASSED:
            raise Rejected(result.status, f"{what}: {result.message}", result)
        return result

    def verify_timed_calls(self, workload: Workload, pending: list) -> None:
        """Compare the sampled timed calls' outputs, once the worker is idle: the judge's reference
        computations must never share the GPU with a timed call."""
        for trial, outputs, what in pending:
            self.compare(workload, trial, outputs, keep=False, what=what)

    def failed(self, message: msg.Failed):
        """The worker reports the workload failed outside a checked call (it then waits for the
        judge's next order, unless its CUDA context is gone and it exits)."""
        self.needs_restart = self.needs_restart or message.fatal
        self.awaiting_order = not message.fatal
        raise Rejected(Status.RUNTIME_ERROR, message.log)

    def check_trials(self, worker, workload: Workload, deadline: float) -> CheckResult:
        """Every correctness trial; the worst errors over them."""
        merged = None
        for trial in range(self.ctx.config.trials):
            try:
                what = f"trial {trial}"
                result = self.compare(workload, trial, self.receive_call(worker, workload, deadline, what), True, what)
            except Rejected:
                try:
                    worker.send(msg.Go(proceed=False))
                except WorkerGone:
                    pass
                raise
            worker.send(msg.Go(proceed=True))
            self.awaiting_order = trial == self.ctx.config.trials - 1  # the last trial's Go starts the timing
            merged = result if merged is None else CheckResult(
                Status.PASSED, {n: e.worst(merged.errors.get(n)) for n, e in result.errors.items()})
        return merged

    # ------------------------------------------------------------------ timing

    def time_tiers(self, worker, workload: Workload, deadline: float) -> dict[str, TierFigure]:
        measured = {}
        for index, tier in enumerate(self.ctx.config.tiers):
            if tier in CORE_TIERS:
                measured[tier] = self.core_tier(worker, workload, tier, deadline)
                continue
            measured[tier] = self.worker_tier(worker, workload, tier, index, deadline)
        try:
            self.check_brackets(measured)
        except Rejected as verdict:
            self.unbelievable = self.unbelievable or verdict
        return figures.bounded_claims(measured)  # checked first: a claim under CUPTI's is a verdict

    def core_tier(self, worker, workload: Workload, tier: str, deadline: float) -> TierFigure:
        """A tier the timing core times, every call checked (harness/judge/core_tier.py); a wrong
        call or a result the core did not sign is the workload's verdict, at once."""
        def exchange_failed(message: msg.Failed):
            self.awaiting_order = True
            self.failed(message)

        exchange = exchange_with(worker, deadline, exchange_failed)

        def tracked(command_hex: str, *order) -> msg.CoreChunkDone:
            self.awaiting_order = False
            reply = exchange(command_hex, *order)
            self.awaiting_order = True
            return reply

        device = self.ctx.config.device
        cannot = gpu_tier_unavailable_reason(device) if tier != Tier.WALLCLOCK else (
            "the wallclock tier times runs on the CPU: on a GPU the cupti, events and sync tiers do"
            if device.startswith("cuda") else None)
        if cannot:
            return TierFigure(tier=tier, available=False, reason=cannot)
        driver = CoreTier(self.link, self.laid, tracked, self.tolerance, device, self.clock)
        started = time.monotonic()
        try:
            samples = driver.samples(tier, self.ctx.config.timing)
        except Rejection as rejection:
            raise Rejected(rejection.status, rejection.log, rejection.check) from rejection
        except NotHere as reason:
            return TierFigure(tier=tier, available=False, reason=str(reason))
        finally:
            self.verified += driver.verified
        end = driver.tier_end(tier, samples)
        try:
            return self.tier_result(workload, tier, end, len(samples), len(samples), time.monotonic() - started)
        except Rejected as verdict:
            self.unbelievable = self.unbelievable or verdict
            return TierFigure(tier=tier, available=False, reason=verdict.log)

    def worker_tier(self, worker, workload: Workload, tier: str, index: int, deadline: float) -> TierFigure:
        """A tier the worker times with its own timers (:meth:`time_tier`), ordered once and, where it comes
        back cut yet fast (:class:`~harness.judge.figures.CutTooFast`), again up to :data:`CUT_RETIMES` times.
        Each order has a tier index of its own, so its timed calls draw inputs the solution has not seen
        (``protocol.timed_trial``); the calls of an order given up are verified all the same."""
        retimed = 0
        for attempt in range(CUT_RETIMES + 1):
            order = index + attempt * len(self.ctx.config.tiers)
            worker.send(msg.TimeTier(tier=tier, index=order))
            self.awaiting_order = False
            message = worker.recv(deadline, msg.TierBegin, msg.Failed)
            if isinstance(message, msg.Failed):
                self.failed(message)
            if message.tier != tier:
                raise msg.ProtocolError(f"tier {message.tier!r} begun, expected {tier!r}")
            try:
                figure = self.time_tier(worker, workload, tier, order, deadline, final=attempt == CUT_RETIMES)
            except figures.CutTooFast as given_up:  # the tier ended: the worker waits for the next order
                self.awaiting_order = True
                retimed += given_up.calls
                continue
            self.awaiting_order = True
            return figure.model_copy(update={"retimed_calls": retimed}) if retimed else figure
        raise AssertionError("unreachable: the final order's figure is always returned")

    def time_tier(self, worker, workload: Workload, tier: str, tier_index: int, deadline: float,
                  final: bool = True) -> TierFigure:
        """Follow a tier the worker times (the contest tier: FlashInfer's timer, one reported call a
        trial, the trial's calls sharing its input set; the sync tier: flashinfer-bench 0.1.2's loop,
        one reported call a trial, an untimed call on the trial's own inputs after its timed calls on clones),
        verify every call it reports, then check the figure.

        Raises:
            CutTooFast: the tier came back cut yet fast and this is not the ``final`` order (its ``calls``: the
                calls it reported, one a trial; :meth:`worker_tier` orders it again). On the final order that verdict is
                kept for the workload, as every other rejected figure is.
        """
        started = time.monotonic()
        calls, verified, asked = 0, 0, []  # asked: calls whose outputs have not come yet, oldest first
        while True:
            message = worker.recv(deadline, msg.Called, msg.Checked, msg.TierEnd, msg.Failed)
            if isinstance(message, msg.Failed):
                self.failed(message)
            if isinstance(message, msg.Checked):
                if not asked or message.call != asked[0]:
                    raise msg.ProtocolError(f"outputs of timed call {message.call} sent, expected "
                                            f"{'call ' + str(asked[0]) if asked else 'none'}")
                index = asked.pop(0)
                what = f"{tier} tier, timed call {index} (verified after it ran)"
                trial = msg.timed_trial(TIMED_TRIAL_BASE, tier_index, index)
                self.pending.append((trial, self.checked_outputs(worker, workload, message, what), what))
                worker.send(msg.Received())  # copied out: the worker may write its payload area again
                continue
            if isinstance(message, msg.TierEnd):
                if asked:
                    raise msg.ProtocolError(f"{tier} tier ended without the outputs of timed calls {asked}")
                break
            if message.index != calls:
                raise msg.ProtocolError(f"timed call {message.index} reported, expected call {calls}")
            # a contest trial's calls share one input set: an entry that changes its inputs (contest rules)
            # ends on inputs no reference was computed for, so its outputs cannot be checked; the sync
            # tier's reported call is the first on its trial's inputs (the timed ones got clones)
            verify = tier == Tier.SYNC or not self.inputs_modified
            worker.send(msg.Go(proceed=verify))
            asked += [calls] if verify else []
            verified += verify
            calls += 1
        wall_s = time.monotonic() - started
        self.verified += verified
        if message.tier != tier:
            raise msg.ProtocolError(f"tier {message.tier!r} ended, expected {tier!r}")
        if not message.available:
            if calls:
                raise msg.ProtocolError(f"tier {tier} made {calls} timed calls, then reported it could not run")
            return TierFigure(tier=tier, available=False, reason=message.reason)
        try:
            return self.tier_result(workload, tier, message, calls, verified, wall_s)
        except Rejected as verdict:  # judged once the sampled outputs are (see judge_workload)
            if isinstance(verdict, figures.CutTooFast) and not final:
                verdict.calls = calls
                raise
            self.unbelievable = self.unbelievable or verdict
            return TierFigure(tier=tier, available=False, reason=verdict.log)

    def tier_result(self, workload: Workload, tier: str, end: msg.TierEnd, calls: int, verified: int,
                    wall_s: float) -> TierFigure:
        """The figure of a tier from its raw samples, or :class:`Rejected` when it cannot be true
        (:mod:`harness.judge.figures`)."""
        samples, timing = end.samples_us, self.ctx.config.timing
        figures.check_samples(tier, samples, calls, wall_s, timing)
        stats = summarize(tier, samples, value_us=figures.tier_value(tier, samples, timing.trials))
        figures.check_floor(tier, stats.value_us, self.ctx.floors.get((workload.uuid, self.variant.state_dtype), []))
        extra = dict(wall_s=wall_s, verified_calls=verified, span_median_us=end.span_median_us,
                     kernels_per_call=end.kernels_per_call, kernel_names=end.kernel_names[:8],
                     host_call_us=figures.host_diagnostic(end.host_call_us),
                     host_probe_us=figures.host_diagnostic(end.host_probe_us),
                     after_return_us=end.after_return_us, retimed_calls=end.retimed_calls)
        if tier in STOP_RULE_TIERS:  # the judge's own account of why the tier stopped where it did
            extra.update(stop=stop_reason(samples, timing), noise=median_noise(samples))
        elif tier == CONTEST_TIER:  # all the contest's calls, or fewer by the slow-solution rule; each trial apart
            extra.update(stop="iters" if len(samples) == figures.expected_samples(tier, calls) else "budget",
                         trial_medians_us=trial_medians(samples, CONTEST_TRIALS))
        stats.extra["trials"] = {Tier.SYNC: timing.trials, CONTEST_TIER: CONTEST_TRIALS}.get(tier)
        if tier == Tier.SYNC:  # each trial apart, the judge's split of its samples beside the worker's reading
            extra.update(trial_means_us=trial_means(samples, timing.trials),
                         host_probe_trials_us=figures.host_diagnostics(end.host_probe_trials_us, timing.trials))
        return tier_figure(tier, stats, self.bytes_moved(workload), timer=describe_timer(tier, timing, tier in CORE_TIERS),
                           **extra)

    def check_brackets(self, tiers: dict[str, TierFigure]) -> None:
        figures.check_brackets(tiers)

    def bytes_moved(self, workload: Workload) -> int:
        return figures.bytes_moved(self.definition, workload, self.variant.state_dtype)

    def performance(self, workload: Workload, tiers: dict[str, TierFigure]) -> Performance:
        headline = next((t for t in HEADLINE_TIERS if t in tiers and tiers[t].available), None)
        latency = tiers[headline].value_us / 1e3 if headline else 0.0
        return Performance(latency_ms=latency, headline_tier=headline, bytes_moved=self.bytes_moved(workload),
                           tiers=tiers)
