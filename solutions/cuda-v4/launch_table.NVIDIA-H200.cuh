// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H200
// commit: b25d6a5b025f
// command: python -m tools.tune --algo cuda-v4 --out /tmp/tune
// date_utc: 2026-11-23T18:39:30+00:00
// tier: cupti
// report: results/tuning/20261123-H200/cuda-v4/NVIDIA-H200.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H200",
  X(1, 2, kPlain, 32, 8)
  X(2, 8, kStream, 8, 2)
  X(4, 8, kStream, 8, 4)
  X(8, 8, kNoAlloc, 8, 4)
  X(16, 2, kNc, 32, 4)
  X(32, 8, kStream, 16, 4)
  X(128, 8, kNc, 16, 2)
  X(INT64_MAX, 8, kPlain, 16, 1))
