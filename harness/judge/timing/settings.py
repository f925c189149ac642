"""What a tier may do: :class:`TimingConfig` (the user's counts and budget) and the fixed
settings of the timers the tiers reproduce (the contest's loops, the clock warm-up's bounds)."""

from __future__ import annotations

from dataclasses import dataclass

#: The contest's do_bench settings, reproduced by the sync tier.
SYNC_WARMUP, SYNC_ITERS, SYNC_TRIALS = 10, 50, 3
#: Most calls of a clock warm-up, however the host clock reads (a solution can
#: patch time.perf_counter in its own process). The H100 makes ~2,000 flush +
#: call pairs of a µs kernel in the default 0.2 s, so an honest warm-up is cut
#: only on faster GPUs, and still lasts tens of ms there. 20,000 was too many:
#: the patch-timer fixture, ~0.5 ms a call, then warmed for 10 s per tier and hit
#: the judge's deadline on the H100 (results/judge-check/20261123-H100-session3).
WARM_MAX_CALLS = 2_000
#: flashinfer-bench's call of FlashInfer's CUPTI timer in the final contest (issue #16):
#: ``bench_gpu_time_with_cupti(fn, dry_run_iters=10, repeat_iters=50, input_args=<the
#: positional arguments>, cold_l2_cache=True, use_cuda_graph=False)``, median of the
#: returned per-call spans, 3 trials (its BenchmarkConfig).
CONTEST_SETTINGS = {"dry_run_iters": 10, "repeat_iters": 50, "cold_l2_cache": True, "use_cuda_graph": False}
CONTEST_TRIALS = 3
#: A process that kept the GPU busy less than this many seconds ago finds it at its working
#: clock: its next tier only tops the clock up (``keep_warm_s``) instead of the full ``warm_s``.
IDLE_S = 0.5


@dataclass
class TimingConfig:
    """Iteration counts and the wall-clock budget of one tier on one workload."""

    warmup: int = 10
    iters: int = 100
    trials: int = SYNC_TRIALS
    budget_s: float = 0.3  # slow solutions get fewer iterations, never fewer than min_iters (docs/timing.md)
    min_iters: int = 5
    warm_s: float = 0.2  # seconds of back-to-back flush + call before a GPU tier (clock ramp) ...
    keep_warm_s: float = 0.0  # ... or only this (one call at least) when the GPU was kept busy within IDLE_S
    max_noise: float = 0.005  # stop once the median's 95% CI half-width is this fraction of it (0: never early)
