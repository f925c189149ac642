"""Measure cuda-v1 and every cuda-v4 block shape per batch size (run on a GPU).

Usage (from the repository root)::

    python -m tools.tune_cuda_v4 --out DIR [--batches 1,2,4,...] [--iters 100] [--only REGEX]

For each batch size B it checks cuda-v1 and every cuda-v4 variant (rows per
warp x cache policy x lanes per row x warps per block; ``--only`` keeps the
variants whose name matches, plus the one in use) once against the
vectorized reference (:mod:`tools.vectorized`; atol = rtol = 1e-2;
destinations NaN-filled first so unwritten elements fail), then
times it with the harness's CUPTI tier (CUDA events where cupti-python is
missing; the tier is recorded) under a cold L2 and keeps the median.
``new_state.copy_(state)``, timed the same way, is the copy floor: the
kernel must at least read and write the state.

Writes ``DIR/cuda_tune.json`` and prints one line per B (cuda-v1, the
variant in use and the fastest cuda-v4 variants, with their multiples of the
copy floor) plus a launch table for ``solutions/cuda-v4/kernel.cu`` (one
variant per B by ``tools.tuning.steady_choice``), as the ``GDN_V4_LAUNCH_TABLE``
to paste over kernel.cu's, the one place the table lives. Both solutions are loaded through the harness's
loader, which compiles their ``kernel.cu`` as the judge does.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

from harness.judge.solutions import load_meta, load_solution
from harness.paths import SOLUTIONS_DIR
from tools.tuning import (KernelTimer, check_and_time, check_call, compress_table, random_inputs,
                          reference_outputs, steady_choice, write_report)

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


#: cuda-v4's kernel.cu compiles only its launch table's variants unless this macro is defined.
ALL_VARIANTS = "GDN_V4_ALL_VARIANTS"


def load_solution_module(folder: str):
    """The entry module of ``solutions/<folder>``, through the harness's loader
    (a private copy of the folder, its ``kernel.cu`` compiled into ``kernel.so``,
    with every variant: the tuner times them all)."""
    return load_solution(load_meta(SOLUTIONS_DIR / folder), defines=(ALL_VARIANTS,))


def config_name(config) -> str:
    """``r4/stream``, ``r4/nc``, ``r4/plain/l16``, ``r8/nc/l16/w2``: rows per
    warp, cache policy, then the lanes per row unless 32 (a whole warp per
    row) and the warps per block unless 8. (Tuning files of 2026-11-23 also
    have ``.../rs`` names: the reduce-scatter form, now the only one, where
    the names without ``rs`` are the all-reduce form it replaced.)"""
    name = f"r{config.rows_per_warp}/{config.cache_policy}"
    if config.lanes_per_row != 32:
        name += f"/l{config.lanes_per_row}"
    return name if config.warps_per_block == 8 else f"{name}/w{config.warps_per_block}"


def v4_configs(v4):
    """Every variant kernel.cu compiles, as ``v4.LaunchConfig``s."""
    for rows in v4.ROWS_PER_WARP_CHOICES:
        for policy in v4.CACHE_POLICIES:
            for lanes in v4.LANES_PER_ROW_CHOICES:
                for warps in v4.WARPS_PER_BLOCK_CHOICES:
                    config = v4.LaunchConfig(rows, policy, lanes, warps)
                    if config.is_compiled():
                        yield config


def configurations(v1, v4, inputs: dict, only: str = "", in_use=None) -> dict:
    """Name -> zero-argument callable for cuda-v1 and every cuda-v4 variant whose
    name matches the regular expression ``only`` (all when empty) or is ``in_use``."""
    configs = {"cuda-v1": lambda: v1.run(inputs)}
    for config in v4_configs(v4):
        name = f"cuda-v4/{config_name(config)}"
        if config == in_use or re.search(only, name):
            configs[name] = lambda config=config: v4.run_with_config(inputs, config)
    return configs


def measure_batch(batch: int, v1, v4, timer: KernelTimer, only: str = "") -> dict:
    """Check and time the configurations (see :func:`configurations`) and the
    copy floor at one batch size."""
    inputs = random_inputs(batch, "cuda", seed=batch)
    expected = reference_outputs(inputs)
    floor_us = timer(lambda: inputs["new_state"].copy_(inputs["state"]))
    results = {}
    for name, call in configurations(v1, v4, inputs, only, v4.launch_config(batch)).items():
        results[name] = check_and_time(call, inputs, expected, timer)
        if "us" in results[name]:
            results[name]["x_floor"] = results[name]["us"] / floor_us
    # The contest entry point (kernel.cu's built-in default_config): correctness only.
    entry = v4.load_module().gdn_decode
    results["cuda-v4/entry"] = check_call(
        lambda: entry(*(inputs[key] for key in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b")),
                      v4.resolve_scale(None), inputs["output"], inputs["new_state"]),
        inputs, expected)
    timed = timed_variants(results)
    return {"batch": batch, "copy_floor_us": floor_us, "configs": results,
            "best_v4": min(timed, key=timed.get) if timed else None,
            "config_in_use": config_name(v4.launch_config(batch))}


def timed_variants(results: dict[str, dict]) -> dict[str, float]:
    """Name -> µs of the correct cuda-v4 variants among one batch size's ``results``
    (not cuda-v1, nor the untimed contest entry ``cuda-v4/entry``)."""
    return {name: r["us"] for name, r in results.items() if name.startswith("cuda-v4/r") and r["correct"]}


def parse_config(name: str) -> tuple[int, str, int, int]:
    """Inverse of :func:`config_name`: ``cuda-v4/r4/stream`` -> (4, "stream", 32, 8);
    ``cuda-v4/r8/nc/l16/w1`` -> (8, "nc", 16, 1)."""
    _, rows, policy, *rest = name.split("/")
    options = {part[0]: int(part[1:]) for part in rest}
    return int(rows[1:]), policy, options.get("l", 32), options.get("w", 8)


#: one entry of kernel.cu's GDN_V4_LAUNCH_TABLE: X(largest batch, rows, CachePolicy, lanes, warps)
_TABLE_ENTRY = re.compile(r"X\((\w+), (\d+), k(\w+), (\d+), (\d+)\)")
#: kernel.cu's CachePolicy enumerators, by cache policy name
_ENUMERATORS = {"stream": "Stream", "nc": "Nc", "plain": "Plain", "noalloc": "NoAlloc"}


def kernel_table(source: str) -> list[list]:
    """kernel.cu's ``GDN_V4_LAUNCH_TABLE`` as ``[[largest batch | None, (rows, policy, lanes, warps)]]``
    (the last entry, ``INT64_MAX``, as None), the form :func:`suggested_table` returns.

    Raises:
        ValueError: no table, or one whose last entry does not cover every batch.
    """
    start = source.find("#define GDN_V4_LAUNCH_TABLE(X)")
    if start < 0:
        raise ValueError("kernel.cu defines no GDN_V4_LAUNCH_TABLE")
    body = source[start:source.index("\n\n", start)]
    names = {enumerator: name for name, enumerator in _ENUMERATORS.items()}
    table = [[None if limit == "INT64_MAX" else int(limit), (int(rows), names[policy], int(lanes), int(warps))]
             for limit, rows, policy, lanes, warps in _TABLE_ENTRY.findall(body)]
    if not table or table[-1][0] is not None:
        raise ValueError("GDN_V4_LAUNCH_TABLE's last entry must be INT64_MAX (every batch)")
    return table


def table_macro(table: list[list]) -> str:
    """``table`` (:func:`suggested_table`'s form) as kernel.cu's ``GDN_V4_LAUNCH_TABLE``, to paste."""
    entries = [f"  X({'INT64_MAX' if limit is None else limit}, {rows}, k{_ENUMERATORS[policy]}, {lanes}, {warps})"
               for limit, (rows, policy, lanes, warps) in table]
    return "#define GDN_V4_LAUNCH_TABLE(X) \\\n" + " \\\n".join(entries)


def suggested_table(rows: list[dict]) -> list[list]:
    """Launch-table entries ``[[largest batch | None, config tuple]]`` from
    the measured rows, one config per batch size by
    :func:`tools.tuning.steady_choice` (batch sizes without a correct
    cuda-v4 variant are left out)."""
    times = [(row["batch"], timed_variants(row["configs"])) for row in rows]
    chosen = steady_choice([(batch, t) for batch, t in times if t])
    return compress_table([(batch, parse_config(name)) for batch, name in chosen])


def _cell(row: dict, name: str) -> str:
    result = row["configs"].get(name)
    if result is None:
        return f"{name.replace('cuda-v4/', '')} -"
    if not result["correct"]:
        return f"{name.replace('cuda-v4/', '')} WRONG"
    return f"{name.replace('cuda-v4/', '')} {result['us']:.2f} ({result['x_floor']:.3f}x)"


def print_report(report: dict, fastest: int = 3) -> None:
    """One line per batch size: copy floor, cuda-v1, the variant in use and
    the ``fastest`` correct cuda-v4 variants, each with its multiple of the floor."""
    print(f"{report['device']}  (median of {report['iters']} cold-L2 calls, {report['tier']} tier, µs)")
    for row in report["batches"]:
        timed = timed_variants(row["configs"])
        ranked = sorted(timed, key=timed.get)[:fastest]
        print(f"B={row['batch']:<4} copy {row['copy_floor_us']:.2f} | {_cell(row, 'cuda-v1')} | in use "
              f"{_cell(row, 'cuda-v4/' + row['config_in_use'])} | fastest: "
              + ", ".join(_cell(row, name) for name in ranked))
    bad = [f"B={row['batch']} {name}" for row in report["batches"]
           for name, r in row["configs"].items() if not r["correct"]]
    print("all configurations correct" if not bad else "INCORRECT: " + ", ".join(bad))
    print(table_macro(report["suggested_table"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for cuda_tune.json")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--only", default="", help="regular expression: tune only the matching variant names")
    args = parser.parse_args(argv)

    device = torch.device("cuda")
    v1, v4 = load_solution_module("cuda-v1"), load_solution_module("cuda-v4")
    v1.load()  # compile (or fetch from the cache) before timing anything
    v4.load()
    timer = KernelTimer(device, iters=args.iters)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        rows.append(measure_batch(batch, v1, v4, timer, args.only))
        print(f"measured B={batch}", file=sys.stderr, flush=True)
    report = {
        "device": torch.cuda.get_device_name(device),
        "capability": list(torch.cuda.get_device_capability(device)),
        "torch": torch.__version__,
        "iters": args.iters,
        "only": args.only,
        "tier": timer.tier,
        "why_not_cupti": timer.why_not_cupti,
        "flush_mb": timer.flush.nbytes // 2**20,
        "batches": rows,
        "suggested_table": suggested_table(rows),
    }
    path = write_report(args.out, "cuda_tune.json", report)
    print_report(report)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
