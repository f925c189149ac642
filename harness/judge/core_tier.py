"""The judge's side of the tiers whose calls the timing core makes (wallclock, events, cupti).

For each chunk of timed calls the judge signs a command (:class:`~harness.judge.core.CoreLink`),
the worker hands it to the core, and the core runs the calls: inputs made from the judge's key
at call time, destinations poisoned, L2 flushed, the call timed, its outputs captured right
after it. The judge then checks the signed result and **every** call's captured outputs
against its own reference of the same secret inputs (:mod:`harness.judge.batched_reference`),
while the worker waits: no reference computation shares the GPU with a timed call. The judge
also decides how many calls a tier makes (the budget and the stop rule run here, on the
samples), so the worker decides nothing a figure depends on: every figure, the CUPTI tier's
included, is one the core measured and signed (docs/judging.md, "The timed call").
"""

from __future__ import annotations

import secrets
import statistics
from dataclasses import dataclass

import torch

from harness.data.definition import TORCH_DTYPES
from harness.data.workloads import Workload
from harness.facts import Tier
from harness.judge import core as core_mod
from harness.judge import protocol as msg
from harness.judge.batched_reference import gdn_decode
from harness.judge.check import CheckResult, Status, out_of_tolerance, tensor_errors
from harness.judge.core import CoreError, CoreLink, TensorSlot
from harness.judge.timing import WARM_MAX_CALLS, ClockWarmth, TimingConfig, plan_iterations, until_stable

#: One row of the state's last dimension in this many is captured and compared, at a phase
#: drawn from the key for every call; the output is captured whole. A solution that skips a
#: fraction f of a call's state rows escapes a call's check with probability about
#: (1 - f) ** (rows / 16): 64 sampled rows at B = 1, 4,096 at B = 64.
STATE_CAPTURE_STRIDE = 16
#: The capture area holds at most this many bytes (a chunk is cut to fit).
CAPTURE_AREA_BYTES = 1 << 30
#: Verification runs the reference on at most this many (call, batch) rows at a time.
VERIFY_ROWS = 256
#: The CUPTI tier's figure is rejected when the GPU went on after ``run`` returned for longer than
#: CUPTI recorded work, by more than this fraction of the figure plus this many µs: the call
#: starts on an idle GPU, so whatever the GPU did past the host's return is work of the call,
#: which CUPTI must have seen (its recording switched off around the launches: the cupti-off
#: fixture). The slack covers the events' own latency; its honest margin is in each trace
#: (``after_return_us``) and results/judge-check/20261125-H100-cupti-core.
UNSEEN_FRACTION, UNSEEN_SLACK_US = 0.10, 10.0
#: A CUPTI chunk CUPTI could not time (:data:`~harness.judge.core.UNTIMED_CHUNK`) is timed again
#: on fresh calls, at most this many times a tier; past that the tier is rejected. Once in 220
#: workloads on an H100 an honest kernel's call came back without timestamps (results/judge-check/
#: 20261126-H100-untimed): a retime costs one chunk, and a solution that provokes it every time
#: gains nothing, since no sample of an untimed chunk counts.
CUPTI_RETIMES = 2
#: Call numbers of chunks timed again: apart from the timed calls (from 0) and the core's warm-up
#: calls (1 << 40, 1 << 41: gdn_core.c), so no retimed call repeats inputs a solution has seen.
RETIME_CALLS = 1 << 42


@dataclass
class CoreWorkload:
    """One workload as the core lays it out for one variant: its slots, the secret nonce of its
    inputs, and what the reference needs beside the random inputs."""

    nonce: int
    batch_size: int
    inputs: list[TensorSlot]
    outputs: list[TensorSlot]
    scale: float | None
    scale_kind: int  # core_mod.SCALE_NONE, SCALE_GIVEN or SCALE_LEFT_OUT
    stored: dict[str, torch.Tensor]  # the workload's stored inputs, fp32 as read, on the judge's device

    @property
    def capture_bytes(self) -> int:
        return core_mod.capture_bytes_per_call(self.outputs)


def lay_out(definition, workload: Workload, stored: dict[str, torch.Tensor], state_dtype: str,
            device: str) -> CoreWorkload:
    """The core's layout of ``workload``: every tensor input (random, stored, or left out), the
    destinations (``new_state`` in the variant's state dtype, captured one row in
    :data:`STATE_CAPTURE_STRIDE`), the scalar ``scale``.

    Raises:
        ValueError: the definition has a scalar input that is not its last input, or two (the
            core passes the one scalar after the tensor inputs, harness/judge/core/gdn_core.c).
    """
    inputs, scale, scale_kind = [], None, core_mod.SCALE_NONE
    names = list(definition.inputs)
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name)
        if spec.shape is None:  # a scalar: the definition's only one is the scale
            if name != names[-1]:
                raise ValueError(f"definition {definition.name}: scalar input {name!r} is not the last input; "
                                 "the timing core passes one scalar, after the tensor inputs")
            scale = source.value if source is not None and source.kind == "scalar" else None
            scale_kind = core_mod.SCALE_LEFT_OUT if scale is None else core_mod.SCALE_GIVEN
            continue
        kind = "none" if source is None else ("random" if source.kind == "random" else "stored")
        dtype = state_dtype if name == "state" else spec.dtype
        inputs.append(TensorSlot(name, kind, dtype, definition.shape_of(spec, workload.axes)))
    outputs = [TensorSlot(name, "none", state_dtype if name == "new_state" else spec.dtype,
                          definition.shape_of(spec, workload.axes),
                          STATE_CAPTURE_STRIDE if name == "new_state" else 1)
               for name, spec in definition.outputs.items()]
    return CoreWorkload(secrets.randbits(63), workload.batch_size, inputs, outputs, scale, scale_kind,
                        {n: t.to(device) for n, t in stored.items()})


def capture_area_bytes(layouts: list[CoreWorkload]) -> int:
    """The area a worker needs: the largest chunk of any workload, within :data:`CAPTURE_AREA_BYTES`."""
    per_call = max((w.capture_bytes for w in layouts), default=0)
    return max(4096, min(CAPTURE_AREA_BYTES, per_call * core_mod.MAX_CHUNK))


class Rejection(Exception):
    """A chunk that cannot stand: ``status``, the log line and, for wrong outputs, the errors of
    the call that showed it (the session makes it a verdict)."""

    def __init__(self, status: Status, log: str, check: CheckResult | None = None):
        super().__init__(log)
        self.status, self.log, self.check = status, log, check


class NotHere(Exception):
    """The tier cannot run here (CUPTI cannot record): its reason, for an unavailable figure."""


class CoreTier:
    """Drives one workload's core tiers for one worker (see module doc)."""

    def __init__(self, link: CoreLink, laid: CoreWorkload, exchange, tolerance, device: str, clock: ClockWarmth):
        """``exchange(command_hex, tier, timed) -> CoreChunkDone`` sends a chunk to the worker and
        returns its reply (raising the session's own verdicts when the worker fails)."""
        self.link, self.laid, self.exchange, self.tolerance, self.device = link, laid, exchange, tolerance, device
        self.clock = clock
        self.verified = 0
        self.host_ns: list[float] = []
        self.spans_us: list[float] = []  # the CUPTI tier's span of each timed call
        self.records: list[float] = []  # ... and the kernels, memcpys and memsets counted in it
        self.after_return_us: list[float] = []  # ... and how long the GPU went on after run() returned
        self.kernel_names: set[str] = set()
        self.retimed_chunks = 0  # CUPTI chunks CUPTI could not time, timed again (CUPTI_RETIMES)
        self.retimed_calls = 0  # ... and their calls

    # ------------------------------------------------------------------ a tier

    def samples(self, tier: str, config: TimingConfig) -> list[float]:
        """The tier's samples (µs), every call verified; :class:`Rejection` when a call is wrong
        or a result is not the core's, :class:`NotHere` when the tier cannot run here."""
        gpu = tier != Tier.WALLCLOCK
        window = self.clock.seconds(config) if gpu else 0.0
        warm_s, max_calls = (window, WARM_MAX_CALLS) if window > 0 else (0.1 * config.budget_s, max(1, config.warmup))
        warm = self.chunk(tier, core_mod.MODE_WARM, warm_s=warm_s, max_calls=max_calls)
        estimate_s = warm.wall_ns / max(warm.calls, 1) / 1e9
        planned = plan_iterations(estimate_s, config)
        if tier == Tier.CUPTI:  # one untimed call inside the recording first, unless the budget cut the tier
            first_warmup = 1 if planned > config.min_iters else 0
            found = until_stable(lambda first, count: self.timed(tier, first, count, first_warmup if first == 0 else 0),
                                 planned, config)
        else:
            found = until_stable(lambda first, count: self.timed(tier, first, count), planned, config)
        if gpu:
            self.clock.busy()
        if tier == Tier.CUPTI:
            self.check_cupti_saw_the_work(found)
        return found

    def check_cupti_saw_the_work(self, samples: list[float]) -> None:
        """:class:`Rejection` when the GPU went on after ``run`` returned for longer than CUPTI
        recorded work (see :data:`UNSEEN_FRACTION`)."""
        after, recorded = statistics.median(self.after_return_us), statistics.median(samples)
        if after > (1 + UNSEEN_FRACTION) * recorded + UNSEEN_SLACK_US:
            raise Rejection(Status.RUNTIME_ERROR, (
                f"timing rejected: the GPU went on {after:.1f} µs after run() returned (median), but CUPTI "
                f"recorded {recorded:.1f} µs of work in the call: work was hidden from CUPTI (its recording "
                "switched off around the launches?)"))

    def timed(self, tier: str, first: int, count: int, warmup: int = 0) -> list[float]:
        """Samples of calls ``first .. first + count - 1``, in chunks the capture area holds."""
        per_chunk = max(1, min(core_mod.MAX_CHUNK, self.link.area.size // max(self.laid.capture_bytes, 1)))
        found = []
        while len(found) < count:
            n = min(per_chunk, count - len(found))
            found += self.timed_chunk(tier, first + len(found), n, warmup if not found else 0)
        return found

    def timed_chunk(self, tier: str, first: int, count: int, warmup: int) -> list[float]:
        """The samples (µs) of one chunk of ``count`` calls; a chunk CUPTI could not time is
        timed again on fresh calls (:data:`CUPTI_RETIMES`, :data:`RETIME_CALLS`), its calls
        verified all the same."""
        result = self.chunk(tier, core_mod.MODE_TIMED, first, count, warmup)
        while result.untimed:
            if self.retimed_chunks == CUPTI_RETIMES:
                raise Rejection(Status.RUNTIME_ERROR, (
                    f"timing rejected: CUPTI delivered records without timestamps in {CUPTI_RETIMES + 1} chunks of "
                    f"{tier} timed calls (the last in place of calls {first}..{first + count - 1}); no CUPTI figure"))
            self.retimed_chunks += 1
            self.retimed_calls += count
            fresh = RETIME_CALLS + (self.retimed_chunks << 32) + first  # the nth retime of a tier: its own block
            result = self.chunk(tier, core_mod.MODE_TIMED, fresh, count, warmup)
        return result.samples_us

    # ------------------------------------------------------------------ a chunk

    def chunk(self, tier: str, mode: int, first: int = 0, count: int = 0, warmup: int = 0, warm_s: float = 0.0,
              max_calls: int = 1) -> core_mod.ChunkResult:
        command, seq = self.link.chunk_command(tier, mode, first, count, warmup, warm_s, max_calls)
        reply = self.exchange(command.hex(), tier, mode == core_mod.MODE_TIMED)
        try:
            result = self.link.open_result(bytes.fromhex(reply.result), seq, tier, mode, first, count,
                                           self.laid.capture_bytes)
        except (ValueError, CoreError) as exc:
            raise Rejection(Status.RUNTIME_ERROR, f"timing rejected: {exc}") from exc
        if mode == core_mod.MODE_TIMED:
            self.verify(tier, seq, first, len(result.samples_us), result)  # wrong outputs: the clearer verdict
            self.host_ns += result.host_ns
        if result.stopped:
            raise Rejection(Status.RUNTIME_ERROR, f"{tier} tier, timed call {first + len(result.samples_us)}: "
                                                  f"run raised:\n{reply.error or '(no traceback sent)'}")
        if result.untimed:  # no figure to keep (timed_chunk times it again)
            return result
        unseen = [first + k for k, n in enumerate(result.records) if tier == Tier.CUPTI and n == 0]
        if mode == core_mod.MODE_TIMED and unseen:
            raise Rejection(Status.RUNTIME_ERROR, (
                f"timing rejected: CUPTI recorded no kernel, memcpy or memset in cupti timed call {unseen[0]} "
                "(another CUPTI client holding the activity callbacks, or its recording switched off?); "
                "no CUPTI figure"))
        if tier == Tier.CUPTI:
            if reply.unavailable:
                raise NotHere(reply.unavailable)
            self.spans_us += result.spans_us
            self.records += result.records
            self.after_return_us += [max(0.0, b - h / 1e3) for b, h in zip(result.brackets_us, result.host_ns)]
            self.kernel_names |= set(reply.kernel_names)
        return result

    def verify(self, tier: str, seq: int, first: int, count: int, result: core_mod.ChunkResult) -> None:
        """Every call of the chunk against the reference of its secret inputs."""
        capture = self.link.read_capture(count, self.laid.capture_bytes)
        rewritten = self.link.check_words(seq, capture, result.words)
        if rewritten:
            raise Rejection(Status.RUNTIME_ERROR, (
                f"timing rejected: the captured outputs of {tier} timed calls "
                f"{[first + k for k in rewritten][:5]} changed after the timing core signed them "
                "(written afterwards by the solution's process)"))
        group = max(1, VERIFY_ROWS // max(self.laid.batch_size, 1))
        for start in range(0, count, group):
            calls = list(range(first + start, first + min(count, start + group)))
            expected = self.expected(tier, calls)
            if self.all_within_tolerance(tier, calls, capture[start: start + len(calls)], expected):
                continue
            for k, call in enumerate(calls):  # which call, and its errors, for the verdict
                self.compare(tier, call, capture[call - first], {n: t[k] for n, t in expected.items()})
        self.verified += count

    def all_within_tolerance(self, tier: str, calls: list[int], capture, expected: dict[str, torch.Tensor]) -> bool:
        """Whether every compared element of every call of a group passes the tolerance rule (the
        rule of :func:`harness.judge.check.out_of_tolerance`, for all calls at once; the per-call
        :meth:`compare` then names the first that does not)."""
        n, at = len(calls), 0
        for index, slot in enumerate(self.laid.outputs):
            slots, width = slot.captured_row_slots, slot.row_bytes
            got = torch.from_numpy(capture[:, at: at + slots * width].copy()).view(TORCH_DTYPES[slot.dtype])
            got = got.reshape(n, slots, -1)
            at += slots * width
            phases = torch.tensor([core_mod.capture_phase(self.link, self.laid.nonce, tier, call, index, slot)
                                   for call in calls])
            rows = phases[:, None] + slot.stride * torch.arange(slots)[None, :]  # [n, slots]
            valid = (rows < slot.rows).to(self.device)
            want_rows = expected[slot.name].reshape(n, slot.rows, -1)
            gather = rows.clamp(max=slot.rows - 1).to(self.device)[..., None].expand(-1, -1, want_rows.shape[-1])
            bad = out_of_tolerance(got.to(self.device).double(), torch.gather(want_rows, 1, gather).double(),
                                   self.tolerance)
            if bool((bad & valid[..., None]).any()):
                return False
        return True

    def expected(self, tier: str, calls: list[int]) -> dict[str, torch.Tensor]:
        """The reference's outputs of ``calls``, stacked along a leading call axis."""
        stacked = {}
        for index, slot in enumerate(self.laid.inputs):
            if slot.source == "none":
                continue
            if slot.source == "stored":
                stacked[slot.name] = self.laid.stored[slot.name].float().expand(len(calls), *slot.shape)
                continue
            values = core_mod.random_inputs(self.link, self.laid.nonce, tier, calls, index, slot, self.device)
            # the solution got values rounded to the definition's dtype; a bf16 state variant's rounding
            # of the fp32 state is the variant's, which the reference does not share (as in the trials)
            stacked[slot.name] = values if slot.name == "state" or slot.dtype == "float32" else values.bfloat16()
        output, new_state = gdn_decode(stacked, self.laid.scale)
        return {"output": output, "new_state": new_state}

    def compare(self, tier: str, call: int, capture, expected: dict[str, torch.Tensor]) -> None:
        phases = [core_mod.capture_phase(self.link, self.laid.nonce, tier, call, i, slot)
                  for i, slot in enumerate(self.laid.outputs)]
        got = core_mod.captured_outputs(capture, self.laid.outputs, phases)
        problems, errors = [], {}
        for slot, phase in zip(self.laid.outputs, phases):
            want = expected[slot.name].reshape(-1, slot.shape[-1])[phase::slot.stride]
            found = errors[slot.name] = tensor_errors(got[slot.name].to(want.device), want, self.tolerance)
            if found.failed:
                problems.append(f"{slot.name}: {found.failed}/{found.numel} compared elements out of tolerance "
                                f"({found.nonfinite} non-finite), max abs {found.max_abs:.3g}")
        if problems:
            log = f"{tier} tier, timed call {call} (every timed call is checked): " + "; ".join(problems)
            raise Rejection(Status.INCORRECT_NUMERICAL, log, CheckResult(Status.INCORRECT_NUMERICAL, errors, log))

    def tier_end(self, tier: str, samples: list[float]) -> msg.TierEnd:
        """The tier as the session's figure checks take it (the worker's CUPTI extras for that tier)."""
        extra = {}
        if tier == Tier.CUPTI and self.spans_us:
            extra = dict(span_median_us=statistics.median(self.spans_us),
                         kernels_per_call=statistics.median(self.records),
                         kernel_names=sorted(self.kernel_names)[:8],
                         after_return_us=statistics.median(self.after_return_us),
                         host_call_us=self.host_call_us(), retimed_calls=self.retimed_calls)
        elif tier != Tier.WALLCLOCK:
            extra = dict(host_call_us=self.host_call_us())
        return msg.TierEnd(tier=tier, available=True, samples_us=samples, **extra)

    def host_call_us(self) -> float | None:
        """Median host time of a timed ``run`` call (µs), a diagnostic of the events tier."""
        return statistics.median(self.host_ns) / 1e3 if self.host_ns else None


def exchange_with(worker, deadline: float, on_failed):
    """``exchange`` for :class:`CoreTier`: send a chunk, return the worker's ``CoreChunkDone``; a
    ``Failed`` reply goes to ``on_failed`` (which raises the session's verdict)."""
    def exchange(command_hex: str, tier: str, timed: bool) -> msg.CoreChunkDone:
        worker.send(msg.CoreChunk(command=command_hex, tier=tier, timed=timed))
        reply = worker.recv(deadline, msg.CoreChunkDone, msg.Failed)
        if isinstance(reply, msg.Failed):
            on_failed(reply)
        return reply
    return exchange
