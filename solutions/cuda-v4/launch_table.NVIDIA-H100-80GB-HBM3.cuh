// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H100 80GB HBM3
// commit: e39b833
// command: python -m tools.tune --algo cuda-v4 --rounds 3 --out /tmp/h7/tune-rounds
// date_utc: 2026-11-26T17:33:43+00:00
// tier: cupti
// report: results/tuning/20261126-H100-rounds/tune/NVIDIA-H100-80GB-HBM3.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H100 80GB HBM3",
  X(1, 4, kNc, 16, 2, 1)
  X(4, 4, kPlain, 16, 4, 1)
  X(8, 4, kNc, 16, 4, 2)
  X(16, 16, kNoAlloc, 8, 2, 2)
  X(32, 16, kStream, 8, 2, 2)
  X(128, 8, kNc, 16, 2, 1)
  X(INT64_MAX, 8, kPlain, 16, 2, 1))
