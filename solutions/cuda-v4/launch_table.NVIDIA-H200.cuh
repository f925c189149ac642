// cuda-v4's launch table on one GPU (included by launch_tables.cuh; no include guard).
// device: NVIDIA H200
// commit: c063876
// command: python -m tools.tune --algo cuda-v4 --rounds 3 --out /tmp/gdn-check-tune-ab/tune
// date_utc: 2026-11-27T02:33:18+00:00
// tier: cupti
// report: results/tuning/20261127-H200-tune-ab-bf16/tune/cuda-v4/NVIDIA-H200.json
// X(largest batch, rows per warp, cache policy, lanes per row, warps per block, passes, staged); the first entry
// whose limit is >= batch wins, the last (INT64_MAX) covers every batch.
GDN_V4_GPU("NVIDIA H200",
  X(2, 4, kNoAlloc, 16, 4, 1, 0)
  X(4, 4, kPlain, 16, 4, 1, 0)
  X(8, 4, kNoAlloc, 16, 4, 1, 0)
  X(16, 4, kNoAlloc, 16, 2, 1, 0)
  X(32, 16, kNoAlloc, 8, 2, 2, 0)
  X(64, 16, kNc, 8, 1, 1, 0)
  X(128, 8, kNc, 32, 1, 1, 0)
  X(256, 8, kPlain, 16, 1, 1, 0)
  X(INT64_MAX, 8, kNc, 16, 1, 1, 0))
// The bf16 state's table, of the same form, from another tune:
// bf16 device: NVIDIA H200
// bf16 commit: 68ef0f3
// bf16 command: python -m tools.tune --algo cuda-v4 --rounds 3 --dtypes bfloat16 --out /tmp/gdn-check-tune-ab/tune
// bf16 date_utc: 2026-11-27T10:44:33+00:00
// bf16 tier: cupti
// bf16 report: results/tuning/20261127-H200-tune-ab-bf16-staged/tune/cuda-v4/NVIDIA-H200.json
GDN_V4_GPU_BF16("NVIDIA H200",
  X(1, 2, kStream, 16, 8, 1, 0)
  X(2, 2, kNoAlloc, 32, 8, 1, 0)
  X(8, 4, kNoAlloc, 32, 8, 1, 0)
  X(32, 8, kStream, 32, 4, 2, 0)
  X(64, 16, kNoAlloc, 16, 1, 2, 1)
  X(128, 8, kPlain, 32, 4, 2, 0)
  X(INT64_MAX, 16, kPlain, 16, 4, 2, 0))
