#!/usr/bin/env python3
"""The attack fixtures on a GPU: every tests/fixtures/attacks solution and the
GPU-only ones of tests/fixtures/attacks_gpu, judged with the GPU tiers.

    python scripts/gpu_attacks.py OUT_DIR [--sets cpu,gpu]

``--sets gpu`` judges only tests/fixtures/attacks_gpu (the whole run takes
about six minutes on an H100, most of it the hang fixtures' deadlines).

Writes ``OUT_DIR/attacks.md`` (one row per fixture: statuses, expected, verdict,
the first line of the reason) and the two run folders under ``OUT_DIR/runs``.
The expectations are tests/judge/test_attacks.py's, so the CPU test and this GPU
run judge the same thing. Exit 0 even when an expectation fails (it is in the table).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "judge")]  # the harness, the tests' support and expectations

import test_attacks as attacks  # noqa: E402

from harness.judge.isolation import Timeouts  # noqa: E402
from harness.judge.run import RunConfig, run_benchmark  # noqa: E402
from harness.judge.timing import TimingConfig  # noqa: E402
from harness.records.environment import hardware_name  # noqa: E402


def cupti_figures(traces) -> str:
    """Each passing trace's CUPTI figure and how long the GPU went on after run() returned (µs)."""
    shown = []
    for trace in traces:
        figure = trace.evaluation.performance and trace.evaluation.performance.tiers.get("cupti")
        if figure is not None and figure.available:
            shown.append(f"{figure.value_us:.1f} ({figure.after_return_us:.1f})" if figure.after_return_us is not None
                         else f"{figure.value_us:.1f}")
    return ", ".join(shown) or "—"


def judged(root: Path, solutions: Path, expected: dict, results: Path, dataset: Path,
           only: list[str] | None = None) -> list[str]:
    """Run one fixture folder on the GPU (``only``: those fixtures of it); a markdown row per fixture."""
    config = RunConfig(device="cuda", tiers=("cupti", "events", "sync"), trials=2,
                       timing=TimingConfig(warmup=5, iters=50, budget_s=0.5, warm_s=0.05))
    picked = [n for n in expected if (solutions / n).is_dir() and (only is None or n in only)]
    result = run_benchmark("all" if only is None else ",".join(picked), str(dataset), config, results, solutions_root=solutions, progress=False,
                           timeouts=Timeouts(startup_s=300, workload_s=20, total_s=300))
    rows = []
    for name in sorted(picked, key=lambda n: (n == attacks.LONG_NAME, n)):
        label = attacks.label_in(name, result.traces)
        mine = [t for t in result.traces if t.solution == label]
        problems = (attacks.check_expectation(name, result.traces, list(attacks.WORKLOADS), expected)
                    + attacks.figure_problems(name, result.traces))
        statuses = ", ".join(t.evaluation.status.value for t in mine)
        reason = next((t.evaluation.log.strip().splitlines()[0][:140] for t in mine if t.evaluation.log.strip()),
                      "; ".join(problems)[:140])
        shown = name if len(name) < 40 else f"{name[:6]}…({len(name)} chars)"
        rows.append(f"| {solutions.name} | {shown} | {statuses} | {'as expected' if not problems else 'NOT AS EXPECTED'}"
                    f" | {cupti_figures(mine)} | {reason.replace('|', '/')} |")
    return rows


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Judge the attack fixtures with the GPU tiers.")
    parser.add_argument("out", type=Path, nargs="?", default=Path("attack-out"), help="folder for attacks.md and runs/")
    parser.add_argument("--sets", default="cpu,gpu",
                        help="cpu: tests/fixtures/attacks, gpu: tests/fixtures/attacks_gpu (default: both)")
    parser.add_argument("--only", help="comma-separated fixture names (default: every fixture of the sets)")
    args = parser.parse_args()
    out, sets, only = args.out, args.sets.split(","), args.only and args.only.split(",")
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="gdn-attacks-"))
    dataset = attacks.write_attack_dataset(root / "dataset")
    env = attacks.attack_environment(dataset, out / "runs", root)
    checkout = attacks.files_attacked(dataset)
    os.environ.update(env)
    attacks.ATTACK_ENV_FILE.write_text(json.dumps(env))
    rows = ["| set | fixture | status per workload (B=1 stored, B=2 random) | verdict | cupti µs (after run() returned) "
            "| reason (first line) |", "|---|---|---|---|---|---|"]
    try:
        if "cpu" in sets:
            rows += judged(root, attacks.ATTACKS, attacks.EXPECTED_ON_GPU, out / "runs", dataset, only)
            for path in dataset.rglob("*.safetensors"):  # tamper-blob changed them: a fresh dataset for the GPU set
                path.unlink()
            dataset = attacks.write_attack_dataset(root / "dataset2")
        if "gpu" in sets:
            rows += judged(root, attacks.ATTACKS_GPU, attacks.EXPECTED_GPU, out / "runs", dataset, only)
    finally:
        attacks._untamper(attacks.HARNESS_FILE)
        attacks._undo_checkout_attacks(checkout)  # the judge put them back; never leave them either way
        attacks.ATTACK_ENV_FILE.unlink(missing_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    text = (f"# Attack fixtures on {hardware_name('cuda')}, {stamp}\n\n"
            f"`python scripts/gpu_attacks.py OUT` (tiers cupti, events, sync; 2 correctness trials; "
            f"commit {os.environ.get('GDN_BENCH_COMMIT', 'see run.json')}).\n\n" + "\n".join(rows) + "\n")
    (out / "attacks.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
