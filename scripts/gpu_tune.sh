#!/usr/bin/env bash
# Launch-table tuning and the timing-tier proof, on a GPU machine (~5 minutes).
# usage: scripts/gpu_tune.sh OUTDIR
# Writes OUTDIR/tuning/{cuda_tune.json,cutedsl_tune.json,*.log} and
# OUTDIR/proof/{timing_proof.json,timing_proof.md}; copy what you keep into
# results/tuning and results/proof.
set -uo pipefail
OUT=${1:?usage: gpu_tune.sh OUTDIR}
mkdir -p "$OUT/tuning" "$OUT/proof"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/tuning/gpu.txt"
python -m harness.cupti 2>&1 | tee "$OUT/tuning/cupti_smoke.log"
python solutions/cuda-v4/tune.py --out "$OUT/tuning" 2>&1 | tee "$OUT/tuning/cuda_tune.log"
python solutions/cutedsl-bf16/tune.py --out "$OUT/tuning" 2>&1 | tee "$OUT/tuning/cutedsl_tune.log"
python -m harness.timing_proof --out "$OUT/proof" 2>&1 | tee "$OUT/proof/timing_proof.log"
