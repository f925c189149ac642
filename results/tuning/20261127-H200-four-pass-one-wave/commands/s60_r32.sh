# the four-pass (r32/p4s) variants of the bf16 state: occupancy by Nsight Compute, then a tune of every bf16 variant
# at B = 64, 128, 256 (3 rounds), packed into $OUT
bash .before/s52_install.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
which ncu >/dev/null || export PATH=$PATH:$(ls -d /usr/local/cuda*/bin /opt/nvidia/nsight-compute/* 2>/dev/null | tr '\n' ':')
W=/tmp/gdn-r32; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader > $W/gpu.txt
for v in ${VARIANTS:-r32/noalloc/w1/p4s r16/noalloc/l16/w1/p2s}; do
  label=$(echo $v | tr / _)
  timeout -s INT 150 ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight \
    -k regex:gdn_decode_v4 --launch-skip 3 --launch-count 3 -o $W/$label -f \
    python -m tools.ncu_driver cuda-v4 ${NCU_BATCH:-128} --state-dtype bfloat16 --variant $v > $W/$label.log 2>&1
  echo "rc=$?" >> $W/$label.log
  ncu --import $W/$label.ncu-rep --page details --csv > $W/$label-details.csv 2>&1
  echo "== $v"; tail -1 $W/$label.log
  grep -E '"(Duration|DRAM Throughput|Registers Per Thread|Shared Memory Configuration Size|Static Shared Memory Per Block|Block Limit Shared Mem|Block Limit Registers|Theoretical Occupancy|Achieved Occupancy|Waves Per SM|Grid Size)"' $W/$label-details.csv \
    | awk -F'","' '{print $(NF-2)" = "$NF" "$(NF-1)}' | sort -u
done
timeout -s INT ${TUNE_LIMIT_S:-420} python -m tools.tune --algo cuda-v4 --dtypes bfloat16 --batches ${BATCHES:-64,128,256} \
  --rounds ${ROUNDS:-3} --out $W/tune > $W/tune.log 2>&1; echo "rc=$?" >> $W/tune.log
grep -h "^B=\|rc=" $W/tune.log | cut -c1-160
tar czf $OUT/r32.tgz -C $W --exclude='*.ncu-rep' . ; cp $W/*.ncu-rep $OUT/ 2>/dev/null; ls $OUT
