#!/usr/bin/env python3
"""Why the CUPTI tier read up to 7.7% more through the timing core than in the worker's loop at
B = 4-16 on an H100 (issue #28; results/judge-check/20261125-H100-core/README.md).

    python scripts/cupti_parity_probe.py OUT_DIR [--solutions cuda-v4,fla-recurrent] [--calls 200] [--placements N]

In this process, for sweep workloads at B = 4, 8, 16 and 64, one CUPTI recording times each
solution's calls made in each of :data:`VARIANTS`, which differ from the worker's loop in one of
the ways the core does:

- ``worker``: inputs drawn on the device per call (``build_inputs``), destinations fresh and
  NaN-filled by torch, L2 flushed by torch's ``zero_`` of an int32 buffer (a kernel);
- ``memset-flush``: the same, L2 flushed by the driver's ``cuMemsetD32Async`` (what the core does);
- ``h2d-inputs``: the random inputs copied from pinned host memory into buffers kept for the whole
  loop and the state copied from a pristine device copy (what the core does), torch's flush;
- ``core-like``: both.

The variants take turns call by call, so a drift of the clock is shared. Prints and writes
``OUT_DIR/cupti_parity_probe.txt``: the CUPTI kernel-sum median of each variant, and its ratio
to ``worker``'s. With ``--placements N`` it asks instead whether where the buffers lie moves the
figure: the ``core-like`` loop on N sets of buffers, each allocated apart, in turn.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.data.dataset import open_dataset  # noqa: E402
from harness.data.workloads import build_inputs, stored_tensors  # noqa: E402
from harness.judge import cupti  # noqa: E402
from harness.judge.solutions import discover, load_meta, load_solution  # noqa: E402
from harness.judge.timing import L2Flusher  # noqa: E402
from harness.judge.worker import destinations  # noqa: E402

VARIANTS = ("worker", "memset-flush", "h2d-inputs", "core-like")
BATCHES = (4, 8, 16, 64)


class DriverMemset:
    """The core's flush: ``cuMemsetD32Async`` of the same buffer on the legacy default stream."""

    def __init__(self, flusher: L2Flusher):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.cuda.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
        self.buffer = flusher.buffer

    def __call__(self) -> None:
        rc = self.cuda.cuMemsetD32Async(self.buffer.data_ptr(), 0, self.buffer.numel(), None)
        if rc:
            raise RuntimeError(f"cuMemsetD32Async: CUDA error {rc}")


class KeptInputs:
    """The core's inputs: fixed device buffers, random ones filled from pinned host copies, stored
    ones from a pristine device copy."""

    def __init__(self, workload, definition, stored, calls: int):
        first = build_inputs(workload, definition, stored, "cuda", 0)
        self.buffers = {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in first.items()}
        self.pristine = {n: stored[n].cuda().clone() for n in stored}
        self.host = [{n: v.cpu().pin_memory() for n, v in build_inputs(workload, definition, stored, "cuda", 1 + c).items()
                      if isinstance(v, torch.Tensor) and n not in stored} for c in range(calls)]

    def __call__(self, call: int) -> dict:
        for name, buffer in self.buffers.items():
            if name in self.pristine:
                buffer.copy_(self.pristine[name], non_blocking=True)
            elif name in self.host[call]:
                buffer.copy_(self.host[call][name], non_blocking=True)
        return dict(self.buffers)


def time_workload(run_fn, workload, dataset, calls: int) -> dict[str, float]:
    definition = dataset.definition
    stored = {n: t.cuda() for n, t in stored_tensors(workload, definition, dataset.files).items()}
    flushers = {"torch": L2Flusher("cuda")}
    flushers["memset"] = DriverMemset(flushers["torch"])
    kept = KeptInputs(workload, definition, stored, calls)
    kept_dests = destinations(definition, workload.axes, "float32", "cuda")
    plan = {"worker": ("device", "torch"), "memset-flush": ("device", "memset"),
            "h2d-inputs": ("kept", "torch"), "core-like": ("kept", "memset")}
    tags: dict[str, list[int]] = {v: [] for v in VARIANTS}
    with cupti.recording() as recording:
        for call in range(-5, calls):
            for variant in VARIANTS:
                inputs_from, flush_by = plan[variant]
                if inputs_from == "device":
                    drawn = build_inputs(workload, definition, stored, "cuda", 1 + max(call, 0))
                    drawn = {n: v.clone() if n in stored else v for n, v in drawn.items()}  # as Worker.inputs
                    args = dict(drawn, **destinations(definition, workload.axes, "float32", "cuda"))
                else:
                    for tensor in kept_dests.values():
                        tensor.fill_(float("nan"))
                    args = dict(kept(max(call, 0)), **kept_dests)
                recorded_call(recording, run_fn, args, flushers[flush_by])
                if call >= 0:
                    tags[variant].append(len(recording.tags) - 1)
        records = recording.collect()
    return {v: statistics.median(records[i].kernel_sum_us for i in tags[v]) for v in VARIANTS}


def recorded_call(recording, run_fn, args: dict, flush) -> None:
    """One call on a flushed, idle GPU, between the recorder's call marks."""
    flush()
    torch.cuda.synchronize()
    recording.begin_call()
    try:
        run_fn(args)
    finally:
        recording.end_call()


def time_placements(run_fn, workload, dataset, calls: int, sets: int) -> list[float]:
    """The ``core-like`` loop's CUPTI median on each of ``sets`` sets of kept buffers (allocated one
    after another, so each sits at its own device addresses), the sets taking turns call by call."""
    definition = dataset.definition
    stored = {n: t.cuda() for n, t in stored_tensors(workload, definition, dataset.files).items()}
    flush = L2Flusher("cuda")
    kept = [(KeptInputs(workload, definition, stored, calls), destinations(definition, workload.axes, "float32", "cuda"))
            for _ in range(sets)]
    tags: list[list[int]] = [[] for _ in range(sets)]
    with cupti.recording() as recording:
        for call in range(-5, calls):
            for i, (inputs, dests) in enumerate(kept):
                for tensor in dests.values():
                    tensor.fill_(float("nan"))
                args = dict(inputs(max(call, 0)), **dests)
                recorded_call(recording, run_fn, args, flush)
                if call >= 0:
                    tags[i].append(len(recording.tags) - 1)
        records = recording.collect()
    return [statistics.median(records[j].kernel_sum_us for j in t) for t in tags]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--solutions", default="cuda-v4,fla-recurrent")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--placements", type=int, default=0,
                        help="instead: the core-like loop on this many sets of kept buffers (does placement matter?)")
    args = parser.parse_args()
    dataset = open_dataset("sweep", show_progress=False)
    picked = [next(w for w in dataset.workloads if w.batch_size == b) for b in BATCHES]
    lines = [f"GPU {torch.cuda.get_device_name()}; {args.calls} calls a variant, variants in turn; "
             "CUPTI kernel-sum median µs (ratio to worker)", "",
             "| solution | B | " + " | ".join(VARIANTS) + " |", "|---|---|" + "---|" * len(VARIANTS)]
    solutions = discover()
    if args.placements:
        lines[0] = f"GPU {torch.cuda.get_device_name()}; {args.calls} calls a set of buffers, sets in turn; CUPTI median µs"
        lines[2:] = ["| solution | B | " + " | ".join(f"set {i}" for i in range(args.placements)) + " | max/min |",
                     "|---|---|" + "---|" * (args.placements + 1)]
    for name in args.solutions.split(","):
        run_fn = load_solution(load_meta(solutions[name])).run
        for workload in picked:
            if args.placements:
                found = time_placements(run_fn, workload, dataset, args.calls, args.placements)
                lines.append(f"| {name} | {workload.batch_size} | " + " | ".join(f"{m:.3f}" for m in found)
                             + f" | {max(found) / min(found):.3f} |")
                print(lines[-1], flush=True)
                continue
            medians = time_workload(run_fn, workload, dataset, args.calls)
            base = medians["worker"]
            cells = [f"{medians[v]:.3f} ({medians[v] / base:.3f})" for v in VARIANTS]
            lines.append(f"| {name} | {workload.batch_size} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "cupti_parity_probe.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
