// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H100 80GB HBM3
// commit: 91dc3dd+p1row
// command: python -m tools.tune --algo cuda-v4 --out /tmp/h6/tune-p1
// date_utc: 2026-11-26T15:42:27+00:00
// tier: cupti
// report: results/tuning/20261126-H100-passes-one-row/tune/NVIDIA-H100-80GB-HBM3.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H100 80GB HBM3",
  X(4, 4, kPlain, 16, 4, 1)
  X(8, 4, kNoAlloc, 16, 4, 2)
  X(32, 16, kNoAlloc, 8, 2, 2)
  X(128, 8, kNc, 16, 2, 1)
  X(INT64_MAX, 16, kNc, 16, 2, 2))
