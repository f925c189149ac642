#!/usr/bin/env bash
# Launch-table tuning and the timing-tier proof, on a GPU machine.
# usage: scripts/gpu_tune.sh OUTDIR [STEP...]   steps: smoke fla cuda cutedsl proof (default: all)
# Writes OUTDIR/tuning/<solution>/<GPU>.json (python -m tools.tune) + logs and
# OUTDIR/proof/{timing_proof.json,timing_proof.md,timing_proof.log}; copy what you
# keep into results/tuning and results/proof. One failing step does not stop the others.
set -uo pipefail
OUT=${1:?usage: gpu_tune.sh OUTDIR [STEP...]}
shift
STEPS=${*:-smoke fla cuda cutedsl proof}
mkdir -p "$OUT/tuning" "$OUT/proof"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/tuning/gpu.txt"
for step in $STEPS; do
  echo "== $step ($(date -u +%H:%M:%S))"
  case $step in
    smoke)   python -m tools.profiler_check 2>&1 | tee "$OUT/tuning/cupti_smoke.log" ;;
    fla)     python -m tools.tune --algo fla-recurrent --out "$OUT/tuning" 2>&1 | tee "$OUT/tuning/fla_tune.log" ;;
    cuda)    python -m tools.tune --algo cuda-v4 --out "$OUT/tuning" 2>&1 | tee "$OUT/tuning/cuda_tune.log" ;;
    cutedsl) python -m tools.tune --algo cutedsl-bf16 --out "$OUT/tuning" 2>&1 | tee "$OUT/tuning/cutedsl_tune.log" ;;
    proof)   python -m tools.timing_proof --out "$OUT/proof" 2>&1 | tee "$OUT/proof/timing_proof.log" ;;
    *)       echo "unknown step $step" ;;
  esac
done
