# device experiment: judge with (this tree) and without (.exp-a) separate CPUs
set -u
export PYTHONUNBUFFERED=1
python -c "import sys; sys.path.insert(0,'tests'); from conftest import write_small_dataset; from pathlib import Path; write_small_dataset(Path('/tmp/ds'), batch_sizes=(1,2,4,8), scales=(0.0,0.0,0.0,0.0))" || exit 1
run() { (cd $1 && GDN_BENCH_COMMIT=$2 timeout -s INT 150 python run_local.py --algo fla-recurrent,cuda-v1 --workloads /tmp/ds --no-progress --results /tmp/r$3 > /tmp/r$3.log 2>&1; tail -4 /tmp/r$3.log); }
run .exp-a 6911b38 A1; run . 719d9ab B1; run .exp-a 6911b38 A2; run . 719d9ab B2
for x in A1 B1 A2 B2; do mkdir -p $OUT/$x; cp /tmp/r$x/runs/*/traces.jsonl /tmp/r$x/runs/*/floors.jsonl $OUT/$x/; done
python tools/compare_runs.py $OUT/A1/traces.jsonl $OUT/B1/traces.jsonl --tiers cupti,events,sync | grep -v copy-floor
python tools/compare_runs.py $OUT/A2/traces.jsonl $OUT/B2/traces.jsonl --tiers cupti,events,sync | grep -v copy-floor
