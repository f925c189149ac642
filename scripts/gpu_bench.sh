#!/usr/bin/env bash
# The benchmark runs behind results/runs (one GPU, ~20 minutes on an H100):
# every solution, the three tiers, on contest-v2 and on the sweep set.
# usage: scripts/gpu_bench.sh [RESULTS_DIR [run_local.py options...]]   (default results/)
set -uo pipefail
RESULTS=${1:-results}
shift || true
export PYTHONUNBUFFERED=1
for set in contest-v2 sweep; do
  python run_local.py --algo all --workloads "$set" --tiers cupti,events,sync --results "$RESULTS" --no-progress "$@"
done
