set -u
export PYTHONUNBUFFERED=1
python -c "import sys; sys.path.insert(0,'tests'); from conftest import write_small_dataset; from pathlib import Path; write_small_dataset(Path('/tmp/ds'), batch_sizes=(8,1,1,2,2,1), scales=(0.0,)*6)" || exit 1
run() { (cd $1 && GDN_BENCH_COMMIT=$2 timeout -s INT 100 python run_local.py --algo fla-recurrent --workloads /tmp/ds --tiers events,sync --no-progress --results /tmp/r$3 > /tmp/r$3.log 2>&1); mkdir -p $OUT/$3; cp /tmp/r$3/runs/*/traces.jsonl $OUT/$3/; python - $3 <<'PY'
import json, glob, sys
for l in open(glob.glob(f"/tmp/r{sys.argv[1]}/runs/*/traces.jsonl")[0]):
    t = json.loads(l); e = t["evaluation"]["performance"]["tiers"]
    print(sys.argv[1], t["workload"]["axes"]["batch_size"], {k: (round(v["p10_us"], 1), round(v["median_us"], 1), round(v["p90_us"], 1)) for k, v in e.items()})
PY
}
run .exp-a 5f2c54b A; run . gc B; run .exp-a 5f2c54b A2; run . gc B2
