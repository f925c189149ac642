"""Which part of cuda-v4's work costs time at small B? An ablation probe of issue #33's last
0.3 µs between cuda-v4 and a copy of the state (results/cuda-notes.md):

    python -m tools.ablation_probe --out DIR [--batches 1,2,4,8] [--repeats 3] [--state-dtype bfloat16]

For each batch size, in a process of its own (one CUPTI client): cuda-v4 built once per
:data:`BUILDS` entry, kernel.cu's switches: ablations (``-DGDN_V4_ABLATE=<flags>``: each leaves
one part of the work out, and its results are wrong by design) and candidates
(``-DGDN_V4_CANDIDATE=<flags>``: changes that compute the same results), each launching the
variant its launch table picks for that B on this GPU, beside the copy floor's kernels
(torch ``copy_`` and the Triton streaming copies of :mod:`harness.judge.stream_copy`), all on
the sweep workload's inputs (``--state-dtype bfloat16``: its bf16-state kernels, its bf16 table's
variant, copies of the bf16 state). Each subject is timed with FlashInfer's
``bench_gpu_time_with_cupti(cold_l2_cache=True)`` (median of its calls) after a short clock
warm-up, ``--repeats`` times in rounds over the subjects. Writes ``DIR/ablation_probe.json``
and prints, per B, each subject's median over the repeats, its range, and its excess over the
full kernel and over the floor (µs). Each repeat also keeps the mean of the calls around its median
(:func:`harness.judge.timing.stats.window_mean`, the same calls): it resolves what one 32-ns CUPTI step
hides, and the report gives it beside the median as ``window_*``. Needs a CUDA GPU, nvcc,
flashinfer-python and cupti-python.

The prediction it tests (written 2026-11-26, before any run; H100, B = 1, where the full kernel
reads 2.05-2.11 µs and the floor 1.79): Nsight's source page priced ~550 cycles (~0.28 µs) after
the state's loads land (the lane exchanges ~300, the wait for ``v`` ~215) and ~400 of setup.
So: ``copy`` (the state copied with the kernel's geometry) within 0.05 µs of the floor (the
geometry costs nothing: the scatter tune tied ten geometries); ``no-exchange`` at least 0.10 µs
under ``full``; ``no-operands`` at most 0.05 µs under ``full`` (their loads fly beside the
state's). If ``no-exchange`` saves nothing, the exchanges are not on the path that sets the
kernel's time, as the one-tick tie of the ``v``-early branch already suggests for ``v``.

Measured (H200, 956f25b, the first five builds): ``no-operands`` 0.13-0.16 µs under ``full`` at
every B <= 8, ``no-exchange`` 0.06 under at B = 1 and 0.13-0.26 over at B = 2-8, ``copy`` 0.03
over the floor at B = 1, 2 and 8 (results/ablation/20261126-H200). The operands prediction was
wrong. Second prediction (before the finer builds ran): the operands' cost is ``v``'s second
round trip, so ``no-v`` and ``v-early`` each take >= 0.1 µs off ``full`` at B = 1, and
``no-qk``, ``no-gates`` and ``operands-first`` <= 0.03 (one CUPTI tick).

Measured (H200, 0a2c1d7): wrong again. ``no-gates`` takes 0.10-0.13 µs off at every B <= 8,
``no-v``, ``v-early`` and ``operands-first`` nothing (found later: ``v-early`` at B = 2-8 and
``operands-first`` at B = 1 compiled to the full build's code, which :func:`same_code_as_full`
now flags). The SASS shows why: expf, log1pf and the
IEEE division are long sequences with slow-path branches, emitted as one chain before the row
sums, so a warp runs them after its loads land and before its first dot product. Third
prediction (before ``fast-gates`` ran): branch-free SFU gates take 0.03-0.13 µs off ``full`` at
B = 1-8, at most what ``no-gates`` takes. Measured (H200, 4274833): -0.096 at B = 1, -0.031 at
B = 2, +0.03 at B = 4 and 8 with the table's variants for the shipped build: in range at B = 1-2
only (results/cuda-notes.md). Tuned (H100, c73de30, 3 rounds each, each side's best variant):
-0.07..-0.11 µs at B = 1-4, +0.00..+0.09 at B = 8. The fast gates shipped; the build that was
shipped before is the candidate ``precise-gates`` now.

Prediction for ``index-32`` (32-bit element offsets; written before its first run, 2026-11-26):
0 to -0.03 µs at B = 1-8 and nothing at B = 32. In the SASS of the H100's B = 1 and B <= 4 variants
(nvcc 13.0 sm_90a) the first state load moves from the 46th instruction to the 32nd, and what it
waits on after the block-index reads shrinks from about ten dependent 64-bit steps to four: some
20-40 cycles of a ~4,000-cycle call, at most one CUPTI tick. Measured (H100, a4595fd, two runs):
+0.03 µs at B = 1-2, +0.32 at B = 8, +0.13 at B = 32: refuted (results/ablation/20261126-H100-index32).

Predictions for ``sk-all-reduce`` (the stores wait on 4 shuffle steps instead of 6 at B = 1: -0.016 to
-0.032 µs there, ties at B = 2-8) and ``warm-stores`` (lane 0 prefetches a line of each destination as
the loads go out: -0.03 to -0.1 µs at B = 1-8 if a cold translation is on the tail), written in
kernel.cu before their runs (2026-11-27). Measured (H100, 0a89fc0 and 1a0eab1, two runs each): both
refuted, ties or one tick slower at B = 1 and 0.26 / 0.42 µs slower at B = 8
(results/ablation/20261127-H100-sk-all-reduce-warm-stores).

Window means since 7f44ff9 (each round's calls within ±5% of its median, averaged: they resolve below
CUPTI's 32 ns step, repeating within 2-4 ns on an H100). Measured (H100, 7f0e1c5, results/ablation/
20261127-H100-sub-tick): the candidates the medians had called ties at B = 1 were slower (v-early +17 ns,
index-32 +17, sk-all-reduce +22, warm-stores +4); of the ablations only no-qk (-25 ns at B = 1, -27 at
B = 2) and no-operands-no-exchange (-60) ran faster. The builds written after it, each with its prediction
in kernel.cu, were refuted: ``output-last`` (-4 / -1 ns at B = 1 / 2, +66 at B = 8) and the ``qk-private``
ablation (+0.23 µs and more: its own lines come from DRAM) on an H100 (results/ablation/20261127-H100-output-last),
``kq-early`` and ``gates-early`` (0.08-0.18 µs slower at every B <= 8) on an H200
(results/ablation/20261127-H200-early).

The cluster builds (predictions in kernel.cu, before their runs, 2026-11-28): ``cluster-sync`` and
``cluster-sync-first`` pay the cluster barrier a multicast of the small operands needs, ``qk-multicast`` (ccaafb0,
removed after its run) was that multicast for q and k. Measured (H100, dbdca62 and ccaafb0, results/ablation/20261128-H100-cluster-multicast): the
barrier after the state's loads costs nothing at B = 1-2 (+3 / -2 ns), the multicast +0.32 µs at B = 1.

The bf16 state at B = 128 on an H200 (results/ablation/20261128-H200-bf16-b128-split): the ablations split little of
the 0.95 µs between the table's pick and its copy build (no-operands-no-exchange -0.21, no-exchange +0.22); the
lean-sums candidates (sums-in-place 524288, kq-once 1048576: 27 instructions a thread fewer) -0.03, and the warps
candidates (more warps an SM under tighter register caps, results/tuning/20261128-H200-bf16-occupancy) 0.4-1.2 µs
slower; all five were removed (their build: 02d788b). The copy build takes 28 registers where full takes 64, so it
runs twice the warps an SM. ``copy-at-bound-warps`` (9c83dd4) padded its shared memory to hold no more blocks than the
full build's bound; its control, ``bound-warps``, the full build padded, read 0.67-0.98 µs slower than full at the
same warps an SM. The pad is not neutral, so the pair could not price the warps, and both were removed
(results/ablation/20261128-H200-bf16-copy-at-bound-warps).
The carveout candidates (16777216, 33554432 at 47353fa) then named the pad's cost: the most shared memory for the
shipped kernel (L1 shrunk, no pad) +0.67 / +0.92 µs at B = 32 / 128, the most L1 nothing
(results/ablation/20261128-H200-carveout). ``copy-held`` (ablation 272) holds the copy build to full's warps by
registers instead: 0.71 of its 0.95-µs lead at B = 128 is the warps (results/ablation/20261128-H200-bf16-fixed-carveout).
``l2-prefetch`` and ``l2-prefetch-quarter`` prefetch a later block's rows to L2: -0.30..-0.51 µs at bf16 B = 128 half
a wave ahead, +0.22..+0.64 at B = 32, where they prefetch nothing (results/ablation/20261128-H200-bf16-l2-prefetch).
``l2-prefetch-lines`` (warp 0's lanes, ``prefetch.global.L2``) read the same +0.64 at B = 32 (run-5): the cost is the
schedule ptxas gives the code around a branch, not the bulk unit. The ``-idle`` builds are the controls: the same code,
no target ever (run-6). ``l2-prefetch-entry`` calls the predicated form before the block's own state loads, where the
SASS of the bf16 picks keeps full's order (run-7). ``tools/dirty_l2_probe.py`` then timed the lines form after a clean
flush too: +0.68 µs against its control at B = 128, where the judge's flush read -0.55. The prefetch gained by moving
the flush's write-backs, and its forms were removed (their build: 75d2bc6; results/ablation/20261128-H200-dirty-l2).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools.probe_cli import batch_sizes, has_gpu, probe_parser, spread, write_report
from tools.timing_proof import in_fresh_process

#: name -> kernel.cu's GDN_V4_ABLATE flags (kAblateQK 1, kAblateGates 2, kAblateV 4, kAblateExchange 8,
#: kAblateMath 16, kAblateQKPrivate 32, kAblateHeldRegisters 256): each build leaves that work out (qk-private: the
#: sharing of q's and k's lines; copy-held: the copy build's spare registers, so an SM holds as few of its blocks as
#: of full's; 64, bound-warps, at 9c83dd4, and the fixed-carveout pair, 128 and candidate 67108864 at b2d2cbe, were
#: removed after their runs).
ABLATIONS = {"full": 0, "no-qk": 1, "no-gates": 2, "no-v": 4, "no-operands": 7, "no-exchange": 8,
             "no-operands-no-exchange": 15, "copy": 16, "qk-private": 32, "copy-held": 272}
#: name -> kernel.cu's GDN_V4_CANDIDATE flags (kCandidateVEarly 1, kCandidateOperandsFirst 2, kCandidatePreciseGates 4,
#: kCandidateAllReduce 8, kCandidateSharedQK 16, kCandidateIndex32 32, kCandidateBf16Packed 128 (the bf16
#: state's kernels only: --state-dtype bfloat16), kCandidateSkAllReduce 1024, kCandidateWarmStores 2048,
#: kCandidateOutputLast 4096, kCandidateKqEarly 8192, kCandidateGatesEarly 16384, kCandidateClusterSync 32768,
#: kCandidateClusterSyncFirst 65536). The first L2-prefetch candidates, 134217728 and 268435456 at b9c1505, were
#: replaced after their run; qk-multicast, 131072 at ccaafb0, bf16-mma, 262144 at b8c0192, the lean-sums and warps
#: candidates, 524288-8388608 at 02d788b, the carveout candidates, 16777216 and 33554432 at 47353fa, loads-evict-first,
#: 34359738368 (its control 103079215104, and the copy built with it) at 66addcf, and the L2-prefetch forms
#: (l2-prefetch 536870912, -quarter 1610612736, -lines 2684354560, -lines-idle 11274289152, -predicated 6979321856,
#: -predicated-idle 15569256448, -entry 24159191040, -entry-idle 32749125632, -entry-quarter 25232932864) at 75d2bc6, and
#: the pipelined kernel, 137438953472 with its GDN_V4_PIPE_* shapes, at 8760d03, were removed after their runs; the
#: halves candidate, 32 at b280400, is the variants' passes now, and the bf16-staged candidate, 512 at d180165, their
#: ``staged``).
CANDIDATES = {"v-early": 1, "operands-first": 2, "v-early-operands-first": 3, "precise-gates": 4,
              "precise-gates-operands-first": 6, "all-reduce": 8, "shared-qk": 16, "index-32": 32, "bf16-packed": 128,
              "sk-all-reduce": 1024, "warm-stores": 2048, "output-last": 4096, "kq-early": 8192, "gates-early": 16384,
              "kq-gates-early": 24576, "cluster-sync": 32768, "cluster-sync-first": 65536}
#: name -> the build's nvcc macros (``-D`` without the dash): every ablation and candidate.
BUILDS = {**{name: (f"GDN_V4_ABLATE={flags}",) if flags else () for name, flags in ABLATIONS.items()},
          **{name: (f"GDN_V4_CANDIDATE={flags}",) for name, flags in CANDIDATES.items()}}
#: Seconds of back-to-back calls before each timing: an idle H100 times µs kernels up to 2x slow
#: (tools.tier_parity.warm).
WARM_S = 0.3
TORCH_COPY = "torch copy_"


def declared_state_dtypes() -> tuple[str, ...]:
    """The state dtypes cuda-v4's solution.toml declares: the probe's ``--state-dtype`` choices."""
    from harness.judge.solutions import load_meta
    from harness.paths import SOLUTIONS_DIR

    return load_meta(SOLUTIONS_DIR / "cuda-v4").state_dtypes


def build_ablations(workdir: Path, names: list[str]) -> dict:
    """``{name: cuda-v4 entry module}``, one build per name (of :data:`BUILDS`), each loaded into
    this process from a folder of its own under ``workdir`` (modules stay distinct: each holds
    its own kernel.so)."""
    from harness.judge.solutions import load_meta, load_solution
    from harness.paths import SOLUTIONS_DIR

    meta = load_meta(SOLUTIONS_DIR / "cuda-v4")
    builds = {}
    for name in names:
        module = load_solution(meta, workdir / name, defines=BUILDS[name])
        module.load()
        builds[name] = module
    return builds


def misbuilt(builds: dict, inputs: dict, state_dtype: str = "float32") -> list[str]:
    """The builds that compute what they should not: an ablation whose results equal the full
    build's bit for bit (it would time the full kernel under another name, e.g. a build not
    loaded as its own) or a candidate whose results fail the judge's tolerance for a state of
    ``state_dtype`` against it (a candidate must compute the same). Empty if every build is what
    its name says. (A candidate that compiles to the full build's code passes here:
    :func:`same_code_as_full`.)"""
    import torch

    from harness.judge.check import out_of_tolerance
    from tools.tune.measure import state_tolerance

    tolerance = state_tolerance(state_dtype)

    def agrees(mine: tuple, theirs: tuple) -> bool:
        return not any(out_of_tolerance(a.double(), b.double(), tolerance).any() for a, b in zip(mine, theirs))

    def results(module) -> tuple:
        given = {**inputs, "output": inputs["output"].clone(), "new_state": inputs["new_state"].clone()}
        module.run(given)
        return given["output"], given["new_state"]

    full = results(builds["full"])
    wrong = []
    for name, module in builds.items():
        mine = results(module)
        if name in CANDIDATES and not agrees(mine, full):
            wrong.append(name)
        elif name in ABLATIONS and name != "full" and all(torch.equal(a, b) for a, b in zip(mine, full)):
            wrong.append(name)
    return wrong


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


def probe_batch(batch: int, repeats: int, names: list[str], state_dtype: str = "float32") -> dict:
    """One batch size with a state of ``state_dtype``: ``{"launch": config name, "kernel": its
    template arguments (WARPS, ROWS, POLICY, LANES, PASSES, STAGED), "misbuilt": [...], "times_us":
    {subject: [median µs per repeat]}, "window_means_us": {subject: [window mean µs per repeat]}}``;
    the copies copy that state."""
    from tools.probe_cli import cupti_point
    from tools.tier_parity import solution_inputs, warm
    from tools.tune.cuda_v4 import config_name

    with tempfile.TemporaryDirectory() as workdir:
        builds = build_ablations(Path(workdir), names)
        _, inputs = solution_inputs(batch, state_dtype)
        wrong = misbuilt(builds, inputs, state_dtype)
        calls = subjects(builds, inputs)
        times: dict[str, list[float]] = {name: [] for name in calls}
        window_means: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(repeats):
            for name, call in calls.items():
                warm(call, (), WARM_S)
                median, window = cupti_point(call)
                times[name].append(median)
                window_means[name].append(window)
        config = builds["full"].launch_config(batch, state_dtype)
        kernel = (config.warps_per_block, config.rows_per_warp, builds["full"].CACHE_POLICIES.index(config.cache_policy),
                  config.lanes_per_row, config.passes, int(config.staged))
    return {"launch": config_name(config), "kernel": kernel, "misbuilt": wrong, "times_us": times,
            "window_means_us": window_means}


def same_code_as_full(names: list[str], kernels: dict[int, tuple], target: tuple[str, str],
                      state_dtype: str = "float32") -> dict[int, list[str]]:
    """``{B: [candidates]}``: the candidates whose build of the kernel launched at B (``kernels``:
    B -> its template arguments; the kernel of a ``state_dtype`` state) is the full build's
    machine code for ``target``, byte for byte
    (their times are the full kernel's under another name: ptxas may schedule a change in source
    order away, and a candidate may leave some variants alone). Compiles each build once (nvcc,
    the shipped flags; a few seconds each).

    Raises:
        harness.judge.build.CompileError: nvcc or tvm-ffi missing, or a build does not compile.
    """
    import re

    from harness.judge.build import kernel_code
    from harness.paths import SOLUTIONS_DIR
    from tools.tune.cuda_v4 import KERNEL_NAME, KERNEL_NAME_BF16

    kernel_name = KERNEL_NAME_BF16 if state_dtype == "bfloat16" else KERNEL_NAME

    def by_variant(code: dict[str, bytes]) -> dict[tuple, bytes]:
        return {tuple(map(int, found.groups())): text for name, text in code.items()
                if (found := re.search(kernel_name, name))}

    source = SOLUTIONS_DIR / "cuda-v4" / "kernel.cu"
    full = by_variant(kernel_code(source, target))
    codes = {name: by_variant(kernel_code(source, target, BUILDS[name])) for name in names if name in CANDIDATES}
    return {batch: [name for name, code in codes.items() if code[kernel] == full[kernel]]
            for batch, kernel in kernels.items()}


def summarize(batch: int, probed: dict) -> list[dict]:
    """Rows of one batch size: each subject's median over the repeats (µs), its range, and its
    excess over the full kernel and over the floor (the fastest copy's median); where the repeats
    kept window means (runs since 2026-11-27), the same of them under ``window_`` keys."""
    rows = [{"batch_size": batch, "subject": name, **point} for name, point in excess(probed["times_us"]).items()]
    if "window_means_us" in probed:
        windowed = excess(probed["window_means_us"])
        for row in rows:
            row.update({f"window_{key}": value for key, value in windowed[row["subject"]].items()})
    return rows


def excess(times_us: dict[str, list[float]]) -> dict[str, dict]:
    """``{subject: {**spread, "minus_full_us", "over_floor_us"}}`` of ``{subject: [µs per repeat]}``:
    the median over the repeats less the full kernel's and less the fastest copy's."""
    points = {name: spread(times) for name, times in times_us.items()}
    floor = min(point["median_us"] for name, point in points.items() if name not in BUILDS)
    return {name: {**point, "minus_full_us": point["median_us"] - points["full"]["median_us"],
                   "over_floor_us": point["median_us"] - floor} for name, point in points.items()}


def parse_build_probe(argv: list[str] | None, doc: str, batches: str, builds: str, state_dtype: str,
                      probe: str) -> tuple | None:
    """The command line of a probe of cuda-v4's builds (this one, tools/dirty_l2_probe.py): :func:`probe_parser`'s
    options (``doc``, default ``batches``) with ``--builds`` (default ``builds``) and ``--state-dtype`` (default
    ``state_dtype``). ``(args, build names with full first and each once, batch sizes)``, or None after an error line
    (a build not in BUILDS, a bad ``--batches``, no GPU for ``probe``)."""
    parser = probe_parser(doc, batches)
    parser.add_argument("--builds", default=builds,
                        help="comma-separated names of BUILDS to time (full is always timed)")
    parser.add_argument("--state-dtype", choices=declared_state_dtypes(), default=state_dtype,
                        help="the state's dtype (bfloat16: cuda-v4's bf16-state kernels and copies of that state)")
    args = parser.parse_args(argv)
    names = ["full", *dict.fromkeys(n for n in args.builds.split(",") if n and n != "full")]
    if unknown := [n for n in names if n not in BUILDS]:
        print(f"error: --builds: no build named {', '.join(unknown)} (known: {', '.join(BUILDS)})", file=sys.stderr)
        return None
    chosen = batch_sizes(args.batches)
    if chosen is None or not has_gpu(probe):
        return None
    return args, names, chosen


def refuse_misbuilt(batch: int, wrong: list[str]) -> bool:
    """Whether :func:`misbuilt` found builds at ``batch``; if so, an error line naming them on stderr."""
    if wrong:
        print(f"error: B={batch}: {', '.join(wrong)}: an ablation computed what the full build did, or a candidate "
              "did not", file=sys.stderr)
    return bool(wrong)


def main(argv: list[str] | None = None) -> int:
    parsed = parse_build_probe(argv, __doc__, "1,2,4,8", ",".join(BUILDS), "float32", "the ablation probe")
    if parsed is None:
        return 2
    args, names, batches = parsed
    import torch

    probed = {}
    for batch in batches:
        probed[batch] = in_fresh_process(probe_batch, batch, max(1, args.repeats), names, args.state_dtype)
        if refuse_misbuilt(batch, probed[batch]["misbuilt"]):
            return 1
    major, minor = torch.cuda.get_device_capability()
    target = (f"compute_{major}{minor}a", f"sm_{major}{minor}a")
    same = same_code_as_full(names, {batch: tuple(p["kernel"]) for batch, p in probed.items()}, target, args.state_dtype)
    rows = []
    for batch in batches:
        for row in summarize(batch, probed[batch]):
            row["same_code_as_full"] = row["subject"] in same[batch] if row["subject"] in CANDIDATES else None
            rows.append(row)
            print(f"B={batch} {row['subject']:<34} {row['median_us']:.3f} µs ({row['min_us']:.3f}-{row['max_us']:.3f})"
                  f"  vs full {row['minus_full_us']:+.3f}  over floor {row['over_floor_us']:+.3f}"
                  f"  | window mean {row['window_median_us']:.4f} ({row['window_min_us']:.4f}-{row['window_max_us']:.4f})"
                  f" vs full {row['window_minus_full_us']:+.4f}"
                  + ("  [the full build's code]" if row["same_code_as_full"] else ""))
    write_report(args.out, "ablation_probe", state_dtype=args.state_dtype, builds={name: BUILDS[name] for name in names},
                 launch_configs={batch: p["launch"] for batch, p in probed.items()}, target=target[1],
                 timer="flashinfer.testing.bench_gpu_time_with_cupti(cold_l2_cache=True), median; window_*: "
                       "harness.judge.timing.stats.window_mean of the same calls", rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
