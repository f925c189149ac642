// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H200
// commit: e8a4397+
// command: python -m tools.tune --algo cuda-v4 --out /tmp/h2/tune
// date_utc: 2026-11-26T11:00:33+00:00
// tier: cupti
// report: results/tuning/20261126-H200-fast-gates/cuda-v4/NVIDIA-H200.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H200",
  X(1, 4, kNc, 16, 4, 1)
  X(8, 4, kNoAlloc, 16, 4, 1)
  X(16, 4, kNoAlloc, 32, 8, 1)
  X(32, 16, kNoAlloc, 8, 2, 1)
  X(64, 16, kPlain, 8, 2, 1)
  X(128, 8, kPlain, 32, 1, 1)
  X(INT64_MAX, 8, kPlain, 16, 1, 1))
