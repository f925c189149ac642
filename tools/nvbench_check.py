"""NVBench as an independent fifth timer (issue #29, item 4): NVIDIA's benchmarking library through
its Python bindings (cuda-bench 0.3.0, ``import cuda.bench``) times the copy and own solutions in a
plain process, beside FlashInfer's CUPTI and events timers of the same calls (``tools/tier_parity.py``'s
plain-process timers), and says how far apart they are.

    python -m tools.nvbench_check --out OUT [--subjects copy,cuda-v4,fla-recurrent] [--batches 1,64]

What NVBench does for each sample of its *cold* measurement (the only one asked for here: its
batched, hot-L2 loop is off): it flushes L2, holds the stream with its blocking kernel while the
call is launched, times the call with a CUDA event pair on that stream, and stops once the samples'
relative deviation settles (its default ``stdrel`` criterion). The blocking kernel keeps the host's
launch time out of the event pair, which neither the harness's events tier nor FlashInfer's events
timer does: the expected outcome is NVBench close to CUPTI, under events for Python-launched calls.

A subject is launched inside NVBench's callback on NVBench's stream (torch's current stream is set
to it; a TVM-FFI entry takes torch's current stream). A call whose kernels went to another stream
would read near zero: the report compares every NVBench figure with CUPTI's for that reason.

Writes ``OUT/nvbench.json`` (NVBench's own output, read back with ``cuda.bench.results``),
``OUT/nvbench_check.json`` and ``OUT/nvbench_check.md``. Needs a CUDA GPU, cuda-bench with
cuda-bindings 13, flashinfer (its timers) and flashinfer-bench (the subjects' sweep workloads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from harness.run_lock import writing_into

#: The subjects and batch sizes the issue asks for: the copy and two own solutions at B = 1 and 64.
DEFAULT_SUBJECTS, DEFAULT_BATCHES = ("copy", "cuda-v4", "fla-recurrent"), (1, 64)
#: NVBench's summary of a cold measurement's mean GPU time (seconds), used where the JSON has no
#: per-sample times to take a median from.
COLD_MEAN_TAG = "nv/cold/time/gpu/mean"


def benchmark_name(subject: str, batch: int) -> str:
    """The NVBench benchmark name of one (subject, batch size)."""
    return f"{subject} B={batch}"


def register_subject(bench, subject: str, batch: int, workdir: Path, keep: list) -> None:
    """Register one NVBench benchmark: the subject's call (``tools.tier_parity.subject_call``) on
    the sweep workload of batch ``batch``, cold measurement only, the state's bytes read and written
    declared (NVBench then reports bandwidth). ``keep`` holds the call's tensors for the run."""
    import torch

    from tools.tier_parity import subject_call

    workdir.mkdir(parents=True, exist_ok=True)
    fn, args = subject_call(subject, batch, workdir)
    keep.append((fn, args))
    state_bytes = args[0].numel() * args[0].element_size() if subject == "copy" else \
        args[3].numel() * args[3].element_size()  # the DPS entry's 4th argument is the state

    def benchmark(state) -> None:
        state.add_global_memory_reads(state_bytes)
        state.add_global_memory_writes(state_bytes)

        def launch(launch) -> None:
            _, handle = launch.get_stream().__cuda_stream__()
            with torch.cuda.stream(torch.cuda.ExternalStream(handle)):
                fn(*args)

        state.exec(launch, batched=False)

    bench.register(benchmark).set_name(benchmark_name(subject, batch))


def nvbench_figures(json_path: Path) -> dict[str, dict]:
    """Per benchmark name, NVBench's figure of its (one) state from its JSON output: ``us`` (µs; the
    median of the per-sample times where the output has them, else the cold mean), ``how``
    (``median of N samples`` or ``mean``), and ``bw_utilization`` where NVBench reported it.

    Raises:
        ValueError: a benchmark state with neither samples nor the cold mean.
    """
    from cuda.bench.results import BenchmarkResult

    figures = {}
    for name, sub in BenchmarkResult.from_json(json_path).items():
        for state in sub:
            samples = state.center(lambda values: list(values))
            mean = state.summaries.get(COLD_MEAN_TAG)
            if samples:
                us, how = statistics.median(samples) * 1e6, f"median of {len(samples)} samples"
            elif mean is not None and mean.value is not None:
                us, how = float(mean.value) * 1e6, "mean"
            else:
                raise ValueError(f"{json_path}: benchmark {name!r} has no sample times and no {COLD_MEAN_TAG}")
            figures[name] = {"us": us, "how": how, "bw_utilization": state.bw}
    return figures


def compare(nvbench: dict[str, dict], plain: dict[tuple[str, int], dict]) -> list[dict]:
    """Rows of the report: per (subject, B) the NVBench figure beside the plain-process CUPTI and
    events figures (µs, :func:`tools.tier_parity.plain_figures`) and the two ratios."""
    rows = []
    for (subject, batch), timers in sorted(plain.items()):
        figure = nvbench.get(benchmark_name(subject, batch))
        if figure is None:
            continue
        cupti, events = timers.get("cupti"), timers.get("events")
        rows.append({"subject": subject, "batch_size": batch, "nvbench_us": figure["us"], "how": figure["how"],
                     "cupti_us": cupti, "events_us": events,
                     "nvbench_over_cupti": figure["us"] / cupti if cupti else None,
                     "nvbench_over_events": figure["us"] / events if events else None})
    return rows


def markdown(rows: list[dict], header: str) -> str:
    """The report's table."""
    lines = [header, "", "| subject | B | NVBench µs | how | CUPTI µs | events µs | NVBench / CUPTI | NVBench / events |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = lambda v: f"{v:.3f}" if v is not None else "—"  # noqa: E731
        lines.append(f"| {r['subject']} | {r['batch_size']} | {r['nvbench_us']:.3f} | {r['how']} | "
                     f"{r['cupti_us']:.3f} | {r['events_us']:.3f} | {ratio(r['nvbench_over_cupti'])} | "
                     f"{ratio(r['nvbench_over_events'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the outputs")
    parser.add_argument("--subjects", default=",".join(DEFAULT_SUBJECTS), help="copy and own solutions")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)), help="batch sizes (sweep's)")
    args = parser.parse_args(argv)
    subjects = args.subjects.split(",")
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        parser.error(f"--batches {args.batches!r}: comma-separated batch sizes of the sweep set, e.g. 1,64")
    with writing_into([args.out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        return _check(subjects, batches, args.out)


def _check(subjects: list[str], batches: list[int], out: Path) -> int:
    """NVBench, then FlashInfer's timers in fresh processes, on ``subjects`` at ``batches``; the outputs in ``out``."""
    out.mkdir(parents=True, exist_ok=True)

    import cuda.bench as bench

    from harness.facts import Tier
    from harness.judge.timing import TimingConfig
    from tools.tier_parity import plain_figures
    from tools.timing_proof import in_fresh_process

    keep: list = []
    with tempfile.TemporaryDirectory() as workdir:
        for subject in subjects:
            for batch in batches:
                register_subject(bench, subject, batch, Path(workdir) / f"{subject}-{batch}", keep)
        json_path = out / "nvbench.json"
        bench.run_all_benchmarks(["nvbench_check", "--json", str(json_path)])
        keep.clear()
    # FlashInfer's timers in processes of their own (one CUPTI client each), the clock warmed first,
    # on one argument set as NVBench's benchmark has (placement moves a B <= 8 figure: docs/timing.md)
    plain = {(s, b): in_fresh_process(plain_figures, s, b, TimingConfig().warm_s, None, (Tier.CUPTI, Tier.EVENTS),
                                      1) for s in subjects for b in batches}
    rows = compare(nvbench_figures(json_path), plain)
    (out / "nvbench_check.json").write_text(json.dumps(rows, indent=1) + "\n")
    report = markdown(rows, f"# NVBench beside FlashInfer's CUPTI and events timers (cuda-bench {bench.__version__})")
    (out / "nvbench_check.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
