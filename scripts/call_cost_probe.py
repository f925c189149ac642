#!/usr/bin/env python3
"""What one timed call costs the worker, apart from the kernel (issue #17: contest-v2 in 8 minutes).

    python scripts/call_cost_probe.py OUT_DIR [--workloads contest-v2] [--pick 0,53]

In this process (no judge, no worker process), for the picked workloads of the set:

1. **A fast call's host costs**, with a one-kernel ``run`` (a copy into ``new_state``): the
   worker's per-call input set-up (:meth:`harness.judge.worker.Worker.inputs` and the destination
   ring's NaN fill), the L2 flush, and each GPU tier as the worker runs it (wall seconds, calls,
   seconds a call).
2. **A traced pt-reference call**: the definition's reference at the workload's batch size,
   untraced and under the CUPTI tier's recording in each of :data:`CUPTI_MODES` (API kinds on
   around the call or all along, query API calls recorded or not), with the activity records
   CUPTI delivered per call by kind and the commonest API callback ids; a cProfile of one
   traced call (top functions by own time).

The CUPTI tier of part 1 also runs in each of :data:`CUPTI_MODES`.

Writes ``OUT_DIR/call_cost_probe.txt`` and prints it.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import pstats
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.data.dataset import open_dataset  # noqa: E402
from harness.data.workloads import stored_tensors  # noqa: E402
from harness.judge import cupti  # noqa: E402
from harness.judge import protocol as msg  # noqa: E402
from harness.judge.timing import L2Flusher, TimingConfig, measure  # noqa: E402
from harness.judge.worker import DestinationRing, Worker  # noqa: E402


class _Quiet:
    """A channel that drops what the worker sends and answers every ``Go`` with 'do not verify'."""

    def send(self, message):
        pass

    def recv(self, *expected):
        return msg.Go(proceed=False)


def _worker(dataset, run_fn) -> Worker:
    job = msg.Solution(package_dir="", package_name="probe", entry_module="main", inplace_state=False,
                       state_dtype="float32", device="cuda", definition=dataset.definition.raw,
                       tiers=["cupti", "events", "sync"], trials=3, timing=vars(TimingConfig()))
    return Worker(_Quiet(), job, run_fn)


def _seconds(action, repeat: int) -> float:
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(repeat):
        action()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / repeat


def fast_call_costs(dataset, workload, stored, lines: list[str]) -> None:
    def copy_run(args):
        args["new_state"].copy_(args["state"])
        args["output"].zero_()
        return {"output": args["output"], "new_state": args["new_state"]}

    worker = _worker(dataset, copy_run)
    ring = DestinationRing(worker, workload.axes)
    trial = iter(range(10_000, 1_000_000))
    inputs_s = _seconds(lambda: worker.inputs(workload, stored, next(trial)), 200)
    poison_s = _seconds(lambda: ring.poisoned(None), 200)
    flush_s = _seconds(worker.flush, 200)
    lines.append(f"- per call: inputs {inputs_s * 1e6:.0f} µs, NaN fill of a destination set {poison_s * 1e6:.0f} µs, "
                 f"L2 flush {flush_s * 1e6:.0f} µs (wall, host and GPU)")
    warm = worker.inputs(workload, stored, 0)
    for tier, mode in [("cupti", m) for m in CUPTI_MODES] + [("events", None), ("sync", None)]:
        ring = DestinationRing(worker, workload.axes)
        saved = _cupti_mode(*mode[1:]) if mode else None

        def setup(index):
            inputs = ({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in warm.items()}
                      if index is None else worker.inputs(workload, stored, 5000 + index))
            return worker.arguments(inputs, ring.poisoned(index))

        began = time.perf_counter()
        try:
            result = measure(tier, copy_run, setup, worker.flush, "cuda", worker.timing, ring.called)
            ring.drain()
        finally:
            if saved:
                cupti.API_WINDOW, cupti.QUIET_APIS = saved
        wall = time.perf_counter() - began
        calls = getattr(result, "iters", 0)
        lines.append(f"- {tier}{', ' + mode[0] if mode else ''}: {wall:.3f} s for {calls} timed calls ({wall / max(calls, 1) * 1e3:.2f} ms a call "
                     f"with warm-up and estimate), figure {getattr(result, 'value_us', float('nan')):.2f} µs")


def _reference_run():
    spec = importlib.util.spec_from_file_location("probe_reference", REPO / "solutions/pt-reference/reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def _counting_sink(kinds: Counter, cbids: Counter):
    """A buffer callback that tallies the records by kind (and API callback id), then converts them."""
    original = cupti._Sink.buffer_completed
    ak = cupti._import_cupti().ActivityKind
    api = {int(ak.RUNTIME): "runtime", int(ak.DRIVER): "driver"}

    def counting(self, activities):
        activities = list(activities)
        for a in activities:
            kinds[int(a.kind)] += 1
            if int(a.kind) in api:
                cbids[(api[int(a.kind)], int(getattr(a, "cbid", -1)))] += 1
        original(self, activities)

    return original, counting


#: (label, API_WINDOW, QUIET_APIS) of the recordings compared
CUPTI_MODES = (("API window, query calls quiet", True, None), ("API window, every call", True, {}),
               ("API kinds all along, query calls quiet", False, None))


def _cupti_mode(window: bool, quiet) -> tuple:
    saved = (cupti.API_WINDOW, cupti.QUIET_APIS)
    cupti.API_WINDOW = window
    if quiet is not None:
        cupti.QUIET_APIS = quiet
    return saved


def traced_reference_costs(dataset, workload, stored, lines: list[str]) -> None:
    reference = _reference_run()
    worker = _worker(dataset, None)
    names = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "scale")
    inputs = worker.inputs(workload, stored, 0)

    def fn(args):
        reference(*[args.get(n) for n in names])

    def setup(index=None):
        return inputs

    untraced = min(_seconds(lambda: fn(inputs), 1) for _ in range(3))
    lines.append(f"- pt-reference, untraced call: {untraced:.4f} s")
    ak = cupti._import_cupti().ActivityKind
    named = {int(getattr(ak, n)): n for n in ("RUNTIME", "DRIVER", "EXTERNAL_CORRELATION", "CONCURRENT_KERNEL",
                                              "MEMCPY", "MEMSET")}
    calls = 3
    for label, window, quiet in CUPTI_MODES:
        saved = _cupti_mode(window, quiet)
        try:
            began = time.perf_counter()
            records = cupti.time_calls_with_cupti(fn, setup, worker.flush, iters=calls, warmup=0)
            wall = (time.perf_counter() - began) / calls
            kinds, cbids = Counter(), Counter()
            original, counting = _counting_sink(kinds, cbids)
            cupti._Sink.buffer_completed = counting
            try:
                cupti.time_calls_with_cupti(fn, setup, worker.flush, iters=calls, warmup=0)
            finally:
                cupti._Sink.buffer_completed = original
        finally:
            cupti.API_WINDOW, cupti.QUIET_APIS = saved
        per_call = {named.get(k, k): round(v / calls) for k, v in kinds.most_common()}
        lines.append(f"- pt-reference traced, {label}: {wall:.4f} s a call (kernel sum "
                     f"{statistics.median(r.kernel_sum_us for r in records):.1f} µs, {records[0].n_kernels} kernels); "
                     f"records a call {per_call}; commonest API calls {[(k, round(v / calls)) for k, v in cbids.most_common(6)]}")
    profiler = cProfile.Profile()
    profiler.enable()
    cupti.time_calls_with_cupti(fn, setup, worker.flush, iters=1, warmup=0)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(8)
    lines.append("  cProfile of one traced call, the default mode (own time):\n" + "\n".join(
        "    " + line for line in text.getvalue().splitlines() if line.strip())[:3000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--workloads", default="contest-v2")
    parser.add_argument("--pick", default="0,53", help="indices of the workloads (comma list)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dataset = open_dataset(args.workloads, show_progress=False)
    lines = [f"{torch.cuda.get_device_name()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    for index in (int(i) for i in args.pick.split(",")):
        workload = dataset.workloads[index]
        stored = {n: t.cuda() for n, t in stored_tensors(workload, dataset.definition, dataset.files).items()}
        lines.append(f"\n## {args.workloads}[{index}], B = {workload.batch_size}")
        fast_call_costs(dataset, workload, stored, lines)
        traced_reference_costs(dataset, workload, stored, lines)
        print("\n".join(lines[-12:]), flush=True)
    text = "\n".join(lines) + "\n"
    (args.out / "call_cost_probe.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
