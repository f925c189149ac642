"""The two-round cross-check read by round and by the GPU's clocks (issue #29): each harness run's contest and cupti
figure over the plain side's median, per point, and nvidia-smi's SM clock, memory clock, temperature, power and
clock-event reasons over each phase of the run (tier_parity.json's phases). Run from the repository root:
python results/proof/20261128-H200-parity-order/order_and_clocks.py [FOLDER] (default: this run's folder; any
cross-check folder with tier_parity.json.gz and gpu_clocks.csv.gz)"""
import collections
import csv
import datetime as dt
import gzip
import io
import json
import statistics as st
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else "results/proof/20261128-H200-parity-order"
report = json.load(gzip.open(f"{HERE}/tier_parity.json.gz"))
harness, plain = report["figures"]["harness"], report["figures"]["plain"]

runs = report["harness_repeats"]
print("| subject, B | " + " | ".join(f"{t}: run {n} / plain" for t in ("contest", "cupti") for n in range(1, runs + 1)) + " |")
print("|---|" + "---|" * 2 * runs)
for point in sorted(set(harness) & set(plain), key=lambda p: (p.split(" B=")[0], int(p.split("B=")[1]))):
    cells = []  # the points both sides took (the harness also ran cuda-v4's bf16-state variant)
    for tier in ("contest", "cupti"):
        base = st.median(plain[point][tier])
        cells += [f"{value / base:.4f}" for value in harness[point][tier]]
    print(f"| {point} | " + " | ".join(cells) + " |")

print()
text = gzip.open(f"{HERE}/gpu_clocks.csv.gz", "rt").read()
samples = []
for row in list(csv.reader(io.StringIO(text)))[1:]:
    when = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()
    samples.append((when, int(row[1]), int(row[2]), int(row[3]), float(row[4]), row[5].strip()))
print("| phase | samples | SM clock MHz: median (min-max) | memory clock MHz | temperature °C | power W, median | "
      "clock-event reasons (count) |")
print("|---|---|---|---|---|---|---|")
for number, phase in enumerate(report["phases"], 1):
    inside = [s for s in samples if phase["start"] <= s[0] <= phase["end"]]
    reasons = collections.Counter(s[5] for s in inside)
    print(f"| {number}: {phase['side']} | {len(inside)} | {st.median(s[1] for s in inside):.0f} "
          f"({min(s[1] for s in inside)}-{max(s[1] for s in inside)}) | "
          f"{'/'.join(str(m) for m in sorted({s[2] for s in inside}))} | "
          f"{min(s[3] for s in inside)}-{max(s[3] for s in inside)} | {st.median(s[4] for s in inside):.0f} | "
          f"{', '.join(f'{k[-2:]}: {v}' for k, v in sorted(reasons.items()))} |")
