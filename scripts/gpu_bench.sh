#!/usr/bin/env bash
# The benchmark runs behind results/runs, in steps small enough for a GPU session that limits
# each command's time (what each took is in its results' notes).
# Where the checkout's .git is stale (a copy of the tree), set GDN_BENCH_COMMIT=<commit>.
# usage: scripts/gpu_bench.sh RESULTS_DIR STEP...
#   kernels     every kernel side by side on the sweep set (the run results/targets.md judges)
#   sweep-base  pt-reference, pt-compiled on the sweep set
#   v2-ref      pt-reference on contest-v2
#   v2-a, v2-b  the other solutions on contest-v2, in two groups
#   v1          every solution on contest-v1
#   user-v1     what a newcomer runs: `python run_local.py --algo all` (contest-v1), default settings, timed
#   user-v2     the same on contest-v2, the contest's real set (issue #17: under 3 and 8 minutes on an H100)
#   contest-check  the contest tier beside cupti on the sweep (does CUPTI record again after FlashInfer's finalize?)
#   warm-ab     the same rows with the full warm-up before every tier and with today's top-up, twice each,
#               alternating (do the events and sync figures move with it? results/speed/20261123-H100);
#               compare with tools/compare_runs.py
# Slow baselines get fewer timed calls (--budget 0.5 --min-iters 3); recorded in run.json.
set -uo pipefail
RESULTS=${1:?usage: gpu_bench.sh RESULTS_DIR STEP...}
shift
export PYTHONUNBUFFERED=1
KERNELS=fla-recurrent,fla-upstream,fla-upstream-kernel,cuda-v1,cuda-v4,cutedsl-bf16,fi-baseline,fi-bf16state
TIMEFORMAT="wall %R s"  # what `time` prints for the user-* steps
FAST="--budget 0.5 --min-iters 3 --warm-seconds 0.05"
run() { python run_local.py --results "$RESULTS" --no-progress "$@"; }
for step in "$@"; do
  echo "== $step ($(date -u +%H:%M:%S))"
  case $step in
    kernels)    run --algo "$KERNELS" --workloads sweep ;;
    sweep-base) run --algo pt-reference,pt-compiled --workloads sweep $FAST ;;
    v2-ref)     run --algo pt-reference --workloads contest-v2 $FAST ;;
    v2-a)       run --algo pt-compiled,fla-recurrent,fla-upstream,fla-upstream-kernel,cuda-v1,cuda-v4 --workloads contest-v2 $FAST ;;
    v2-b)       run --algo cutedsl-bf16,fi-baseline,fi-bf16state --workloads contest-v2 $FAST ;;
    v1)         run --algo all --workloads contest-v1 $FAST ;;
    user-v1)    time python run_local.py --results "$RESULTS" --no-progress --algo all ;;
    user-v2)    time python run_local.py --results "$RESULTS" --no-progress --algo all --workloads contest-v2 ;;
    contest-check) run --algo cuda-v4,fi-baseline --workloads sweep --tiers cupti,contest ;;
    warm-ab)    for round in 1 2; do
                  run --algo cuda-v4,fi-baseline,fla-recurrent --workloads sweep --keep-warm-seconds 0.2
                  run --algo cuda-v4,fi-baseline,fla-recurrent --workloads sweep
                done ;;
    *)          echo "unknown step $step" ;;
  esac
done
