"""Measure every launch config of the fla-recurrent kernel per batch size.

Usage (repository root, on the GPU machine; ~1 minute on an H100, most of it
Triton compiling the ~60 candidate configs once each):

    python solutions/fla-recurrent/tune.py --out DIR
    python solutions/fla-recurrent/tune.py --smoke --out DIR   # CPU ok: interpreter

For B in 1, 2, 4, ..., 512 it times each valid config (BV x num_warps x
num_stages) with CUDA events on a cold L2 (a 256 MB buffer is zeroed before
every call), median over ``--iters`` calls, next to a plain
``new_state.copy_(state)`` (the copy floor: the same state bytes moved with no
math). Every (B, config) result is checked once against
``harness.reference.gdn_decode`` with NaN-filled destinations. Writes
``DIR/fla_recurrent_tune.json`` and prints the best config per B plus a
``TABLE`` ready to paste into ``configs.py``.

``--smoke`` runs B=1, two configs, 2 iterations (wall clock when there is no
GPU, with TRITON_INTERPRET=1) so the script can be checked without a GPU.

The module is import-safe: the tests reuse ``make_inputs`` and
``count_mismatches`` from it.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

# Must happen before triton is imported (main.py imports it): with no GPU the
# kernel can only run under the Triton interpreter.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))  # run as a script: make `harness` importable

from harness.reference import gdn_decode  # noqa: E402

BATCHES = [1 << i for i in range(10)]  # 1 .. 512
BV_CHOICES = [4, 8, 16, 32, 64, 128]
WARP_CHOICES = [1, 2, 4, 8]
STAGE_CHOICES = [1, 2, 3]
ATOL = RTOL = 1e-2
NUM_Q_HEADS, NUM_V_HEADS, HEAD_DIM = 4, 8, 128


def _load_solution():
    """Load this folder's main.py by path (it loads kernel.py and configs.py)."""
    spec = importlib.util.spec_from_file_location("fla_recurrent_main", _HERE / "main.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_inputs(batch: int, device="cpu", seed: int = 0, normalize_qk: bool = True,
                scale: float | None = 0.0) -> dict:
    """Random inputs of the definition plus NaN-filled destinations.

    q, k: [B,1,4,128] bf16 (rows L2-normalized when ``normalize_qk``, as the
    model feeds them); v: [B,1,8,128] bf16; state: [B,8,128,128] f32 k-last;
    A_log, dt_bias: [8] f32; a, b: [B,1,8] bf16; output [B,1,8,128] bf16 and
    new_state [B,8,128,128] f32 filled with NaN.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    q = randn(batch, 1, NUM_Q_HEADS, HEAD_DIM)
    k = randn(batch, 1, NUM_Q_HEADS, HEAD_DIM)
    if normalize_qk:
        q = torch.nn.functional.normalize(q, dim=-1)
        k = torch.nn.functional.normalize(k, dim=-1)
    inputs = {
        "q": q.bfloat16(),
        "k": k.bfloat16(),
        "v": randn(batch, 1, NUM_V_HEADS, HEAD_DIM).bfloat16(),
        "state": 0.1 * randn(batch, NUM_V_HEADS, HEAD_DIM, HEAD_DIM),
        # A = exp(A_log) in [1, 16], like Qwen3-Next's initialization.
        "A_log": torch.log(1.0 + 15.0 * torch.rand(NUM_V_HEADS, generator=gen)),
        "a": randn(batch, 1, NUM_V_HEADS).bfloat16(),
        # dt log-uniform in [1e-3, 1e-1], dt_bias = softplus^-1(dt) (as harness/generator.py).
        "dt_bias": _inverse_softplus(10.0 ** (-3.0 + 2.0 * torch.rand(NUM_V_HEADS, generator=gen))),
        "b": randn(batch, 1, NUM_V_HEADS).bfloat16(),
        "output": torch.full((batch, 1, NUM_V_HEADS, HEAD_DIM), float("nan"), dtype=torch.bfloat16),
        "new_state": torch.full((batch, NUM_V_HEADS, HEAD_DIM, HEAD_DIM), float("nan")),
    }
    inputs = {name: t.to(device) for name, t in inputs.items()}
    inputs["scale"] = scale
    return inputs


def _inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    """x with softplus(x) = y, for y > 0: y + log(-expm1(-y))."""
    return y + torch.log(-torch.expm1(-y))


def reference(inputs: dict):
    """(output [B,1,8,128] bf16, new_state [B,8,128,128] f32) from the harness reference."""
    return gdn_decode(inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["A_log"],
                      inputs["a"], inputs["dt_bias"], inputs["b"], inputs["scale"])


def count_mismatches(actual: torch.Tensor, expected: torch.Tensor,
                     atol: float = ATOL, rtol: float = RTOL) -> int:
    """Elements failing both |x-y| <= atol and |x-y|/(|y|+1e-8) <= rtol.

    Written as "not (abs ok or rel ok)" so that a NaN in ``actual`` (an
    element the kernel never wrote) always counts as a mismatch.
    """
    x, y = actual.float(), expected.float()
    err = (x - y).abs()
    ok = (err <= atol) | (err / (y.abs() + 1e-8) <= rtol)
    return int((~ok).sum())


def candidate_configs(configs_mod) -> list:
    """Every valid LaunchConfig of the search space."""
    grid = itertools.product(BV_CHOICES, WARP_CHOICES, STAGE_CHOICES)
    cfgs = [configs_mod.LaunchConfig(bv, w, s) for bv, w, s in grid]
    return [c for c in cfgs if configs_mod.is_valid(c)]


def time_calls(fn, flush: torch.Tensor, iters: int) -> list[float]:
    """Per-call times of ``fn`` in microseconds, L2 flushed before each call.

    On a GPU: CUDA events around the call only (the flush runs before the
    start event). Without a GPU: wall clock (smoke runs only).
    """
    if flush.is_cuda:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends):
            flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [1000.0 * s.elapsed_time(e) for s, e in zip(starts, ends)]
    times = []
    for _ in range(iters):
        flush.zero_()
        t0 = time.perf_counter()
        fn()
        times.append(1e6 * (time.perf_counter() - t0))
    return times


def _summary(times: list[float]) -> dict:
    """Median and spread of a list of microsecond timings."""
    ordered = sorted(times)
    return {
        "median_us": statistics.median(ordered),
        "p10_us": ordered[len(ordered) // 10],
        "p90_us": ordered[(9 * len(ordered)) // 10],
    }


def check_config(kernel_mod, inputs: dict, cfg, expected) -> dict:
    """Run ``cfg`` once on NaN-filled destinations and compare with the reference."""
    inputs["output"].fill_(float("nan"))
    inputs["new_state"].fill_(float("nan"))
    _launch(kernel_mod, inputs, cfg)
    bad_out = count_mismatches(inputs["output"], expected[0])
    bad_state = count_mismatches(inputs["new_state"], expected[1])
    return {"ok": bad_out == 0 and bad_state == 0,
            "bad_output": bad_out, "bad_state": bad_state}


def _launch(kernel_mod, inputs: dict, cfg) -> None:
    """One kernel launch with an explicit config (same call main.run makes)."""
    scale = inputs["scale"] or 1.0 / math.sqrt(HEAD_DIM)
    kernel_mod.launch(inputs["q"], inputs["k"], inputs["v"], inputs["state"], inputs["A_log"],
                      inputs["a"], inputs["dt_bias"], inputs["b"], scale,
                      inputs["output"], inputs["new_state"], cfg)


def tune_batch(solution, batch: int, cfgs: list, flush: torch.Tensor, iters: int) -> dict:
    """Check and time every config in ``cfgs`` at batch size ``batch``."""
    device = flush.device
    inputs = make_inputs(batch, device, seed=batch)
    expected = reference(inputs)
    state_bytes = inputs["state"].numel() * inputs["state"].element_size()
    copy_times = time_calls(lambda: inputs["new_state"].copy_(inputs["state"]), flush, iters)
    rows = []
    for cfg in cfgs:
        row = dict(cfg._asdict())
        try:
            row.update(check_config(solution.kernel, inputs, cfg, expected))
            row.update(_summary(time_calls(lambda: _launch(solution.kernel, inputs, cfg), flush, iters)))
            # Read once + written once: the bytes the kernel must move.
            row["gbps"] = 2 * state_bytes / (row["median_us"] * 1e3)
        except Exception as exc:  # compile / resource failure: record, go on
            row.update({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
        rows.append(row)
    good = [r for r in rows if r["ok"]]
    best = min(good, key=lambda r: r["median_us"]) if good else None
    table_cfg = solution.configs.pick(batch)
    table_row = next((r for r in rows if (r["bv"], r["num_warps"], r["num_stages"]) == tuple(table_cfg)), None)
    return {
        "batch": batch,
        "state_bytes": state_bytes,
        "copy_floor": _summary(copy_times),
        "configs": rows,
        "best": best,
        "table_config": dict(table_cfg._asdict()),
        "table_median_us": table_row["median_us"] if table_row and table_row["ok"] else None,
    }


def print_report(results: list[dict]) -> None:
    """Best config per batch size, then a TABLE to paste into configs.py."""
    print(f"{'B':>4} {'best (bv,warps,stages)':>24} {'best us':>9} {'table us':>9} "
          f"{'copy us':>9} {'best/copy':>9} {'GB/s':>7}")
    for res in results:
        best, copy_us = res["best"], res["copy_floor"]["median_us"]
        table_us = res["table_median_us"]
        if best is None:
            print(f"{res['batch']:>4} {'(no valid config)':>24}")
            continue
        cfg = f"({best['bv']},{best['num_warps']},{best['num_stages']})"
        table_txt = f"{table_us:9.2f}" if table_us is not None else f"{'-':>9}"
        print(f"{res['batch']:>4} {cfg:>24} {best['median_us']:9.2f} {table_txt} "
              f"{copy_us:9.2f} {best['median_us'] / copy_us:9.2f} {best['gbps']:7.0f}")
    print("\nTABLE: dict[int, LaunchConfig] = {")
    for res in results:
        if res["best"] is not None:
            b = res["best"]
            print(f"    {res['batch']}: LaunchConfig(bv={b['bv']}, num_warps={b['num_warps']}, "
                  f"num_stages={b['num_stages']}),")
    print("}")


def _environment(device: torch.device) -> dict:
    """Versions and device name, stored next to the timings."""
    import triton

    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "interpreter": os.environ.get("TRITON_INTERPRET", "0") == "1",
    }


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for fla_recurrent_tune.json")
    parser.add_argument("--smoke", action="store_true", help="B=1, two configs, 2 iterations")
    parser.add_argument("--iters", type=int, default=100, help="timed calls per config")
    parser.add_argument("--batches", type=int, nargs="+", default=BATCHES)
    parser.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer size")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    solution = _load_solution()
    cfgs = candidate_configs(solution.configs)
    batches, iters, flush_mb = args.batches, args.iters, args.flush_mb
    if args.smoke:
        table_cfg = solution.configs.pick(1)
        other = next(c for c in cfgs if c != table_cfg and c.bv == 16)
        batches, iters, cfgs = [1], 2, [table_cfg, other]
        flush_mb = min(flush_mb, 1 if device.type == "cpu" else flush_mb)
    flush = torch.empty(flush_mb * (1 << 20) // 4, dtype=torch.int32, device=device)
    started = time.perf_counter()
    results = []
    for batch in batches:
        results.append(tune_batch(solution, batch, cfgs, flush, iters))
        print(f"B={batch}: {len(cfgs)} configs done ({time.perf_counter() - started:.1f}s)", flush=True)
    report = {**_environment(device), "iters": iters, "flush_bytes": flush.numel() * 4,
              "seconds": time.perf_counter() - started, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    out_file = args.out / "fla_recurrent_tune.json"
    out_file.write_text(json.dumps(report, indent=1))
    print_report(results)
    print(f"\nwrote {out_file}")
    return report


if __name__ == "__main__":
    main()
