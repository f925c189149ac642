#!/usr/bin/env bash
# A/B of the core's cupti flush graph (c8a7c66, in .before/ab) against main (no graph): cupti and events of
# cuda-v4 and cuda-v1 on contest-v1 (B = 1), alternating, twice each; then compare_runs per solution.
out=$1; mkdir -p $out
for i in 1 2; do
  for side in main graph; do
    if [ $side = main ]; then dir=.; c=$MAIN_COMMIT; else dir=.before/ab; c=c8a7c66; fi
    (cd $dir && GDN_BENCH_COMMIT=$c timeout 200 python run_local.py --algo cuda-v4,cuda-v1 --tiers cupti,events \
       --no-progress --results /tmp/ab/$side-$i > $out/$side-$i.log 2>&1); echo "$side-$i rc=$? $(date -u +%T)"
  done
done
for i in 1 2; do for side in main graph; do cp /tmp/ab/$side-$i/runs/*/traces.jsonl $out/$side-$i.traces.jsonl; done; done
for pair in "main-1 graph-1" "main-2 graph-2" "main-1 main-2" "graph-1 graph-2"; do set -- $pair
  echo "== $1 -> $2"; python -m tools.compare_runs --tiers cupti,events --per solution $out/$1.traces.jsonl $out/$2.traces.jsonl | tail -8
done
