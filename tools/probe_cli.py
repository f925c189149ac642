"""What the one-question GPU probes share (tools/placement_probe.py, tools/events_loop_probe.py, tools/code_warm_probe.py,
tools/ablation_probe.py, tools/idle_start_probe.py, tools/l2_persist_probe.py,
tools/core_layout_probe.py): their command line (``--out DIR --batches B,B --repeats N``), its
errors (a clear line and exit 2, never a traceback), each measured point's spread over the
repeats, the loop over batch sizes in fresh processes, and the JSON report with the date, commit and GPU it was measured on;
for a probe with nothing more to its command line, the whole of it (:func:`run_probe`)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.run_lock import writing_into


def probe_parser(doc: str, batches: str) -> argparse.ArgumentParser:
    """The probes' common options; ``doc``: the probe's module doc (its first line describes it),
    ``batches``: the default batch sizes."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON report")
    parser.add_argument("--batches", default=batches, help="comma-separated batch sizes of the sweep set")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the probe's subjects (at least 1)")
    return parser


def batch_sizes(text: str) -> list[int] | None:
    """The sorted batch sizes of ``--batches``, or None after an error line on stderr."""
    try:
        return sorted({int(b) for b in text.split(",")})
    except ValueError:
        print(f"error: --batches {text!r}: comma-separated batch sizes of the sweep set", file=sys.stderr)
        return None


def has_gpu(probe: str) -> bool:
    """Whether torch sees a CUDA GPU; if not, an error line naming ``probe`` on stderr."""
    import torch

    if torch.cuda.is_available():
        return True
    print(f"error: {probe} needs a CUDA GPU", file=sys.stderr)
    return False


def spread(times_us: list[float]) -> dict:
    """One point over its repeats (µs): ``median_us``, ``min_us``, ``max_us`` and the ``repeats``."""
    return {"median_us": statistics.median(times_us), "min_us": min(times_us), "max_us": max(times_us),
            "repeats": list(times_us)}


def cupti_point(call) -> tuple[float, float]:
    """``(median, window mean)`` µs of ``call`` (no arguments) timed by FlashInfer's
    ``bench_gpu_time_with_cupti(cold_l2_cache=True)``: the median of its calls, and the mean of those
    around it (:func:`harness.judge.timing.stats.window_mean`), which resolves below one CUPTI step."""
    from flashinfer.testing import bench_gpu_time_with_cupti

    from harness.judge.timing.stats import window_mean

    samples_us = [ms * 1e3 for ms in bench_gpu_time_with_cupti(call, cold_l2_cache=True)]
    return statistics.median(samples_us), window_mean(samples_us)


def time_batches(measure, batches: list[int], repeats: int, key: str, label) -> list[dict]:
    """Rows ``{"batch_size", key: subject, **spread}``: per batch size, in a process of its own
    (one CUPTI client each), ``measure(batch, repeats)`` -> ``{subject: [µs per repeat]}``; each row
    printed as ``B=<batch> <label(subject)> <median> µs (<min>-<max>)``."""
    from tools.timing_proof import in_fresh_process

    rows = []
    for batch in batches:
        for subject, times in in_fresh_process(measure, batch, max(1, repeats)).items():
            rows.append({"batch_size": batch, key: subject, **spread(times)})
            print(f"B={batch} {label(subject)} {rows[-1]['median_us']:.3f} µs "
                  f"({rows[-1]['min_us']:.3f}-{rows[-1]['max_us']:.3f})")
    return rows


def write_report(out: Path, name: str, **fields) -> Path:
    """``out/<name>.json``: ``fields`` after the date (UTC), the commit and the GPU's name."""
    from harness.records.environment import git_commit, hardware_name

    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
              "hardware": hardware_name("cuda"), **fields}
    path = out / f"{name}.json"
    with writing_into([out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1) + "\n")
    return path


def run_probe(argv: list[str] | None, doc: str, batches: str, report: str, measure, key: str, label,
              **fields) -> int:
    """A probe's whole command line: :func:`probe_parser` (``doc``, default ``batches``), its batch
    sizes and a GPU checked, :func:`time_batches` of ``measure`` with ``key`` and ``label``, then
    ``OUT/<report>.json`` (:func:`write_report`: ``fields``, then the rows). 0, or 2 after an error
    line (bad ``--batches``, no GPU)."""
    args = probe_parser(doc, batches).parse_args(argv)
    chosen = batch_sizes(args.batches)
    if chosen is None or not has_gpu(f"the {report.replace('_', ' ')}"):
        return 2
    rows = time_batches(measure, chosen, args.repeats, key, label)
    write_report(args.out, report, **fields, rows=rows)
    return 0
