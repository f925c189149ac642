#!/usr/bin/env python3
"""Where a workload's time goes, and what a worker's imports cost (issue #17: contest-v2 in
under 8 minutes, contest-v1 in under 3).

    python scripts/row_cost_probe.py OUT_DIR [--algo pt-reference,cuda-v1] [--workloads contest-v2]
                                             [--pick 0,25,46,53] [--no-imports]

Two parts, both written to ``OUT_DIR/row_cost_probe.txt`` and printed:

1. **Imports**, each in a fresh interpreter as a worker is (``-s``, no bytecode written): ``import
   torch`` with a CUDA context; importing fla's GDN ops after torch alone and after what a GPU
   run's zygote preloads (``harness.judge.isolation.GPU_PRELOAD``); pt-compiled's first call at
   B = 1 (torch.compile) after the same preload, with inductor's default compile workers and with
   ``TORCHINDUCTOR_COMPILE_THREADS=1``.
2. **A run on a few workloads** (``--pick``: indices into the set): the run's own timeline and, per
   variant and workload, the judge's wall seconds for the workload, each tier's wall seconds, timed
   calls, why it stopped and its figure, and what is left (correctness trials, verifying sampled
   calls, messages). The run folder is kept under ``OUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.judge.isolation import GPU_PRELOAD  # noqa: E402

PRELOAD = f"import torch, {', '.join(GPU_PRELOAD)}"
IMPORT_PROBES = {
    "import torch + CUDA context": "import torch; torch.zeros(1, device='cuda')",
    "fla ops after torch alone": "import torch\nT = time.perf_counter()\nimport fla.ops.gated_delta_rule",
    "fla ops after the GPU preload": f"{PRELOAD}\nT = time.perf_counter()\nimport fla.ops.gated_delta_rule",
}
#: pt-compiled's first call (torch.compile of the vectorized step) after the GPU preload.
COMPILE_PROBE = PRELOAD + """
import importlib.util
spec = importlib.util.spec_from_file_location("vectorized", "solutions/pt-compiled/vectorized.py")
vectorized = importlib.util.module_from_spec(spec); spec.loader.exec_module(vectorized)
B, d = 1, "cuda"
args = dict(q=torch.randn(B, 1, 4, 128, device=d, dtype=torch.bfloat16), k=torch.randn(B, 1, 4, 128, device=d, dtype=torch.bfloat16),
            v=torch.randn(B, 1, 8, 128, device=d, dtype=torch.bfloat16), state=torch.randn(B, 8, 128, 128, device=d),
            A_log=torch.randn(8, device=d), a=torch.randn(B, 1, 8, device=d, dtype=torch.bfloat16),
            dt_bias=torch.randn(8, device=d), b=torch.randn(B, 1, 8, device=d, dtype=torch.bfloat16), scale=None)
step = torch.compile(vectorized.gdn_decode)
torch.cuda.synchronize()
T = time.perf_counter()
step(**args)
torch.cuda.synchronize()
"""


def timed_interpreter(code: str, env: dict | None = None) -> str:
    """Wall seconds of a fresh ``python -s`` running ``code``, and of the part after ``T = ...``."""
    wrapper = f"import time\nSTART = time.perf_counter()\nT = START\n{code}\nimport sys\n" \
              f"print(round(time.perf_counter() - START, 2), round(time.perf_counter() - T, 2))"
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-s", "-c", wrapper], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {})))
    total = time.perf_counter() - began
    if done.returncode:
        return f"failed: {done.stderr.strip().splitlines()[-1:]}"
    inside, part = done.stdout.split()[-2:]
    return f"{total:.2f} s with the interpreter's start; {part} s the part timed"


def import_costs(lines: list[str]) -> None:
    lines.append("## imports, each in a fresh interpreter")
    for name, code in IMPORT_PROBES.items():
        lines.append(f"- {name}: {timed_interpreter(code)}")
    for name, env in (("default compile workers", {}), ("TORCHINDUCTOR_COMPILE_THREADS=1",
                                                        {"TORCHINDUCTOR_COMPILE_THREADS": "1"})):
        lines.append(f"- pt-compiled first call, B = 1, {name}: {timed_interpreter(COMPILE_PROBE, env)}")


def run_costs(out: Path, algo: str, workloads: str, pick: list[int], lines: list[str]) -> None:
    from harness.judge import run as run_module
    from harness.judge.run import RunConfig, run_benchmark
    from harness.judge.timing import TimingConfig

    describe = run_module.describe_dataset

    def picked(spec, *args):
        dataset = describe(spec, *args)
        dataset.workloads = [dataset.workloads[i] for i in pick]
        return dataset

    run_module.describe_dataset = picked
    import torch

    gpu = torch.cuda.is_available()
    config = RunConfig(device="cuda" if gpu else "cpu", tiers=("cupti", "events", "sync") if gpu else ("wallclock",),
                       timing=TimingConfig())
    began = time.perf_counter()
    result = run_benchmark(algo, workloads, config, out, progress=False)
    lines.append(f"\n## {algo} on {workloads}{pick}: {time.perf_counter() - began:.1f} s, run folder {result.run_dir}")
    for lap in result.timeline:
        detail = {k: v for k, v in lap.items() if k not in ("step", "seconds")}
        lines.append(f"- {lap['step']}: {lap['seconds']:.2f} s {json.dumps(detail) if detail else ''}")
    lines.append("\n| variant | B | workload s | " + " | ".join(f"{t} s / calls / stop / µs" for t in config.tiers)
                 + " | rest s | verified |")
    lines.append("|---" * (4 + len(config.tiers)) + "|")
    seconds = {lap["step"]: lap.get("workload_s", []) for lap in result.timeline}
    order = {w.uuid: i for i, w in enumerate(run_module.describe_dataset(workloads).workloads)}  # the picked
    for trace in (t for t in result.traces if t.solution != "copy-floor"):
        totals = seconds.get(trace.solution, [])
        index = order[trace.workload.uuid]
        total = totals[index] if index < len(totals) else None
        tiers = (trace.evaluation.performance.tiers if trace.evaluation.performance else {}) or {}
        cells, spent = [], 0.0
        for tier in config.tiers:
            figure = tiers.get(tier)
            if figure is None or not figure.available:
                cells.append("—")
                continue
            spent += figure.wall_s or 0.0
            cells.append(f"{figure.wall_s or 0:.2f} / {figure.iters} / {figure.stop or ''} / {figure.value_us:.2f}")
        verified = (trace.evaluation.correctness.extra.timed_calls_verified
                    if trace.evaluation.correctness else "")
        rest = f"{total - spent:.2f}" if total is not None else "?"
        lines.append(f"| {trace.solution} | {trace.workload.axes['batch_size']} | {total} | " + " | ".join(cells)
                     + f" | {rest} | {verified} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--algo", default="pt-reference,cuda-v1")
    parser.add_argument("--workloads", default="contest-v2")
    parser.add_argument("--pick", default="0,25,46,53", help="indices of the workloads to run (comma list)")
    parser.add_argument("--no-imports", action="store_true", help="skip part 1")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.is_available()
    lines = [f"{torch.cuda.get_device_name() if gpu else 'CPU'} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    if gpu and not args.no_imports:
        import_costs(lines)
    run_costs(args.out, args.algo, args.workloads, [int(i) for i in args.pick.split(",")], lines)
    text = "\n".join(lines) + "\n"
    (args.out / "row_cost_probe.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
