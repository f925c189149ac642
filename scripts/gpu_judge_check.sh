#!/usr/bin/env bash
# The GPU checks of the judge (issue #15), in steps small enough for a GPU session that limits
# each command's time. Every step packs what it wrote into one file, OUT/<step>.tgz, for a
# remote runner that returns only a few files of a command.
# usage: scripts/gpu_judge_check.sh OUT STEP...
#   attacks-gpu   tests/fixtures/attacks_gpu, judged with the GPU tiers (about 1.5 min)
#   attacks-cpu   tests/fixtures/attacks, judged with the GPU tiers (about 5 min)
#   new-a, new-b  the side-by-side sweep (results/targets.md's kernels) with this tree, in two groups
#   old           the same sweep with the harness in .before/ (`git archive 2026d30 | tar -x -C .before`)
#   targets-sweep issue #33's sweep: `run_local.py --algo $TARGETS_ALGO --workloads sweep --tiers cupti` (results/targets.md's
#                 own kernels and FlashInfer's; about 1.5-2 min), its run folder packed for results/runs/ (a run folder
#                 left under OUT does not come back whole: 2026-11-28, a sweep's folder was left out for its depth)
#   v1-all        the README's `python run_local.py --algo all` (contest-v1), timed (issue #17: under 3 min)
#   parity        tools/tier_parity.py: each tier beside the timer it names, in a plain process (issue #29);
#                 PARITY_SOLUTIONS picks the solutions (default cuda-v4,fla-recurrent; the copy always),
#                 PARITY_REPEATS the plain-process repeats (default 3: about 8 min, so start:parity, wait:parity;
#                 PARITY_HARNESS_REPEATS the harness runs, in rounds with them (default 1; each ~3 min with 4 solutions);
#                 PARITY_PLAIN_SETS the argument sets the plain cupti and events timers take in turn (default: the tool's, as many as the
#                 timing core takes, up to 8; 1: the runs before 2026-11-26);
#                 PARITY_BATCHES the batch sizes (default the tool's, 1,8,64,512);
#                 it stops at PARITY_LIMIT_S, 540 s, or 1500 s under start:; beside it a stand-in pinned to the last
#                 CPU logs the host's speed, --speed-log, into the pack's speed_log.txt, and nvidia-smi the GPU's clocks
#                 once a second, --clock-log, into gpu_clocks.csv; the report gives them by phase)
#   v2-gpus       `--algo all --workloads contest-v2 --gpus all`, timed (issue #31: a machine of several GPUs)
#   v2-one        the same on one GPU, timed, to set beside v2-gpus (stops at V2_LIMIT_S, 570 s by default)
#   start:STEP    STEP in a session of its own (setsid), so it outlives this command: for a run longer
#                 than one command may be (V2_LIMIT_S=1500 unless set). It returns at once, so a GPU step
#                 after it in the same command shares the GPU with it: start one last, or follow it with
#                 its wait: only (2026-11-28). From a copy of the tree under
#                 BG_DIR (/tmp); wait:STEP waits for it (up to WAIT_S, 570 s by default, less if it ends or
#                 was never started), then packs it here. 570 s leaves no room in a 600-s command for
#                 anything before it (the bundle's install took 40 s to over 2 min): in the same command as the
#                 install, set WAIT_S to what is left (2026-11-27: two calls cut off with nothing printed), or
#                 export CALL_DEADLINE=$(( $(date +%s) + LIMIT )) first thing in the command (LIMIT: the call's
#                 limit in seconds): wait: then stops 20 s before it, whatever came before (2026-11-28: a WAIT_S
#                 reckoned from after the install ran past the call's limit, and nothing came back); every other
#                 step's own time limit then stops 30 s before it too, and the step packs what finished
#                 v2-one-start and v2-one-wait are start:v2-one and wait:v2-one, by their earlier names
#   entries-gpu   the GPU tests of contest entries and the contest tier (CUDA builds, torch binding, CUPTI counts)
#   v2-contest    issue #32 item 5: the own solutions, fi-baseline, pt-reference and baselines/'s wrapper on
#                 contest-v2 under cupti,contest, then `python -m harness score` of that run (both rules)
#   pack-trip     the four own solutions packed to Solution JSONs, judged from them and from their folders
#                 on contest-v1 (cupti), the two runs compared per workload (issue #32 item 4)
#   ncu-v4        Nsight Compute of cuda-v4, fla-recurrent and the streaming copy at B = 1 (issue #33; clocks left alone):
#                 the details page and the SASS source page (per-instruction stall samples) as CSV
#   ncu-variants  the same of each cuda-v4 variant in $NCU_VARIANTS (tuner names, space-separated) at NCU_BATCH (default 128)
#                 with a NCU_DTYPE state (default bfloat16), then tools/ncu_table.py of them side by side (table.md);
#                 NCU_SET a smaller section set than full for fewer replay passes (`ncu --list-sets`; e.g. basic)
#   ncu-builds    the same of each ablation probe build in $NCU_BUILDS (tools/ablation_probe.py's names) at NCU_BATCH
#                 (default 128) with a NCU_DTYPE state (default bfloat16): the launch's occupancy and shared-memory split
#   ncu-bf16      the same of cuda-v4 and the streaming copy with a bf16 state at B = 64, and of cuda-v4's fp32 path at
#                 B = 32 (the same bytes): where the bf16 path spends the time its copy does not (issue #33, the H200's target)
#   nvbench       tools/nvbench_check.py: NVBench beside FlashInfer's CUPTI and events timers (issue #29 item 4);
#                 installs .nvb/*.whl (cuda-bench 0.3.0, cuda-bindings 13, cuda-pathfinder) into /tmp/site where
#                 the call carries .nvb (too large to carry beside a bundle part: a call of its own first)
#   events-ab     the events tier between identical runs, A/B: the events rerun command (below) in this tree and
#                 in the tree AB_TREE (default .before/ab, e.g. `git archive BRANCH harness tools solutions
#                 workloads scripts run_local.py pyproject.toml | tar -x -C .before/ab`), twice each, alternating;
#                 then tools.compare_runs per workload within and across the trees (about 7 min: start:/wait:)
#   parity-ab     `parity` in AB_TREE, with the same PARITY_* settings (its pack is parity-ab.tgz)
#   sync-ab       the sync tier of this tree against AB_TREE's, paired: `run_local.py --algo SYNC_AB_ALGO --tiers sync`
#                 (default fla-recurrent, contest-v1) in each, SYNC_AB_PAIRS pairs (default 8, the order swapped every
#                 pair; about 30 s a pair), then tools.sync_ab this over tree: the worker's host speed (issue #29)
#   events-rerun  the events rerun command twice in this tree, compared per workload (about 3.5 min)
#   flush-probe   tools/tier_parity.py at B = 1, 8 (the copy, cuda-v4, fla-recurrent; 2 repeats) with FlashInfer's
#                 timers flushing 256 MB (--plain-flush-mb 256; the cupti tier's flush before 5d4fc77) instead of their own 2 x L2: is the
#                 B = 8 CUPTI gap the flush, and does a longer flush hide a Python launch from the events timer?
#                 Set it beside a `parity` run of the same session (its own-flush side). About 4 min
#   worker-conditions tools/worker_conditions_probe.py: the copy, cuda-v4 and fla-recurrent at B = 1, 64 under FlashInfer's
#                 contest and cupti timers in a plain process, beside a second idle CUDA context, and after holding a
#                 worker's 2.25 GiB first (issue #29: which of the worker's conditions is the H200's contest lean; ~3 min);
#                 CONDITIONS picks the conditions (e.g. plain,beside-4: beside a process holding 4 GiB; pad-34: after holding
#                 34 MiB), COND_ARGS adds options (e.g. "--batches 64 --repeats 2")
#   tiers-ab      `run_local.py --algo $TIERS_AB_ALGO --workloads sweep --tiers T` with T = TIERS_A (default the cross-check's
#                 cupti,contest,events,sync) and TIERS_B (default cupti,contest) in turn, TIERS_AB_PAIRS pairs (default 2):
#                 does what the worker timed before move its contest tier? (issue #29; ~3.5 min a pair with the defaults)
#   judge-memory  `run_local.py --algo $MEMORY_ALGO --workloads sweep --tiers cupti,contest` (default cuda-v4,fla-recurrent)
#                 with tools/gpu_memory_log.py beside it: the GPU memory the judge and each worker hold (issue #29; ~1.5 min)
#   placement     tools/placement_probe.py: the copy at B = 1, 8 with the state at five offsets, FlashInfer's CUPTI
#                 timer (is the B <= 8 CUPTI offset where the buffers lie? about 1 min)
#   ablation      tools/ablation_probe.py: cuda-v4 built with each of kernel.cu's ablation switches beside the copy
#                 floor's kernels at B = 1, 2, 4, 8, FlashInfer's CUPTI timer (issue #33: which part of the work
#                 costs time at small B, and the candidates that would win it back; ABLATION_BUILDS picks builds,
#                 ABLATION_BATCHES the batch sizes, ABLATION_DTYPE=bfloat16 the bf16 state, ABLATION_REPEATS the rounds
#                 (default 3); about 5 min for all)
#   dirty-l2      tools/dirty_l2_probe.py: the ablation probe's subjects after FlashInfer's cold-L2 flush (dirty lines) and
#                 after the same flush followed by a read of 2 x L2 (clean lines), the harness's CUPTI recorder (issue #33: what
#                 the flush's write-backs cost a call, and whether a candidate's gain is its own); DIRTY_BUILDS, DIRTY_BATCHES,
#                 DIRTY_DTYPE (default bfloat16) and DIRTY_REPEATS as ABLATION_*'s (about 2 min a dtype at 3 batch sizes)
#   code-warm     tools/code_warm_probe.py: cuda-v4 and the copy floor's kernels at B = 1, 8 after no decoy, after
#                 themselves on other buffers (their code warm) and after another kernel (issue #33: is part of a
#                 µs kernel's cold-L2 time the fetch of its own code? about 2 min)
#   events-loops  tools/events_loop_probe.py: the copy at B = 1, 8 under five events loops, from FlashInfer's to the
#                 floor's (issue #29: where FlashInfer's events timer's extra 0.45-0.94 µs comes from; about 1 min)
#   idle-start    tools/idle_start_probe.py: cuda-v4 and the copy floor's kernels at B = 1, 8 under FlashInfer's CUPTI
#                 timer and under the harness's recorder, each with its own flush and the other's, and with a second
#                 synchronize before the call (issue #29: what separates the cupti tier from its named timer? ~3 min)
#   core-layout   tools/core_layout_probe.py: cuda-v4 and torch copy_ at B = 1, 8 on buffers laid out as PyTorch's, as the
#                 timing core's until 10a990b (a cuMemAlloc per tensor and set), pooled a set an allocation (the core's
#                 since), and pooled with the tensors over 1 MB apart, FlashInfer's CUPTI timer (issue #29; ~3 min)
#   l2-persist    tools/l2_persist_probe.py: a copy of one of 8 state sets, fresh inputs and a 256 MB flush before each, with
#                 and without a persisting-L2 window on the copy's stream, and with the judge resetting persisting lines
#                 (can a solution keep a timed call's inputs in L2 through the flush? about 1 min)
#   tune-small    `python -m tools.tune --algo cuda-v4 --batches 1,2,4,8` here, then in AB_TREE (issue #33);
#                 TUNE_ROUNDS times, alternating (default 1; each round ~9 min: start:/wait: past one)
#   tune-candidate  the same tune of the shipped cuda-v4, then of each candidate build (--defines WORD for each word of
#                 $TUNE_DEFINES, default GDN_V4_CANDIDATE=4, the precise gates; its side is candidate-N, N from 0;
#                 no table file written): best variant per batch size, shipped vs each candidate
#                 (issue #33); TUNE_ROUNDS times, alternating (default 1; each round ~9 min: start:/wait: past one);
#                 TUNE_ONLY, a --only pattern for both sides (default ., every variant: --only writes no table
#                 file, so the steps after it run the shipped tables; tune-small likewise), measures less in less time;
#                 TUNE_BATCHES (default 1,2,4,8) and TUNE_DTYPES (e.g. bfloat16) pick the batch sizes and state dtypes
#   tune-ab       `python -m tools.tune --algo $TUNE_ALGOS --rounds $TUNE_ROUNDS` (default cuda-v4,fla-recurrent and 3) in a copy
#                 of this tree (the tune writes its tables there, never here), then `run_local.py --algo $TUNE_ALGOS
#                 --workloads sweep --tiers cupti` here (the installed tables) and in the copy (the tuned ones),
#                 alternating, AB_ROUNDS times (default 2), and `python -m tools.tune.ab` of them (ab.md: per solution
#                 install or keep). Install with `python -m tools.tune.install` from the pack's tune/<solution>/<GPU>.json.
#                 About 9.5 min on an H100 for the two defaults (2026-11-27; ~12 min on an H200 by hand; cuda-v4 with both
#                 state dtypes 13 min on an H200; cuda-v4's bf16 state alone, 480 variants with the staged ones, 12 min on an
#                 H100, 2026-11-27): start:/wait:. TUNE_DTYPES (e.g. bfloat16) tunes only those state dtypes
#   events-sweep-ab  `run_local.py --algo cuda-v1,cuda-v4,fla-recurrent --workloads sweep --tiers cupti,events` here,
#                 then in AB_TREE, compared per batch size (an events-tier change against a `parity` run's plain
#                 events timer of the same session; about 4 min)
# Each step stops itself with Ctrl-C (the judge writes what finished) before the command's limit.
set -uo pipefail
OUT=${1:?usage: gpu_judge_check.sh OUT STEP...}
shift
export PYTHONUNBUFFERED=1
GROUP_A=fla-recurrent,fla-upstream,fla-upstream-kernel,cuda-v1
GROUP_B=cuda-v4,cutedsl-bf16,fi-baseline,fi-bf16state
TARGETS_ALGO=${TARGETS_ALGO:-cuda-v4,cuda-v1,fla-recurrent,cutedsl-bf16,fi-baseline,fi-bf16state}
OWN=cuda-v1,cuda-v4,fla-recurrent,cutedsl-bf16
COMMIT=${GDN_BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
AB_TREE=${AB_TREE:-.before/ab}
AB_COMMIT=${AB_COMMIT:-unknown}
EVENTS_ALGO=fla-recurrent,cuda-v4,fi-baseline
BG_DIR=${BG_DIR:-/tmp}  # where start: keeps its tree copy, log, pid and pack
mkdir -p "$OUT"
# Every step's `timeout -s INT N` stops N short of the device call's end where CALL_DEADLINE is set (30 s
# before it), so a step cut by the call's limit still writes and packs what finished: on 2026-11-28 an H200
# call's idle-start probe ran into the 600-s limit and nothing of it came back. start: drops CALL_DEADLINE
# (its step outlives the call).
call_left() {  # call_left MARGIN: seconds to MARGIN s before CALL_DEADLINE (set: the caller checks)
  echo $(( CALL_DEADLINE - $(date +%s) - $1 ))
}
timeout() {
  if [ -n "${CALL_DEADLINE:-}" ] && [ "${1:-}" = "-s" ] && [ "${3:-x}" -eq "${3:-x}" ] 2>/dev/null; then
    local left; left=$(call_left 30)
    [ "$left" -lt 1 ] && left=1
    [ "$3" -gt "$left" ] && set -- "$1" "$2" "$left" "${@:4}"
  fi
  command timeout "$@"
}
bg_running() {  # bg_running BG: start:'s step is still running (or has not yet written its pid)
  [ ! -f "$1.pid" ] || kill -0 "$(cat "$1.pid")" 2>/dev/null
}
# The pack appears under its name only once whole (written aside, then renamed): wait:STEP takes the
# file as soon as it exists, and on 2026-11-27 copied an H200 cross-check's pack while tar was still
# writing it (0 bytes came back; results/proof/20261127-H200-parity-2xL2).
pack() { tar czf "$OUT/.$1.tgz.part" -C "$2" . && mv "$OUT/.$1.tgz.part" "$OUT/$1.tgz" && echo "packed $OUT/$1.tgz"; }
sweep() {  # sweep STEP ROOT ALGO LIMIT_S COMMIT [RUN_LOCAL_ARGS...]
  local work=/tmp/gdn-check-$1
  (cd "$2" && GDN_BENCH_COMMIT=$5 timeout -s INT "$4" python run_local.py --results "$work" --no-progress \
     --algo "$3" --workloads sweep "${@:6}" > "$work.log" 2>&1; echo "rc=$?" >> "$work.log")
  mkdir -p "$work" && cp "$work.log" "$work/console.log" && tail -25 "$work.log" && pack "$1" "$work"
}
events_run() {  # events_run ROOT COMMIT WORK: one run of the events rerun command
  (cd "$1" && GDN_BENCH_COMMIT=$2 timeout -s INT 240 python run_local.py --results "$3" --no-progress \
     --algo "$EVENTS_ALGO" --workloads contest-v2 --tiers cupti,events > "$3.log" 2>&1; echo "rc=$?" >> "$3.log")
  mkdir -p "$3" && mv "$3.log" "$3/console.log" && grep -h "solution x workload" "$3/console.log"
}
parity_run() {  # parity_run ROOT COMMIT WORK [ARGS...]: tools/tier_parity.py in ROOT into WORK (console.log there);
  # the clock log where ROOT's tier_parity has it (an AB_TREE from before a4b4347 has not)
  local root=$1 commit=$2 work=$3 clocks=""; shift 3; rm -rf "$work"; mkdir -p "$work"
  grep -q -- "--clock-log" "$root/tools/tier_parity.py" && clocks=--clock-log
  (cd "$root" && GDN_BENCH_COMMIT=$commit timeout -s INT "${PARITY_LIMIT_S:-540}" python -m tools.tier_parity \
     --out "$work" --solutions "${PARITY_SOLUTIONS:-cuda-v4,fla-recurrent}" --repeats "${PARITY_REPEATS:-3}" \
     --harness-repeats "${PARITY_HARNESS_REPEATS:-1}" ${PARITY_PLAIN_SETS:+--plain-sets "$PARITY_PLAIN_SETS"} \
     ${PARITY_BATCHES:+--batches "$PARITY_BATCHES"} --speed-log $clocks "$@" \
     > "$work/console.log" 2>&1)
}
probe_step() {  # probe_step STEP MODULE LIMIT [ARGS...]: python -m tools.MODULE --out WORK, its console, packed
  local step=$1 module=$2 limit=$3 work=/tmp/gdn-check-$1; shift 3; rm -rf "$work"; mkdir -p "$work"
  timeout -s INT "$limit" python -m "tools.$module" --out "$work" "$@" > "$work/console.log" 2>&1
  echo "rc=$?" >> "$work/console.log"; cat "$work/console.log"; pack "$step" "$work"
}
ncu_subject() {  # ncu_subject WORK LABEL SUBJECT BATCH DTYPE [VARIANT [BUILD]]: Nsight Compute of one subject
  # (tools/ncu_driver.py; VARIANT: that cuda-v4 variant, --variant; BUILD: the ablation probe's build, --build), clocks
  # left alone; NCU_SET picks ncu's section set (default full)
  local work=$1 label=$2 subject=$3 batch=$4 dtype=$5 variant=${6:-} build=${7:-} kernel
  kernel=$(python -c "from tools.ncu_driver import KERNELS; print(KERNELS['$subject'])")
  timeout -s INT 240 ncu --clock-control none --set "${NCU_SET:-full}" -k "regex:$kernel" --launch-skip 3 --launch-count 3 \
    -o "$work/$label" -f python -m tools.ncu_driver "$subject" "$batch" --state-dtype "$dtype" ${variant:+--variant "$variant"} ${build:+--build "$build"} \
    > "$work/$label.log" 2>&1
  echo "$label rc=$?" >> "$work/$label.log"
  ncu --import "$work/$label.ncu-rep" --page details --csv > "$work/$label-details.csv" 2>&1
  # per-instruction SASS with its warp-stall samples: where the chain waits (issue #33)
  ncu --import "$work/$label.ncu-rep" --page source --print-source sass --csv > "$work/$label-source.csv" 2>&1 \
    || echo "$label: no source page" >> "$work/$label.log"
  tail -2 "$work/$label.log"
}
ncu_side_by_side() {  # ncu_side_by_side WORK variant|build NAME...: ncu_subject of cuda-v4 as each variant or ablation
  # probe build at NCU_BATCH (default 128) with a NCU_DTYPE state (default bfloat16), then tools/ncu_table.py of them side
  # by side (WORK/table.md)
  local work=$1 kind=$2 name label columns=(); shift 2
  for name in "$@"; do
    label=$(echo "$name" | tr / _)
    if [ "$kind" = variant ]; then
      ncu_subject "$work" "$label" cuda-v4 "${NCU_BATCH:-128}" "${NCU_DTYPE:-bfloat16}" "$name"
    else
      ncu_subject "$work" "$label" cuda-v4 "${NCU_BATCH:-128}" "${NCU_DTYPE:-bfloat16}" "" "$name"
    fi
    columns+=("$name=$work/$label-details.csv")
  done
  python -m tools.ncu_table "${columns[@]}" | tee "$work/table.md"
}
compare() {  # compare A B NAME [PER]: ratios of two runs' traces, per workload (or PER), into NAME
  python -m tools.compare_runs "$1"/runs/*/traces.jsonl "$2"/runs/*/traces.jsonl --per "${4:-workload}" \
    --tiers cupti,events > "$3" 2>&1
}
for step in "$@"; do
  case $step in v2-one-start) step=start:v2-one ;; v2-one-wait) step=wait:v2-one ;; esac
  echo "== $step ($(date -u +%H:%M:%S))"
  case $step in
    attacks-gpu) GDN_BENCH_COMMIT=$COMMIT timeout -s INT 240 python scripts/gpu_attacks.py /tmp/gdn-check-$step --sets gpu
                 cat /tmp/gdn-check-$step/attacks.md; pack "$step" /tmp/gdn-check-$step ;;
    attacks-cpu) GDN_BENCH_COMMIT=$COMMIT timeout -s INT 420 python scripts/gpu_attacks.py /tmp/gdn-check-$step --sets cpu
                 cat /tmp/gdn-check-$step/attacks.md; pack "$step" /tmp/gdn-check-$step ;;
    new-a)       sweep "$step" . "$GROUP_A" 540 "$COMMIT" ;;
    new-b)       sweep "$step" . "$GROUP_B" 540 "$COMMIT" ;;
    old)         sweep "$step" .before "$GROUP_A,$GROUP_B" 540 2026d30 ;;
    targets-sweep) sweep "$step" . "$TARGETS_ALGO" 300 "$COMMIT" --tiers cupti ;;
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
    start:*)     inner=${step#start:}; bg=$BG_DIR/gdn-bg-$inner; tree=$BG_DIR/gdn-tree-$inner
                 rm -rf "$bg" "$tree" "$bg.log" "$bg.pid"; mkdir -p "$bg" "$tree"
                 # from a copy of the tree: the device runner copies the working tree afresh on every call,
                 # and a process the step spawns while that copy is under way finds no module (2026-11-27:
                 # tier_parity's plain repeat died so, 8 min into a 16-min H200 run)
                 tar -cf - --exclude=./.git --exclude=./.gpubundle . | tar -xf - -C "$tree"
                 # the step writes its own pid: under job control setsid forks, and $! is a process that has left.
                 # The redirections are the whole group's: the shell that runs `cd && setsid ...` in the background
                 # would otherwise keep this command's stdout open until the step ends (2026-11-28: a
                 # `start:parity | tail` on an H200 sat out the 9-min cross-check)
                 (cd "$tree" && V2_LIMIT_S=${V2_LIMIT_S:-1500} PARITY_LIMIT_S=${PARITY_LIMIT_S:-1500} CALL_DEADLINE= \
                   GDN_BENCH_COMMIT=$COMMIT setsid bash -c 'echo $$ > "$1.pid"; exec bash scripts/gpu_judge_check.sh "$1" "$2"' \
                   _ "$bg" "$inner" &) > "$bg.log" 2>&1 < /dev/null
                 echo "started $inner in its own session from $tree; log $bg.log" ;;
    wait:*)      inner=${step#wait:}; bg=$BG_DIR/gdn-bg-$inner; waited=0; limit=${WAIT_S:-570}
                 if [ -n "${CALL_DEADLINE:-}" ]; then left=$(call_left 20)
                   [ "$left" -lt "$limit" ] && limit=$(( left > 0 ? left : 0 )); fi
                 # no start on this machine (a fresh one, or a start that failed): say so now, not after WAIT_S
                 if [ ! -f "$bg.log" ]; then echo "no start:$inner on this machine ($bg.log missing)"; continue; fi
                 while [ ! -f "$bg/$inner.tgz" ] && bg_running "$bg" && [ "$waited" -lt "$limit" ]; do
                   sleep 2; waited=$((waited + 2)); done
                 tail -40 "$bg.log"
                 if [ -f "$bg/$inner.tgz" ]; then cp "$bg/$inner.tgz" "$OUT/"; echo "packed $OUT/$inner.tgz"
                 elif bg_running "$bg"; then echo "$inner still running after ${waited} s: call wait:$inner again"
                 else echo "$inner ended without packing: its log is above"; fi ;;
    entries-gpu) mkdir -p /tmp/gdn-check-$step
                 timeout -s INT 540 python -m pytest -q -p no:cacheprovider tests/judge/test_contest_entries.py \
                   tests/judge/test_contest_tier.py tests/interop/test_baselines.py > /tmp/gdn-check-$step/console.log 2>&1
                 echo "rc=$?" >> /tmp/gdn-check-$step/console.log; tail -15 /tmp/gdn-check-$step/console.log
                 pack "$step" /tmp/gdn-check-$step ;;
    v2-contest)  sel=/tmp/gdn-sel-$step; work=/tmp/gdn-check-$step; rm -rf "$sel"; mkdir -p "$sel" "$work"
                 for name in ${OWN//,/ } fi-baseline pt-reference; do cp -r "solutions/$name" "$sel/"; done
                 cp baselines/fi-baseline-wrapper.json "$sel/"
                 ( time GDN_BENCH_COMMIT=$COMMIT timeout -s INT "${V2_LIMIT_S:-570}" python run_local.py --results "$work" \
                   --no-progress --solutions "$sel" --algo all --workloads contest-v2 --tiers cupti,contest ) \
                   > "$work/console.log" 2>&1
                 for rule in final reference; do python -m harness score --results "$work" --rule "$rule" \
                   > "$work/score-$rule.txt" 2>&1; done
                 tail -30 "$work/console.log"; cat "$work/score-final.txt"; pack "$step" "$work" ;;
    pack-trip)   work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work/packed"
                 for name in ${OWN//,/ }; do python -m harness pack "$name" --out "$work/packed" > /dev/null || echo "pack $name failed"; done
                 ( GDN_BENCH_COMMIT=$COMMIT python run_local.py --results "$work/folders" --no-progress --algo "$OWN" \
                     --workloads contest-v1 --tiers cupti
                   GDN_BENCH_COMMIT=$COMMIT python run_local.py --results "$work/json" --no-progress \
                     --solutions "$work/packed" --algo all --workloads contest-v1 --tiers cupti ) > "$work/console.log" 2>&1
                 python -m tools.compare_runs "$work"/folders/runs/*/traces.jsonl "$work"/json/runs/*/traces.jsonl \
                   --per workload --tiers cupti | tee "$work/compare.md"
                 grep -h "solution x workload" "$work/console.log"; pack "$step" "$work" ;;
    ncu-v4)      work=/tmp/gdn-check-$step; mkdir -p "$work"
                 for subject in cuda-v4 fla-recurrent stream-copy; do ncu_subject "$work" "$subject-b1" "$subject" 1 float32; done
                 pack "$step" "$work" ;;
    ncu-variants) work=/tmp/gdn-check-$step; mkdir -p "$work"
                 ncu_side_by_side "$work" variant ${NCU_VARIANTS:?NCU_VARIANTS: cuda-v4 variant names, e.g. r16/noalloc/l16/w1/p2s}
                 pack "$step" "$work" ;;
    ncu-builds)  work=/tmp/gdn-check-$step; mkdir -p "$work"
                 ncu_side_by_side "$work" build ${NCU_BUILDS:?NCU_BUILDS: ablation probe build names, e.g. copy copy-held}
                 pack "$step" "$work" ;;
    ncu-bf16)    work=/tmp/gdn-check-$step; mkdir -p "$work"
                 ncu_subject "$work" cuda-v4-bf16-b64 cuda-v4 64 bfloat16
                 ncu_subject "$work" stream-copy-bf16-b64 stream-copy 64 bfloat16
                 ncu_subject "$work" cuda-v4-fp32-b32 cuda-v4 32 float32
                 pack "$step" "$work" ;;
    nvbench)     work=/tmp/gdn-check-$step; mkdir -p "$work"
                 if [ -d .nvb ]; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .nvb/*.whl; fi
                 timeout -s INT 540 python -m tools.nvbench_check --out "$work" > "$work/console.log" 2>&1
                 echo "rc=$?" >> "$work/console.log"; tail -20 "$work/console.log"; pack "$step" "$work" ;;
    parity|parity-ab) work=/tmp/gdn-check-$step
                 if [ "$step" = parity ]; then parity_run . "$COMMIT" "$work"; else parity_run "$AB_TREE" "$AB_COMMIT" "$work"; fi
                 tail -45 "$work/console.log"; pack "$step" "$work" ;;
    sync-ab)     work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 for pair in $(seq 1 "${SYNC_AB_PAIRS:-8}"); do
                   order="this tree"; [ $((pair % 2)) = 0 ] && order="tree this"
                   for side in $order; do root=.; commit=$COMMIT; [ "$side" = tree ] && root=$AB_TREE && commit=$AB_COMMIT
                     (cd "$root" && GDN_BENCH_COMMIT=$commit timeout -s INT 120 python run_local.py --no-progress \
                       --algo "${SYNC_AB_ALGO:-fla-recurrent}" --tiers sync --results "$work/$side-$pair" \
                       > "$work/$side-$pair.log" 2>&1; echo "rc=$?" >> "$work/$side-$pair.log")
                   done
                 done
                 echo "tree: $AB_TREE at $AB_COMMIT" > "$work/trees.txt"
                 python -m tools.sync_ab "$work" | tail -3; pack "$step" "$work" ;;
    events-ab)   work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 for round in a b; do
                   events_run . "$COMMIT" "$work/this-$round"; events_run "$AB_TREE" "$AB_COMMIT" "$work/tree-$round"
                 done
                 compare "$work/this-a" "$work/this-b" "$work/compare-this.md"
                 compare "$work/tree-a" "$work/tree-b" "$work/compare-tree.md"
                 compare "$work/this-a" "$work/tree-a" "$work/compare-this-tree-a.md"
                 compare "$work/this-b" "$work/tree-b" "$work/compare-this-tree-b.md"
                 echo "tree: $AB_TREE at $AB_COMMIT" > "$work/trees.txt"; tail -12 "$work"/compare-*.md
                 pack "$step" "$work" ;;
    flush-probe) work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 PARITY_LIMIT_S=300 parity_run . "$COMMIT" "$work/flush-256" --solutions cuda-v4,fla-recurrent \
                   --batches 1,8 --repeats 2 --plain-flush-mb 256
                 grep -E "\| (cupti|contest|events) \||within" "$work/flush-256/console.log"
                 pack "$step" "$work" ;;
    events-sweep-ab) work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 for side in this tree; do root=.; commit=$COMMIT; [ "$side" = tree ] && root=$AB_TREE && commit=$AB_COMMIT
                   (cd "$root" && GDN_BENCH_COMMIT=$commit timeout -s INT 270 python run_local.py --results "$work/$side" \
                     --no-progress --algo cuda-v1,cuda-v4,fla-recurrent --workloads sweep --tiers cupti,events \
                     > "$work/$side.log" 2>&1; echo "rc=$?" >> "$work/$side.log")
                 done
                 echo "tree: $AB_TREE at $AB_COMMIT" > "$work/trees.txt"
                 compare "$work/this" "$work/tree" "$work/compare.md" batch; cat "$work/compare.md"; pack "$step" "$work" ;;
    placement)   probe_step "$step" placement_probe 240 ;;
    worker-conditions) probe_step "$step" worker_conditions_probe 420 ${CONDITIONS:+--conditions "$CONDITIONS"} $COND_ARGS ;;
    tiers-ab)    work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 for pair in $(seq 1 "${TIERS_AB_PAIRS:-2}"); do
                   for side in A B; do
                     tiers=${TIERS_A:-cupti,contest,events,sync}; [ "$side" = B ] && tiers=${TIERS_B:-cupti,contest}
                     ( time GDN_BENCH_COMMIT=$COMMIT timeout -s INT 300 python run_local.py --results "$work/$pair$side" \
                       --no-progress --algo "${TIERS_AB_ALGO:-cuda-v4,fla-recurrent}" --workloads sweep --tiers "$tiers" ) \
                       > "$work/$pair$side.log" 2>&1
                     echo "rc=$? tiers=$tiers" >> "$work/$pair$side.log"; echo "== $pair$side"; tail -5 "$work/$pair$side.log"
                   done
                 done
                 pack "$step" "$work" ;;
    judge-memory) work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 python -m tools.gpu_memory_log log "$work/gpu_memory.csv" & logger=$!
                 ( time GDN_BENCH_COMMIT=$COMMIT timeout -s INT 300 python run_local.py --results "$work/runs" --no-progress \
                   --algo "${MEMORY_ALGO:-cuda-v4,fla-recurrent}" --workloads sweep --tiers cupti,contest ) > "$work/console.log" 2>&1
                 echo "rc=$?" >> "$work/console.log"; kill -TERM "$logger"; wait "$logger"
                 python -m tools.gpu_memory_log summary "$work/gpu_memory.csv" | tee -a "$work/console.log"
                 tail -15 "$work/console.log"; pack "$step" "$work" ;;
    ablation)    probe_step "$step" ablation_probe 420 ${ABLATION_BUILDS:+--builds "$ABLATION_BUILDS"} \
                   ${ABLATION_BATCHES:+--batches "$ABLATION_BATCHES"} ${ABLATION_DTYPE:+--state-dtype "$ABLATION_DTYPE"} \
                   ${ABLATION_REPEATS:+--repeats "$ABLATION_REPEATS"} ;;
    dirty-l2)    probe_step "$step" dirty_l2_probe 420 ${DIRTY_BUILDS:+--builds "$DIRTY_BUILDS"} \
                   ${DIRTY_BATCHES:+--batches "$DIRTY_BATCHES"} ${DIRTY_DTYPE:+--state-dtype "$DIRTY_DTYPE"} \
                   ${DIRTY_REPEATS:+--repeats "$DIRTY_REPEATS"} ;;
    events-loops) probe_step "$step" events_loop_probe 240 ;;
    code-warm)   probe_step "$step" code_warm_probe 300 ;;
    idle-start)  probe_step "$step" idle_start_probe 300 ;;
    core-layout) probe_step "$step" core_layout_probe 300 ;;
    l2-persist)  probe_step "$step" l2_persist_probe 240 ;;
    events-rerun) work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 events_run . "$COMMIT" "$work/run-a"; events_run . "$COMMIT" "$work/run-b"
                 compare "$work/run-a" "$work/run-b" "$work/compare.md"; cat "$work/compare.md"; pack "$step" "$work" ;;
    tune-small)  work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 for round in $(seq 1 "${TUNE_ROUNDS:-1}"); do
                   for side in this tree; do root=.; [ "$side" = tree ] && root=$AB_TREE
                     (cd "$root" && timeout -s INT 270 python -m tools.tune --algo cuda-v4 --batches 1,2,4,8 \
                       --only "${TUNE_ONLY:-.}" --out "$work/$side-$round" > "$work/$side-$round.log" 2>&1
                      echo "rc=$?" >> "$work/$side-$round.log")
                     echo "-- $side, round $round ($root)"; grep -h "^B=\|rc=" "$work/$side-$round.log"
                   done
                 done
                 pack "$step" "$work" ;;
    tune-ab)     work=/tmp/gdn-check-$step tuned=/tmp/gdn-tuned-tree algos=${TUNE_ALGOS:-cuda-v4,fla-recurrent}
                 rm -rf "$work" "$tuned"; mkdir -p "$work/ab" "$tuned"
                 tar cf - --exclude=./.git --exclude=./.before --exclude=./.gpubundle --exclude=./.pyd . | tar xf - -C "$tuned"
                 (cd "$tuned" && GDN_BENCH_COMMIT=$COMMIT timeout -s INT "${TUNE_LIMIT_S:-1200}" python -m tools.tune \
                    --algo "$algos" --rounds "${TUNE_ROUNDS:-3}" ${TUNE_DTYPES:+--dtypes "$TUNE_DTYPES"} --out "$work/tune" > "$work/tune.log" 2>&1
                  echo "rc=$?" >> "$work/tune.log"); grep -h "^B=\|rc=\|wrote" "$work/tune.log" | cut -c1-200
                 for round in $(seq 1 "${AB_ROUNDS:-2}"); do
                   for side in old new; do root=.; label=$COMMIT; [ "$side" = new ] && root=$tuned label=$COMMIT+tuned
                     (cd "$root" && GDN_BENCH_COMMIT=$label timeout -s INT 300 python run_local.py --results \
                        "$work/ab/$side-$round" --no-progress --algo "$algos" --workloads sweep --tiers cupti \
                        > "$work/ab/$side-$round.log" 2>&1; echo "rc=$?" >> "$work/ab/$side-$round.log")
                   done
                 done
                 python -m tools.tune.ab "$work"/ab/old-*/ -- "$work"/ab/new-*/ > "$work/ab.md" 2>&1; cat "$work/ab.md"
                 rm -rf "$tuned"; pack "$step" "$work" ;;
    tune-candidate) work=/tmp/gdn-check-$step; rm -rf "$work"; mkdir -p "$work"
                 candidates=(${TUNE_DEFINES:-GDN_V4_CANDIDATE=4})  # one side a word: its --defines
                 for round in $(seq 1 "${TUNE_ROUNDS:-1}"); do
                   for side in shipped "${!candidates[@]}"; do
                     build=(); [ "$side" != shipped ] && build=(--defines "${candidates[$side]}") side=candidate-$side
                     build+=(--only "${TUNE_ONLY:-.}")  # writes no table file: later steps keep the shipped tables
                     timeout -s INT 270 python -m tools.tune --algo cuda-v4 --batches "${TUNE_BATCHES:-1,2,4,8}" \
                       ${TUNE_DTYPES:+--dtypes "$TUNE_DTYPES"} "${build[@]}" \
                       --out "$work/$side-$round" > "$work/$side-$round.log" 2>&1; echo "rc=$?" >> "$work/$side-$round.log"
                     echo "-- $side, round $round${build[*]:+ (${build[*]})}"; grep -h "^B=\|rc=" "$work/$side-$round.log"
                   done
                 done
                 pack "$step" "$work" ;;
    *)           echo "unknown step $step" ;;
  esac
done
