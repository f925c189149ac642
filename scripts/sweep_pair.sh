#!/usr/bin/env bash
# usage: sweep_pair.sh OUT ALGOS LIMIT_S : the sweep with this tree (after), then with .before (before), compared
set -uo pipefail
OUT=$1; ALGOS=$2; LIMIT=$3
# wheels carried in .whl/ (a plain machine); a machine with the bundle installed in /tmp/site needs none
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
for side in after before; do
  root=.; [ $side = before ] && root=.before
  start=$(date +%s)
  (cd $root && GDN_BENCH_COMMIT=${GDN_BENCH_COMMIT:-wip} timeout -s INT $LIMIT python run_local.py --results /tmp/r-$side --no-progress \
     --algo "$ALGOS" --workloads sweep --tiers cupti,events,sync > /tmp/r-$side.log 2>&1; echo "rc=$?" >> /tmp/r-$side.log)
  echo "$side took $(( $(date +%s) - start )) s"; tail -4 /tmp/r-$side.log
  run=$(ls -d /tmp/r-$side/runs/*/ | tail -1); mkdir -p $OUT/$side
  cp $run/traces.jsonl $run/floors.jsonl $OUT/$side/ 2>/dev/null; cp /tmp/r-$side.log $OUT/$side/console.log
done
python tools/compare_runs.py $OUT/before/traces.jsonl $OUT/after/traces.jsonl --tiers cupti,events,sync | tee $OUT/compare.md
