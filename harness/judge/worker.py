"""The worker: the one process a solution runs in (``python -m harness.judge.worker``).

Everything here is on the untrusted side of the boundary (docs/judging.md):
the solution may patch any of it. It therefore holds no reference output and
decides no verdict. Before the solution is imported it arms the timing core
(:func:`arm_core`, harness/judge/core.py), which then makes, times and captures
every timed call of the tiers it runs: the worker only relays the judge's
signed commands to it and its signed results back. For the correctness trials
and the tiers the core does not run (contest, sync: the contest libraries' own
timers, called here) it builds inputs from the tensors
and seeds the parent sends, calls ``run``, copies the destinations' bytes back
and times the calls itself; the parent compares the bytes, samples those timed
calls after they were made, and checks every figure it receives. ``run`` is
always the solution's positional DPS entry (harness/judge/dps.py), called with
the definition's inputs and then its outputs, as the contest calls it.

The contract checks made here (destinations not rebound or re-strided; which
inputs a call changed, which the parent judges by the run's rules) only give
honest solutions a clear message: the bytes the parent judges are read through
the worker's own aliases of the destination storage, so a solution that defeats
these checks still ships whatever its destinations hold, and every call gets
inputs of its own, so a changed input cannot reach another call.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from harness import interrupts
from harness.data.definition import TORCH_DTYPES, parse_definition
from harness.data.workloads import build_inputs, parse_workload
from harness.facts import Tier
from harness.judge import dps
from harness.judge import protocol as msg
from harness.judge.isolation import die_with_parent
from harness.judge.solutions import import_package
from harness.judge.timing import LIBRARY_TIERS, L2Flusher, TierUnavailable, TimingConfig, measure

#: Timed calls write into a ring of destination sets, so the worker reads the
#: judge's answer for call i only before call i + ring size reuses its set: no
#: round trip between two timed calls (one per call moved the events and sync
#: figures on the H100, results/judge-check/20261123-H100-session2). The ring
#: holds at most this many bytes of destinations, and 1 to RING_MAX_SETS sets.
RING_BYTES, RING_MAX_SETS = 1 << 30, 8


@dataclass(frozen=True)
class Entry:
    """What the worker calls of a solution's generated entry (harness/judge/dps.py):
    ``run`` (positional DPS; the timed call), ``contest_call`` (what flashinfer-bench's timers call,
    with the same arguments: the contest and sync tiers), ``deliver`` (puts the last call's results in its destinations, after
    any timer; None for a destination-passing entry) and ``hands_over`` (``run`` returns data
    pointers for the timing core to copy: a value-returning entry)."""

    run: Callable
    contest_call: Callable
    deliver: Callable | None = None
    hands_over: bool = False

    def checked_call(self, args: dict) -> None:
        """One call whose outputs are looked at: ``run`` on the arguments, then :meth:`settle`."""
        self.run(*args.values())  # as the contest calls it; what it returns is not looked at
        self.settle()

    def settle(self) -> None:
        """The last call's results in its destinations (``deliver``, where the entry has one)."""
        if self.deliver is not None:
            self.deliver()


def destinations(definition, axes: dict, state_dtype: str, device) -> dict[str, torch.Tensor]:
    """NaN-filled output buffers (see :func:`harness.judge.protocol.destination_layout`): any element
    a solution leaves unwritten fails."""
    return {name: torch.full(shape, float("nan"), dtype=TORCH_DTYPES[dtype], device=device)
            for name, (shape, dtype) in msg.destination_layout(definition, axes, state_dtype).items()}


def _failure_log(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]


def _same_bytes(after, before: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN-safe) of a tensor with its copy taken before the call."""
    if not isinstance(after, torch.Tensor) or after.shape != before.shape or after.dtype != before.dtype:
        return False
    return torch.equal(after.contiguous().view(torch.uint8), before.contiguous().view(torch.uint8))


def cuda_context_broken(device: str) -> bool:
    """After a sticky CUDA error (illegal address, device-side assert) every call fails: restart the worker."""
    if not device.startswith("cuda"):
        return False
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device=device).add_(1).item()
        return False
    except Exception:
        return True


class Worker:
    """Runs one solution on the workloads the parent sends (see :mod:`harness.judge.protocol`)."""

    def __init__(self, channel: msg.Channel, job: msg.Solution, entry: Entry, core):
        self.channel, self.job, self.entry, self.core = channel, job, entry, core
        self.definition = parse_definition(job.definition, "definition sent by the judge")
        self.state_dtype = TORCH_DTYPES[job.state_dtype]
        self.device = job.device
        self.timing = TimingConfig(**job.timing)
        self.flush = L2Flusher(self.device) if self.device.startswith("cuda") else (lambda: None)
        if self.device.startswith("cuda"):  # the stored inputs come and the outputs go as DMA
            channel.send_area.pin()
            channel.recv_area.pin()

    # ------------------------------------------------------------------ inputs

    def inputs(self, workload, stored: dict, trial: int) -> dict[str, Any]:
        """The call's inputs: trial ``trial`` of the workload, the state in the variant's dtype."""
        inputs = build_inputs(workload, self.definition, stored, self.device, trial)
        for name, value in inputs.items():  # stored tensors are shared: every call gets its own copy
            if isinstance(value, torch.Tensor) and name in stored:
                inputs[name] = value.clone()
        if inputs.get("state") is not None and self.state_dtype != torch.float32:
            inputs["state"] = inputs["state"].to(self.state_dtype)
        return inputs

    def arguments(self, inputs: dict, dests: dict[str, torch.Tensor]) -> dict[str, Any]:
        """What the positional DPS entry gets, by name in its order: the definition's inputs, then
        its outputs (an in-place solution's entry copies the state into ``new_state`` itself)."""
        given = {**inputs, **dests}
        return {name: given[name] for name in dps.argument_order(self.definition)}

    # ------------------------------------------------------------------ one checked call

    def checked_call(self, inputs: dict, dests: dict[str, torch.Tensor]) -> None:
        """Call ``run`` once on poisoned destinations and send its output bytes (or the problem)."""
        aliases = {name: t.view(t.shape) for name, t in dests.items()}  # our own views of the storage
        layout = {name: (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype) for name, t in dests.items()}
        args = self.arguments(inputs, dests)
        saved = {name: t.clone() for name, t in args.items() if isinstance(t, torch.Tensor) and name not in dests}
        try:
            self.entry.checked_call(args)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as exc:
            return self.channel.send(msg.Checked(outputs=[], problem=_failure_log(exc), problem_kind="exception"))
        problem = self.contract_problem(dests, layout)
        if problem:
            return self.channel.send(msg.Checked(outputs=[], problem=problem[1], problem_kind=problem[0]))
        self.send_outputs(aliases, modified=[name for name, before in saved.items()
                                             if not _same_bytes(args[name], before)])

    def contract_problem(self, dests, layout) -> tuple[str, str] | None:
        """``(kind, message)`` when the call broke the DPS contract (docs/solutions.md), else None."""
        for name, dest in dests.items():
            now = (dest.data_ptr(), tuple(dest.shape), dest.stride(), dest.dtype)
            if now != layout[name] or not dest.is_contiguous():
                return "contract", f"{name}: the destination was rebound or re-strided ({now} != {layout[name]})"
        return None

    def send_outputs(self, aliases: dict[str, torch.Tensor], call: int | None = None,
                     modified: list[str] = ()) -> None:
        """Output bytes of a correctness trial (``call`` None; ``modified``: the inputs it changed)
        or of timed call ``call``."""
        self.channel.send(msg.Checked(outputs=[msg.tensor_header(n, t) for n, t in aliases.items()], call=call,
                                      inputs_modified=list(modified)))
        for tensor in aliases.values():
            self.channel.send_tensor(tensor)

    # ------------------------------------------------------------------ one workload

    def workload(self, job: msg.Workload) -> None:
        workload = parse_workload(job.workload, self.definition, "workload sent by the judge")
        stored = {h.name: self.channel.recv_tensor(h, tuple(h.shape), h.dtype, self.device) for h in job.tensors}
        if job.core is not None:  # the core keeps its own copy of the stored inputs, in the variant's dtype
            self.core.set_workload(bytes.fromhex(job.core), {
                name: (t.to(self.state_dtype) if name == "state" else t).contiguous().cpu().view(torch.uint8).numpy()
                for name, t in stored.items()})
        inputs = None
        for trial in range(self.job.trials):
            inputs = self.inputs(workload, stored, trial)
            self.checked_call(inputs, destinations(self.definition, workload.axes, self.job.state_dtype, self.device))
            broken = cuda_context_broken(self.device)
            proceed = self.channel.recv(msg.Go).proceed
            if broken:  # say so, then leave: the judge starts a fresh worker for the next workload
                self.channel.send(msg.Failed(log="the CUDA context is unusable after this call", fatal=True))
                sys.exit(3)
            if not proceed:
                return self.channel.send(msg.WorkloadDone())
        while True:  # the judge drives the timing: chunks for the core, whole tiers for the worker's timers
            order = self.channel.recv(msg.CoreChunk, msg.TimeTier, msg.EndWorkload)
            if isinstance(order, msg.EndWorkload):
                return self.channel.send(msg.WorkloadDone())
            try:
                if isinstance(order, msg.CoreChunk):
                    self.channel.send(self.core_chunk(order))
                else:
                    self.time_tier(order.tier, order.index, workload, stored, inputs, job.timed_trial_base)
            except Exception as exc:
                fatal = cuda_context_broken(self.device)
                self.channel.send(msg.Failed(log="while timing:\n" + _failure_log(exc), fatal=fatal))
                if fatal:
                    sys.exit(3)

    # ------------------------------------------------------------------ chunks of the timing core

    def core_chunk(self, order: msg.CoreChunk) -> msg.CoreChunkDone:
        """Run one chunk in the core. The CUPTI tier's warm-up chunk also says whether the core can
        record with CUPTI here, and its timed chunks name the kernels the core counted."""
        result, error = self.core.run_chunk(bytes.fromhex(order.command))
        if error and cuda_context_broken(self.device):
            raise RuntimeError(error)
        extra = {}
        if order.tier == Tier.CUPTI:
            extra = dict(kernel_names=self.core.kernel_names()) if order.timed else \
                dict(unavailable=self.core.cupti_missing())
        return msg.CoreChunkDone(result=result.hex(), error=error and error[-4000:], **extra)

    def time_tier(self, tier: str, tier_index: int, workload, stored: dict, warm_inputs: dict, base: int) -> None:
        """One tier: every timed call gets fresh inputs of its own trial and re-poisoned destinations.
        The core's CUPTI recording, on since its cupti tier's chunks, ends first: this tier's timer
        runs as it would in a plain process (gdn_core.c ``recording_off``)."""
        self.core.recording_off()
        ring = DestinationRing(self, workload.axes)

        def setup(index: int | None) -> dict[str, Any]:
            if index is None:  # warm-up and estimate calls: not sampled, inputs of the last check trial
                inputs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in warm_inputs.items()}
            else:
                inputs = self.inputs(workload, stored, msg.timed_trial(base, tier_index, index))
            return self.arguments(inputs, ring.poisoned(index))


        def after(index: int) -> None:  # a value-returning entry's results into the call's destinations first
            self.entry.settle()
            ring.called(index)

        # the contest libraries' timers call the entry as flashinfer-bench does; the others time run
        timed = self.entry.contest_call if tier in LIBRARY_TIERS else self.entry.run
        self.channel.send(msg.TierBegin(tier=tier))
        try:
            result = measure(tier, timed, setup, self.flush, self.device, self.timing, after, positional=True)
        except Exception:
            with contextlib.suppress(Exception):  # answer what the judge asked before saying the tier failed
                ring.drain()
            raise
        ring.drain()
        if isinstance(result, TierUnavailable):
            return self.channel.send(msg.TierEnd(tier=tier, available=False, reason=result.reason))
        extra = result.extra
        self.channel.send(msg.TierEnd(
            tier=tier, available=True, samples_us=result.samples_us, value_us=result.value_us,
            trials=extra.get("trials"), span_median_us=extra.get("span_median_us"),
            kernels_per_call=extra.get("kernels_per_call"), kernel_names=extra.get("kernel_names", []),
            host_call_us=extra.get("host_call_us"), host_probe_us=extra.get("host_probe_us"),
            host_probe_trials_us=extra.get("host_probe_trials_us", [])))


class DestinationRing:
    """The destination sets of one tier's timed calls, and the judge's pending answers.

    Timed call ``i`` writes set ``i % size``; after it the worker says ``Called(i)``
    and goes on. The judge's ``Go`` for call ``i`` is read when the set is needed
    again (or at the tier's end): if it asks, the set's bytes are shipped first.
    The judge decides after the call was made, so a solution still cannot know,
    while a call runs, whether it will be verified.
    """

    def __init__(self, worker: "Worker", axes: dict):
        self.worker = worker
        set_bytes = msg.area_bytes(msg.destination_headers(worker.definition, axes, worker.job.state_dtype))
        self.size = max(1, min(RING_MAX_SETS, RING_BYTES // max(set_bytes, 1)))
        # the ring keeps the buffers; each call gets fresh views of them, so a solution that rebinds
        # (Tensor.set_) what it was handed changes nothing the worker ships or poisons next
        self.sets = [destinations(worker.definition, axes, worker.job.state_dtype, worker.device)
                     for _ in range(self.size)]
        self.outstanding: list[int] = []  # timed calls whose Go has not been read yet, oldest first
        self.answers: list[bool] = []  # the judge's answers read but not yet acted on, oldest first
        self.unreceipted = False  # the payload area holds a shipment the judge has not confirmed

    def poisoned(self, index: int | None) -> dict[str, torch.Tensor]:
        """The set for call ``index`` (warm-up calls: set 0), NaN-filled, once the judge is done with it."""
        slot = 0 if index is None else index % self.size
        while any(call % self.size == slot for call in self.outstanding):
            self.answer()
        for t in self.sets[slot].values():
            t.fill_(float("nan"))
        return {name: t.view(t.shape) for name, t in self.sets[slot].items()}

    def called(self, index: int) -> None:
        self.worker.channel.send(msg.Called(index=index))
        self.outstanding.append(index)

    def read(self) -> None:
        """One message of the judge's: a ``Go`` is queued, a ``Received`` frees the payload area."""
        message = self.worker.channel.recv(msg.Go, msg.Received)
        if isinstance(message, msg.Go):
            self.answers.append(message.proceed)
        else:
            self.unreceipted = False

    def next_answer(self) -> bool:
        """The judge's next ``Go`` (whether it verifies the oldest outstanding call)."""
        while not self.answers:
            self.read()
        return self.answers.pop(0)

    def await_receipt(self) -> None:
        """Wait until the judge has copied the last shipment out of the payload area."""
        while self.unreceipted:
            self.read()

    def answer(self) -> None:
        """Read the judge's answer for the oldest outstanding call; ship its outputs if asked."""
        index = self.outstanding.pop(0)
        if self.next_answer():
            self.await_receipt()
            if self.worker.device.startswith("cuda"):
                torch.cuda.synchronize()
            self.worker.send_outputs(self.sets[index % self.size], call=index)
            self.unreceipted = True

    def drain(self) -> None:
        """Answer every outstanding call, and see the last shipment received (the tier's end)."""
        while self.outstanding:
            self.answer()
        self.await_receipt()


def arm_core(device: str, key_fd: int, area_fd: int):
    """Import and arm the timing core (harness/judge/core.py): it reads the judge's key from its
    pipe and maps the capture area, and the worker gives both descriptors up to it. Runs before
    the solution is imported, so nothing of the solution's has run yet."""
    import _gdn_core  # the judge put the compiled core beside this process's private harness

    from harness.judge.core import cupti_library

    index, flush_bytes, cupti_flush_bytes, cupti_path = -1, 0, 0, ""

    if device.startswith("cuda"):
        chosen = torch.device(device).index
        index = torch.cuda.current_device() if chosen is None else chosen
        torch.cuda.set_device(index)
        torch.zeros(1, device=index)  # the device's primary context, current on this thread
        flush_bytes, cupti_flush_bytes = L2Flusher.size(index), L2Flusher.size(index, Tier.CUPTI)
        cupti_path = cupti_library()
    _gdn_core.arm(key_fd, area_fd, os.fstat(area_fd).st_size, index, flush_bytes, cupti_flush_bytes, cupti_path)
    return _gdn_core


def load(job: msg.Solution) -> tuple[Entry | None, msg.LoadFailed | None]:
    """Import the solution's positional DPS entry (harness/judge/dps.py), which imports the
    solution; ``(Entry, None)`` or ``(None, LoadFailed)``."""
    try:
        module = import_package(job.package_name, job.entry_module, job.package_dir)
        run_fn = getattr(module, "run", None)
        if not callable(run_fn):
            raise AttributeError(f"the entry module {job.entry_module} defines no callable run")
        found = {name: getattr(module, name, default) for name, default in dps.ENTRY_DEFAULTS.items()}
        return Entry(run=run_fn, contest_call=found["contest_call"] or run_fn, deliver=found["deliver"],
                     hands_over=bool(found["HANDS_OVER"])), None
    except Exception as exc:
        from harness.errors import SolutionUnsupported

        return None, msg.LoadFailed(skipped=isinstance(exc, SolutionUnsupported), log=_failure_log(exc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Judge worker: runs one solution (started by the judge only).")
    parser.add_argument("--read-fd", type=int, required=True)
    parser.add_argument("--write-fd", type=int, required=True)
    parser.add_argument("--recv-area-fd", type=int, required=True)
    parser.add_argument("--send-area-fd", type=int, required=True)
    parser.add_argument("--core-key-fd", type=int, required=True)
    parser.add_argument("--core-area-fd", type=int, required=True)
    args = parser.parse_args(argv)
    interrupts.unblock_in_child()  # a worker started without the zygote inherits the judge's blocked signals
    die_with_parent()
    channel = msg.Channel.worker_side(args.read_fd, args.write_fd, args.recv_area_fd, args.send_area_fd)
    job = channel.recv(msg.Solution)
    core = arm_core(job.device, args.core_key_fd, args.core_area_fd)  # before any code of the solution runs
    entry, failure = load(job)
    if failure is not None:
        channel.send(failure)
        return 0
    core.load(entry.run, entry.hands_over)
    worker = Worker(channel, job, entry, core)
    channel.send(msg.Ready())
    while True:
        message = channel.recv(msg.Workload, msg.Stop)
        if isinstance(message, msg.Stop):
            return 0
        worker.workload(message)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
