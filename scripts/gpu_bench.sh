#!/usr/bin/env bash
# The benchmark runs behind results/runs, in pieces that each fit one 10-minute
# GPU command (an H100: pt-reference alone takes ~6 minutes on contest-v2).
# usage: scripts/gpu_bench.sh RESULTS_DIR STEP...
#   kernels     every kernel side by side on the sweep set (the run results/targets.md judges)
#   sweep-base  pt-reference, pt-compiled on the sweep set
#   v2-ref      pt-reference on contest-v2
#   v2-a, v2-b  the other solutions on contest-v2, in two groups
#   v1          every solution on contest-v1
# Slow baselines get fewer timed calls (--budget 0.5 --min-iters 3); recorded in run.json.
set -uo pipefail
RESULTS=${1:?usage: gpu_bench.sh RESULTS_DIR STEP...}
shift
export PYTHONUNBUFFERED=1
KERNELS=fla-recurrent,fla-upstream,fla-upstream-kernel,cuda-v1,cuda-v4,cutedsl-bf16,fi-baseline,fi-bf16state
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
    *)          echo "unknown step $step" ;;
  esac
done
