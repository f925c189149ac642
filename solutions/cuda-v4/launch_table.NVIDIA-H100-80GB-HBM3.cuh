// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H100 80GB HBM3
// commit: 0c42465
// command: python tools/tune_cuda_v4.py (now python -m tools.tune --algo cuda-v4)
// date_utc: 2026-11-23
// tier: cupti
// report: results/tuning/cuda_tune_scatter_small.json (B <= 32), results/tuning/cuda_tune_scatter_large.json (B >= 64); the ".../rs" variants, chosen by tools.tune.measure.steady_choice
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H100 80GB HBM3",
  X(1, 2, kNoAlloc, 32, 8)
  X(2, 8, kNc, 8, 2)
  X(4, 4, kNoAlloc, 16, 8)
  X(8, 8, kNoAlloc, 8, 4)
  X(16, 4, kNoAlloc, 16, 8)
  X(32, 8, kNoAlloc, 16, 2)
  X(128, 8, kNc, 16, 2)
  X(INT64_MAX, 16, kNc, 16, 4))
