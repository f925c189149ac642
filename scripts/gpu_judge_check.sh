#!/usr/bin/env bash
# The GPU checks of the judge (issue #15), in steps small enough for a GPU session that limits
# each command's time. Every step packs what it wrote into one file, OUT/<step>.tgz, for a
# remote runner that returns only a few files of a command.
# usage: scripts/gpu_judge_check.sh OUT STEP...
#   attacks-gpu   tests/fixtures/attacks_gpu, judged with the GPU tiers (about 1.5 min)
#   attacks-cpu   tests/fixtures/attacks, judged with the GPU tiers (about 5 min)
#   new-a, new-b  the side-by-side sweep (results/targets.md's kernels) with this tree, in two groups
#   old           the same sweep with the harness in .before/ (`git archive 2026d30 | tar -x -C .before`)
#   v1-all        the README's `python run_local.py --algo all` (contest-v1), timed (issue #17: under 3 min)
#   parity        tools/tier_parity.py: each tier beside the timer it names, in a plain process (issue #29)
#   v2-gpus       `--algo all --workloads contest-v2 --gpus all`, timed (issue #31: a machine of several GPUs)
#   v2-one        the same on one GPU, timed, to set beside v2-gpus (stops at V2_LIMIT_S, 570 s by default)
#   v2-one-start  v2-one in a session of its own (setsid), so it outlives this command: for a run
#                 longer than one command may be; V2_LIMIT_S=1500 unless set
#   v2-one-wait   wait (up to WAIT_S, 570 s by default) for v2-one-start's run, then pack it here
# Each step stops itself with Ctrl-C (the judge writes what finished) before the command's limit.
set -uo pipefail
OUT=${1:?usage: gpu_judge_check.sh OUT STEP...}
shift
export PYTHONUNBUFFERED=1
GROUP_A=fla-recurrent,fla-upstream,fla-upstream-kernel,cuda-v1
GROUP_B=cuda-v4,cutedsl-bf16,fi-baseline,fi-bf16state
COMMIT=${GDN_BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT"
pack() { tar czf "$OUT/$1.tgz" -C "$2" . && echo "packed $OUT/$1.tgz"; }
sweep() {  # sweep STEP ROOT ALGO LIMIT_S COMMIT
  local work=/tmp/gdn-check-$1
  (cd "$2" && GDN_BENCH_COMMIT=$5 timeout -s INT "$4" python run_local.py --results "$work" --no-progress \
     --algo "$3" --workloads sweep > "$work.log" 2>&1; echo "rc=$?" >> "$work.log")
  mkdir -p "$work" && cp "$work.log" "$work/console.log" && tail -25 "$work.log" && pack "$1" "$work"
}
for step in "$@"; do
  echo "== $step ($(date -u +%H:%M:%S))"
  case $step in
    attacks-gpu) GDN_BENCH_COMMIT=$COMMIT timeout -s INT 240 python scripts/gpu_attacks.py /tmp/gdn-check-$step --sets gpu
                 cat /tmp/gdn-check-$step/attacks.md; pack "$step" /tmp/gdn-check-$step ;;
    attacks-cpu) GDN_BENCH_COMMIT=$COMMIT timeout -s INT 420 python scripts/gpu_attacks.py /tmp/gdn-check-$step --sets cpu
                 cat /tmp/gdn-check-$step/attacks.md; pack "$step" /tmp/gdn-check-$step ;;
    new-a)       sweep "$step" . "$GROUP_A" 540 "$COMMIT" ;;
    new-b)       sweep "$step" . "$GROUP_B" 540 "$COMMIT" ;;
    old)         sweep "$step" .before "$GROUP_A,$GROUP_B" 540 2026d30 ;;
    v1-all)      mkdir -p /tmp/gdn-check-v1
                 ( time GDN_BENCH_COMMIT=$COMMIT timeout -s INT 540 python run_local.py --results /tmp/gdn-check-v1 \
                   --no-progress --algo all ) > /tmp/gdn-check-v1/console.log 2>&1
                 tail -30 /tmp/gdn-check-v1/console.log; pack "$step" /tmp/gdn-check-v1 ;;
    v2-gpus|v2-one)
                 lanes=(--gpus all); [ "$step" = v2-one ] && lanes=(--device cuda:0)
                 mkdir -p /tmp/gdn-check-$step
                 ( time GDN_BENCH_COMMIT=$COMMIT timeout -s INT "${V2_LIMIT_S:-570}" python run_local.py --results /tmp/gdn-check-$step \
                   --no-progress --algo all --workloads contest-v2 "${lanes[@]}" ) > /tmp/gdn-check-$step/console.log 2>&1
                 tail -30 /tmp/gdn-check-$step/console.log; pack "$step" /tmp/gdn-check-$step ;;
    v2-one-start) mkdir -p /tmp/gdn-bg
                 V2_LIMIT_S=${V2_LIMIT_S:-1500} GDN_BENCH_COMMIT=$COMMIT setsid bash "$0" /tmp/gdn-bg v2-one \
                   > /tmp/gdn-bg.log 2>&1 < /dev/null &
                 echo "started v2-one in its own session (pid $!); log /tmp/gdn-bg.log" ;;
    v2-one-wait) waited=0
                 while [ ! -f /tmp/gdn-bg/v2-one.tgz ] && [ "$waited" -lt "${WAIT_S:-570}" ]; do sleep 10; waited=$((waited + 10)); done
                 tail -30 /tmp/gdn-bg.log
                 if [ -f /tmp/gdn-bg/v2-one.tgz ]; then cp /tmp/gdn-bg/v2-one.tgz "$OUT/"; echo "packed $OUT/v2-one.tgz"
                 else echo "v2-one still running after ${waited} s: call v2-one-wait again"; fi ;;
    parity)      GDN_BENCH_COMMIT=$COMMIT timeout -s INT 540 python -m tools.tier_parity --out /tmp/gdn-check-parity \
                   > /tmp/gdn-check-parity.log 2>&1; mkdir -p /tmp/gdn-check-parity
                 cp /tmp/gdn-check-parity.log /tmp/gdn-check-parity/console.log; tail -45 /tmp/gdn-check-parity.log
                 pack "$step" /tmp/gdn-check-parity ;;
    *)           echo "unknown step $step" ;;
  esac
done
