# cuda-v4 bf16 staged variants: shipped vs the wide-staging candidate (GDN_V4_CANDIDATE=2048), tune --only $ONLY at $BATCHES, $ROUNDS rounds
bash .before/s52_install.sh >/dev/null 2>&1; echo installed
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/gdn-wide; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader > $W/gpu.txt
ONLY=${ONLY:-'p2s$|^r8/plain/w4/p2$|^r16/plain/l16/w4/p2$|^r8/plain/p2$'}
for side in ${SIDES:-shipped 2048}; do
  defs=(); case $side in 2048*) defs=(--defines GDN_V4_CANDIDATE=2048);; esac
  timeout -s INT ${SIDE_LIMIT_S:-150} python -m tools.tune --algo cuda-v4 --batches ${BATCHES:-32,64,128,256} --dtypes bfloat16 \
    "${defs[@]}" --only "$ONLY" --rounds ${ROUNDS:-3} --out $W/$side > $W/$side.log 2>&1
  echo "rc=$?" >> $W/$side.log; echo "-- $side"; grep -h "^B=\|rc=\|correct" $W/$side.log | cut -c1-170
done
tar czf $OUT/wide.tgz -C $W .
