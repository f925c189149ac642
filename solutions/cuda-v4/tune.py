"""Measure cuda-v1 and every cuda-v4 block shape per batch size (run on a GPU).

Usage (from the repository root)::

    python solutions/cuda-v4/tune.py --out DIR [--batches 1,2,4,...] [--iters 100]

For each batch size B it checks every configuration once against
``harness.reference.gdn_decode`` (atol = rtol = 1e-2; destinations NaN-filled
first so unwritten elements fail), then times it with CUDA events under a
cold L2 (a 256 MB buffer is zeroed before every call, outside the timed
region) and keeps the median. ``new_state.copy_(state)``, timed the same way,
is the copy floor: the kernel must at least read and write the state.

Writes ``DIR/cuda_tune.json`` and prints one line per B (best cuda-v4 shape,
its time and its multiple of the copy floor) plus a ``ROWS_PER_WARP_TABLE``
for ``solutions/cuda-v4/main.py`` built from the fastest correct shapes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
_REPO_ROOT = _HERE.parents[1]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from harness.reference import gdn_decode as reference_gdn_decode  # noqa: E402

ATOL = RTOL = 1e-2
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def load_solution_module(folder: str):
    """Import ``solutions/<folder>/main.py`` by path (folder names have hyphens)."""
    path = _REPO_ROOT / "solutions" / folder / "main.py"
    spec = importlib.util.spec_from_file_location(f"gdn_tune_{folder.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_inputs(batch: int, device: torch.device, seed: int = 0) -> dict:
    """Random inputs of the contract's shapes and dtypes, plus empty destinations."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, dtype=torch.float32, std=1.0):
        return (std * torch.randn(*shape, generator=gen, device=device)).to(dtype)

    bf16 = torch.bfloat16
    return {
        "q": randn(batch, 1, 4, 128, dtype=bf16),
        "k": randn(batch, 1, 4, 128, dtype=bf16, std=128 ** -0.5),  # |k| ~ 1, like an l2-normed key
        "v": randn(batch, 1, 8, 128, dtype=bf16),
        "state": randn(batch, 8, 128, 128),
        "A_log": torch.log(torch.rand(8, generator=gen, device=device) * 15 + 1),
        "a": randn(batch, 1, 8, dtype=bf16),
        "dt_bias": randn(8, std=0.5),
        "b": randn(batch, 1, 8, dtype=bf16),
        "scale": None,
        "output": torch.empty(batch, 1, 8, 128, dtype=bf16, device=device),
        "new_state": torch.empty(batch, 8, 128, 128, dtype=torch.float32, device=device),
    }


def mismatches(x: torch.Tensor, y: torch.Tensor) -> int:
    """Elements where ``|x-y| > atol`` and ``|x-y|/(|y|+1e-8) > rtol`` (NaN counts as a miss)."""
    x, y = x.double(), y.double()
    diff = (x - y).abs()
    ok = (diff <= ATOL) | (diff / (y.abs() + 1e-8) <= RTOL)
    return int((~ok).sum().item())


def check(call, inputs: dict, expected: tuple) -> dict:
    """Run ``call`` once on NaN-filled destinations and compare with the reference."""
    inputs["output"].fill_(float("nan"))
    inputs["new_state"].fill_(float("nan"))
    call()
    torch.cuda.synchronize()
    out_ref, state_ref = expected
    bad = mismatches(inputs["output"], out_ref) + mismatches(inputs["new_state"], state_ref)
    return {
        "correct": bad == 0,
        "mismatches": bad,
        "max_abs_err_output": float((inputs["output"].float() - out_ref.float()).abs().max()),
        "max_abs_err_state": float((inputs["new_state"] - state_ref).abs().max()),
    }


def time_cold_us(call, flush: torch.Tensor, iters: int, warmup: int = 5) -> float:
    """Median GPU time of ``call`` in µs, L2 flushed (outside the events) before each call."""
    for _ in range(warmup):
        flush.zero_()
        call()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return 1000.0 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def configurations(v1, v4, inputs: dict) -> dict:
    """Name -> zero-argument callable for every configuration to measure."""
    configs = {"cuda-v1": lambda: v1.run(inputs)}
    for rows in v4.ROWS_PER_WARP_CHOICES:
        configs[f"cuda-v4/r{rows}"] = lambda rows=rows: v4.run_with_rows(inputs, rows)
    return configs


def measure_batch(batch: int, v1, v4, flush: torch.Tensor, iters: int) -> dict:
    """Check and time every configuration and the copy floor at one batch size."""
    inputs = make_inputs(batch, flush.device, seed=batch)
    expected = reference_gdn_decode(inputs["q"], inputs["k"], inputs["v"], inputs["state"],
                                    inputs["A_log"], inputs["a"], inputs["dt_bias"], inputs["b"],
                                    inputs["scale"])
    floor_us = time_cold_us(lambda: inputs["new_state"].copy_(inputs["state"]), flush, iters)
    results = {}
    for name, call in configurations(v1, v4, inputs).items():
        results[name] = check(call, inputs, expected)
        results[name]["us"] = time_cold_us(call, flush, iters)
        results[name]["x_floor"] = results[name]["us"] / floor_us
    # The contest entry point (kernel.cu's built-in default shape): correctness only.
    entry = v4.load_module().gdn_decode
    results["cuda-v4/entry"] = check(
        lambda: entry(*(inputs[key] for key in ("q", "k", "v", "state", "A_log", "a",
                                                "dt_bias", "b")),
                      v4.resolve_scale(None), inputs["output"], inputs["new_state"]),
        inputs, expected)
    del expected
    timed_v4 = {name: r for name, r in results.items() if name.startswith("cuda-v4/r") and r["correct"]}
    best = min(timed_v4, key=lambda name: timed_v4[name]["us"]) if timed_v4 else None
    return {"batch": batch, "copy_floor_us": floor_us, "configs": results,
            "best_v4": best, "best_v4_rows": int(best.split("/r")[1]) if best else None,
            "rows_per_warp_in_use": v4.rows_per_warp(batch)}


def suggested_table(rows_by_batch: list[tuple[int, int]]) -> list[list]:
    """Compress ``[(batch, best rows)]`` (ascending batch) to ``[[largest batch|None, rows]]``."""
    table: list[list] = []
    for batch, rows in rows_by_batch:
        if table and table[-1][1] == rows:
            table[-1][0] = batch
        else:
            table.append([batch, rows])
    if table:
        table[-1][0] = None
    return table


def print_report(report: dict) -> None:
    """Short human-readable table."""
    names = [n for n in report["batches"][0]["configs"] if n != "cuda-v4/entry"]
    print(f"{report['device']}  (median of {report['iters']} cold-L2 calls, µs)")
    header = f"{'B':>5} {'copy':>8} " + " ".join(f"{n.replace('cuda-', ''):>9}" for n in names)
    print(header + "   best v4 (x copy)")
    for row in report["batches"]:
        cells = []
        for name in names:
            r = row["configs"][name]
            cells.append(f"{r['us']:9.2f}" if r["correct"] else f"{'WRONG':>9}")
        best = row["best_v4"]
        best_text = (f"r{row['best_v4_rows']} {row['configs'][best]['us']:.2f} "
                     f"({row['configs'][best]['x_floor']:.2f}x)") if best else "none correct"
        print(f"{row['batch']:>5} {row['copy_floor_us']:8.2f} " + " ".join(cells) + "   " + best_text)
    bad = [f"B={row['batch']} {name}" for row in report["batches"]
           for name, r in row["configs"].items() if not r["correct"]]
    print("all configurations correct" if not bad else "INCORRECT: " + ", ".join(bad))
    print("ROWS_PER_WARP_TABLE =", tuple(tuple(e) for e in report["suggested_table"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for cuda_tune.json")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer size")
    args = parser.parse_args(argv)

    device = torch.device("cuda")
    v1, v4 = load_solution_module("cuda-v1"), load_solution_module("cuda-v4")
    v1.load()  # compile (or fetch from the cache) before timing anything
    v4.load()
    flush = torch.empty(args.flush_mb * 2**20 // 4, dtype=torch.float32, device=device)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        rows.append(measure_batch(batch, v1, v4, flush, args.iters))
        print(f"measured B={batch}", file=sys.stderr, flush=True)
    report = {
        "device": torch.cuda.get_device_name(device),
        "capability": list(torch.cuda.get_device_capability(device)),
        "torch": torch.__version__,
        "iters": args.iters,
        "flush_mb": args.flush_mb,
        "batches": rows,
        "suggested_table": suggested_table(
            [(r["batch"], r["best_v4_rows"]) for r in rows if r["best_v4_rows"]]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_tune.json").write_text(json.dumps(report, indent=2))
    print_report(report)
    print(f"wrote {args.out / 'cuda_tune.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
