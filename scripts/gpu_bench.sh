#!/usr/bin/env bash
# The benchmark runs behind results/runs (one GPU, ~10 minutes):
# every solution, the three tiers, on the sweep set and on contest-v2.
# usage: scripts/gpu_bench.sh RESULTS_DIR   (default results/)
set -uo pipefail
RESULTS=${1:-results}
export PYTHONUNBUFFERED=1
for set in sweep contest-v2; do
  python run_local.py --algo all --workloads "$set" --tiers cupti,events,sync --results "$RESULTS" --no-progress
done
