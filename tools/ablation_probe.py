"""Which part of cuda-v4's work costs time at small B? An ablation probe of issue #33's last
0.3 µs between cuda-v4 and a copy of the state (results/cuda-notes.md):

    python -m tools.ablation_probe --out DIR [--batches 1,2,4,8] [--repeats 3]

For each batch size, in a process of its own (one CUPTI client): cuda-v4 built once per
:data:`ABLATIONS` entry (``-DGDN_V4_ABLATE=<flags>``, kernel.cu's ablation switches: each build
leaves one part of the work out, and its results are wrong by design), each launching the
variant its launch table picks for that B on this GPU, beside the copy floor's two kernels
(torch ``copy_`` and the Triton streaming copies of :mod:`harness.judge.stream_copy`), all on
the sweep workload's inputs. Each subject is timed with FlashInfer's
``bench_gpu_time_with_cupti(cold_l2_cache=True)`` (median of its calls) after a short clock
warm-up, ``--repeats`` times in rounds over the subjects. Writes ``DIR/ablation_probe.json``
and prints, per B, each subject's median over the repeats, its range, and its excess over the
full kernel and over the floor (µs). Needs a CUDA GPU, nvcc, flashinfer-python and cupti-python.

The prediction it tests (written 2026-11-26, before any run; H100, B = 1, where the full kernel
reads 2.05-2.11 µs and the floor 1.79): Nsight's source page priced ~550 cycles (~0.28 µs) after
the state's loads land (the lane exchanges ~300, the wait for ``v`` ~215) and ~400 of setup.
So: ``copy`` (the state copied with the kernel's geometry) within 0.05 µs of the floor (the
geometry costs nothing: the scatter tune tied ten geometries); ``no-exchange`` at least 0.10 µs
under ``full``; ``no-operands`` at most 0.05 µs under ``full`` (their loads fly beside the
state's). If ``no-exchange`` saves nothing, the exchanges are not on the path that sets the
kernel's time, as the one-tick tie of the ``v``-early branch already suggests for ``v``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tools.timing_proof import in_fresh_process

#: name -> kernel.cu's GDN_V4_ABLATE flags (kAblateOperands 1, kAblateReduction 2, kAblateMath 4).
ABLATIONS = {"full": 0, "no-operands": 1, "no-exchange": 2, "no-operands-no-exchange": 3, "copy": 4}
#: Seconds of back-to-back calls before each timing: an idle H100 times µs kernels up to 2x slow
#: (tools.tier_parity.warm).
WARM_S = 0.3
TORCH_COPY = "torch copy_"


def ablation_define(flags: int) -> str:
    """The nvcc macro of one ablation build (``-D`` without the dash)."""
    return f"GDN_V4_ABLATE={flags}"


def build_ablations(workdir: Path) -> dict:
    """``{name: cuda-v4 entry module}``, one build per :data:`ABLATIONS` entry, each loaded into
    this process from a folder of its own under ``workdir`` (modules stay distinct: each holds
    its own kernel.so)."""
    from harness.judge.solutions import load_meta, load_solution
    from harness.paths import SOLUTIONS_DIR

    meta = load_meta(SOLUTIONS_DIR / "cuda-v4")
    builds = {}
    for name, flags in ABLATIONS.items():
        module = load_solution(meta, workdir / name, defines=(ablation_define(flags),) if flags else ())
        module.load()
        builds[name] = module
    return builds


def sweep_inputs(batch: int) -> dict:
    """The sweep workload of batch ``batch``: its inputs on the GPU and NaN-filled destinations."""
    from harness.data.dataset import open_dataset
    from harness.data.workloads import materialize_inputs
    from harness.judge.worker import destinations

    dataset = open_dataset("sweep", show_progress=False)
    workload = next(w for w in dataset.workloads if w.batch_size == batch)
    inputs = materialize_inputs(workload, dataset.definition, dataset.files, "cuda", 0)
    return {**inputs, **destinations(dataset.definition, workload.axes, "float32", "cuda")}


def same_as_full(builds: dict, inputs: dict) -> list[str]:
    """The ablations whose results equal the full build's: none, if each build loaded is its own
    (an ablation that changed nothing would time the full kernel under another name)."""
    import torch

    def results(module) -> tuple:
        given = {**inputs, "output": inputs["output"].clone(), "new_state": inputs["new_state"].clone()}
        module.run(given)
        return given["output"], given["new_state"]

    full = results(builds["full"])
    return [name for name, module in builds.items() if name != "full"
            and all(torch.equal(a, b) for a, b in zip(results(module), full))]


def subjects(builds: dict, inputs: dict) -> dict:
    """``{name: zero-argument call}``: every ablation build's ``run`` on ``inputs`` and the copy
    floor's kernels on its state (each copy config of the floor's rule for that size)."""
    import torch

    from harness.judge.stream_copy import candidate_configs, stream_copy

    calls = {name: (lambda module=module: module.run(inputs)) for name, module in builds.items()}
    state, target = inputs["state"], torch.empty_like(inputs["state"])
    calls[TORCH_COPY] = lambda: target.copy_(state)
    for config in candidate_configs(state.numel() * state.element_size()):
        calls[config.method()] = lambda config=config: stream_copy(state, target, config)
    return calls


def probe_batch(batch: int, repeats: int) -> dict:
    """One batch size: ``{"launch": config, "same_as_full": [...], "times_us": {subject: [µs per repeat]}}``."""
    from flashinfer.testing import bench_gpu_time_with_cupti

    from tools.tier_parity import warm
    from tools.tune.cuda_v4 import config_name

    with tempfile.TemporaryDirectory() as workdir:
        builds = build_ablations(Path(workdir))
        inputs = sweep_inputs(batch)
        same = same_as_full(builds, inputs)
        calls = subjects(builds, inputs)
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(repeats):
            for name, call in calls.items():
                warm(call, (), WARM_S)
                times[name].append(statistics.median(bench_gpu_time_with_cupti(call, cold_l2_cache=True)) * 1e3)
        launch = config_name(builds["full"].launch_config(batch))
    return {"launch": launch, "same_as_full": same, "times_us": times}


def summarize(batch: int, probed: dict) -> list[dict]:
    """Rows of one batch size: each subject's median over the repeats (µs), its range, and its
    excess over the full kernel and over the floor (the fastest copy's median)."""
    medians = {name: statistics.median(times) for name, times in probed["times_us"].items()}
    floor = min(value for name, value in medians.items() if name not in ABLATIONS)
    return [{"batch_size": batch, "subject": name, "median_us": value, "min_us": min(probed["times_us"][name]),
             "max_us": max(probed["times_us"][name]), "minus_full_us": value - medians["full"],
             "over_floor_us": value - floor} for name, value in medians.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    from harness.records.environment import git_commit, hardware_name

    if not torch.cuda.is_available():
        print("error: the ablation probe needs a CUDA GPU", file=sys.stderr)
        return 2
    rows, launches = [], {}
    for batch in sorted({int(b) for b in args.batches.split(",")}):
        probed = in_fresh_process(probe_batch, batch, max(1, args.repeats))
        if probed["same_as_full"]:
            print(f"error: B={batch}: {', '.join(probed['same_as_full'])} computed what the full build did: "
                  "the ablation switches did nothing", file=sys.stderr)
            return 1
        launches[batch] = probed["launch"]
        for row in summarize(batch, probed):
            rows.append(row)
            print(f"B={batch} {row['subject']:<34} {row['median_us']:.3f} µs ({row['min_us']:.3f}-{row['max_us']:.3f})"
                  f"  vs full {row['minus_full_us']:+.3f}  over floor {row['over_floor_us']:+.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
              "hardware": hardware_name("cuda"), "ablations": ABLATIONS, "launch_configs": launches,
              "timer": "flashinfer.testing.bench_gpu_time_with_cupti(cold_l2_cache=True), median", "rows": rows}
    (args.out / "ablation_probe.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
