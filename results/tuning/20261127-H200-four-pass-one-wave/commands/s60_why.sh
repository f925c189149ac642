bash .before/s52_install.sh >/dev/null 2>&1; echo installed
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
W=/tmp/gdn-why; rm -rf $W; mkdir -p $W
run() {  # label variant defines
  timeout -s INT 150 ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    -k regex:gdn_decode_v4 --launch-skip 3 --launch-count 2 -o $W/$1 -f python .before/s60_why.py $2 128 "$3" > $W/$1.log 2>&1
  echo "$1 rc=$?"; ncu --import $W/$1.ncu-rep --page details --csv > $W/$1.csv 2>&1
}
run r32w1 r32/noalloc/w1/p4s ""
run r32w1-defcarve r32/noalloc/w1/p4s GDN_V4_DEFAULT_CARVEOUT
run r16p2s r16/noalloc/l16/w1/p2s ""
run r8w4 r8/plain/w4/p2 ""
tar czf $OUT/why.tgz -C $W --exclude='*.ncu-rep' .
for f in $W/*.csv; do echo "== $f"; grep -E '"(Duration|DRAM Throughput|Shared Memory Configuration Size|Theoretical Occupancy|Achieved Occupancy|Waves Per SM|L1/TEX Hit Rate|L2 Hit Rate|Warp Cycles Per Issued Instruction|Mem Busy|Max Bandwidth|Issue Slots Busy)"' $f | awk -F'","' '{print $(NF-2)" = "$NF}' | sort -u | tr '\n' ';'; echo; done
