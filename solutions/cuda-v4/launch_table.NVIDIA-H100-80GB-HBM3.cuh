// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H100 80GB HBM3
// commit: e39b833
// command: python -m tools.tune --algo cuda-v4 --rounds 3 --out /tmp/h7/tune-rounds
// date_utc: 2026-11-26T17:33:43+00:00
// tier: cupti
// report: results/tuning/20261126-H100-rounds/tune/NVIDIA-H100-80GB-HBM3.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes, staged); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H100 80GB HBM3",
  X(1, 4, kNc, 16, 2, 1, 0)
  X(4, 4, kPlain, 16, 4, 1, 0)
  X(8, 4, kNc, 16, 4, 2, 0)
  X(16, 16, kNoAlloc, 8, 2, 2, 0)
  X(32, 16, kStream, 8, 2, 2, 0)
  X(128, 8, kNc, 16, 2, 1, 0)
  X(INT64_MAX, 8, kPlain, 16, 2, 1, 0))
// The bf16 state's table, of the same form, from another tune:
// bf16 device: NVIDIA H100 80GB HBM3
// bf16 commit: 824d97b
// bf16 command: python -m tools.tune --algo cuda-v4 --rounds 3 --dtypes bfloat16 --out /tmp/gdn-check-tune-ab/tune
// bf16 date_utc: 2026-11-27T06:13:24+00:00
// bf16 tier: cupti
// bf16 report: results/tuning/20261127-H100-tune-ab-bf16-staged/tune/cuda-v4/NVIDIA-H100-80GB-HBM3.json
GDN_V4_GPU_BF16("NVIDIA H100 80GB HBM3",
  X(2, 2, kNc, 32, 8, 1, 0)
  X(4, 4, kStream, 16, 4, 1, 0)
  X(8, 4, kStream, 32, 8, 1, 0)
  X(16, 8, kPlain, 32, 4, 2, 0)
  X(32, 16, kPlain, 16, 2, 2, 0)
  X(64, 16, kNoAlloc, 16, 1, 2, 1)
  X(128, 16, kPlain, 16, 1, 2, 1)
  X(256, 8, kPlain, 32, 8, 2, 0)
  X(INT64_MAX, 8, kNc, 16, 8, 1, 0))
