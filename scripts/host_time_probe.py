"""Probe (issue #29, item 1): where a timed call's host time goes in the judge's worker, against
a plain process, for a Triton (fla-recurrent) and a native (cuda-v4) solution.

    python scripts/host_time_probe.py OUT [--solutions fla-recurrent,cuda-v4] [--batches 1,8,64]

1. Plain process (spawned, one per subject and B): the positional DPS entry on the sweep
   workload's inputs (tools.tier_parity.subject_call), 200 calls after 20, each: L2 flush
   (a memset of the harness's flush size), then the event pair around the call, the host time
   of the call (perf_counter_ns) beside it. Modes: ``busy`` (the GPU still flushing when the call
   launches, as FlashInfer's bench_gpu_time), ``idle`` (synchronize after the flush: every
   launch latency inside the pair), ``host-writes`` (``busy`` after writing as many host bytes as
   the call's tensors hold, as the core does when it makes the inputs: are the CPU caches cold
   for the launch?), and ``busy`` again after one FlashInfer CUPTI session in the
   same process (``after-cupti``: does CUPTI leave a per-launch cost behind?).
2. The harness (run_local.py on the sweep set) three ways: ``--tiers events`` (CUPTI never on in
   the worker), ``--tiers cupti,events``, and ``--tiers events`` with the zygote off
   (GDN_JUDGE_ZYGOTE=0: a worker started fresh, not forked). Per (solution, B): the events
   median and the worker's host time of run() (``host_call_us``).

Writes OUT/host_time.json and prints a table. A probe: once it has answered, its command line
and answer go to the results notes and it leaves scripts/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.records.store import load_run  # noqa: E402
from tools.timing_proof import in_fresh_process, run_local  # noqa: E402


def _back_to_back(fn, args, flush, calls: int = 200, warm: int = 20) -> dict:
    """FlashInfer's bench_gpu_time loop, no synchronize between calls: flush, event, call, event."""
    import torch

    for _ in range(warm):
        flush()
        fn(*args)
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for start, end in pairs:
        flush()
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize()
    return {"host_us": float("nan"), "events_us": statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs)}


def _timed_calls(fn, args, flush, idle: bool, calls: int = 200, warm: int = 20, written=None) -> dict:
    import torch

    host, events = [], []
    for i in range(warm + calls):
        if written is not None:  # the host memory the core writes per call (the inputs it makes)
            written.fill_(float(i))
        flush()
        if idle:
            torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter_ns()
        fn(*args)
        t1 = time.perf_counter_ns()
        end.record()
        end.synchronize()
        if i >= warm:
            host.append((t1 - t0) / 1e3)
            events.append(start.elapsed_time(end) * 1e3)
    return {"host_us": statistics.median(host), "events_us": statistics.median(events)}


def plain(subject: str, batch: int) -> dict:
    """The modes of part 1 for one subject and batch size (µs)."""
    import torch
    from flashinfer.testing import bench_gpu_time, bench_gpu_time_with_cupti

    from harness.judge.timing import L2Flusher
    from tools.tier_parity import subject_call

    with tempfile.TemporaryDirectory() as workdir:
        fn, args = subject_call(subject, batch, Path(workdir))
        scratch = torch.empty(L2Flusher.size(0) // 4, dtype=torch.int32, device="cuda")
        flush = scratch.zero_
        written = torch.empty(sum(a.numel() for a in args if isinstance(a, torch.Tensor)), dtype=torch.float32)
        found = {"busy": _timed_calls(fn, args, flush, idle=False), "idle": _timed_calls(fn, args, flush, idle=True),
                 "host-writes": _timed_calls(fn, args, flush, idle=False, written=written)}
        l2 = torch.cuda.get_device_properties(0).L2_cache_size  # FlashInfer flushes 2x L2
        small = torch.empty(2 * l2, dtype=torch.int8, device="cuda").zero_
        found["busy, 2xL2 flush"] = _timed_calls(fn, args, small, idle=False)
        found["back-to-back, 2xL2"] = _back_to_back(fn, args, small)
        found["back-to-back, 256MB"] = _back_to_back(fn, args, flush)
        found["flashinfer events"] = {"host_us": float("nan"), "events_us": 1e3 * statistics.median(
            bench_gpu_time(fn, input_args=args, enable_cupti=False, use_cuda_graph=False, cold_l2_cache=True))}
        bench_gpu_time_with_cupti(fn, input_args=args, cold_l2_cache=True)
        found["after-cupti"] = _timed_calls(fn, args, flush, idle=False)
    return found


def harness(solutions: list[str], batches: set[int], scratch: Path) -> dict:
    """Part 2: ``{way: {"solution B": {events_us, host_call_us}}}``."""
    ways = {"events only": (["--tiers", "events"], {}), "cupti,events": (["--tiers", "cupti,events"], {}),
            "events, no zygote": (["--tiers", "events"], {"GDN_JUDGE_ZYGOTE": "0"})}
    found = {}
    for way, (tiers, env) in ways.items():
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            started = time.monotonic()
            run_dir = run_local(["--algo", ",".join(solutions), "--workloads", "sweep", *tiers],
                                scratch / way.replace(" ", "_").replace(",", ""))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        rows = {}
        for t in load_run(run_dir).traces:
            b = t.workload.axes.get("batch_size")
            figure = t.evaluation.performance.tiers.get("events") if t.evaluation.performance else None
            if b in batches and t.solution in solutions and figure is not None:
                rows[f"{t.solution} {b}"] = {"events_us": figure.value_us, "host_call_us": figure.host_call_us}
        found[way] = {"seconds": round(time.monotonic() - started, 1), "rows": rows}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--solutions", default="fla-recurrent,cuda-v4")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--plain-only", action="store_true", help="part 1 only")
    args = parser.parse_args(argv)
    solutions, batches = args.solutions.split(","), {int(b) for b in args.batches.split(",")}
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"plain": {}, "harness": {}}
    for subject in solutions:
        for b in sorted(batches):
            report["plain"][f"{subject} {b}"] = in_fresh_process(plain, subject, b)
            print(subject, b, report["plain"][f"{subject} {b}"], flush=True)
    if not args.plain_only:
        with tempfile.TemporaryDirectory() as scratch:
            report["harness"] = harness(solutions, batches, Path(scratch))
    (args.out / "host_time.json").write_text(json.dumps(report, indent=1))
    print(f"{'subject B':22} {'plain busy host/ev':>20} {'idle host/ev':>16} {'host-writes':>16} {'after-cupti':>16} "
          + " ".join(f"{w:>22}" for w in report["harness"]))
    for key, modes in report["plain"].items():
        cells = [f"{m['host_us']:7.1f}/{m['events_us']:6.1f}" for m in modes.values()]
        runs = []
        for way in report["harness"].values():
            row = way["rows"].get(key, {})
            runs.append(f"{row.get('host_call_us') or float('nan'):9.1f}/{row.get('events_us') or float('nan'):9.1f}")
        print(f"{key:22} {cells[0]:>20} {cells[1]:>16} {cells[2]:>16} {cells[3]:>16} " + " ".join(f"{r:>22}" for r in runs))
    print("harness seconds:", {w: v["seconds"] for w, v in report["harness"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
