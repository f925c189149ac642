"""Probe: does a vCPU that was idle run slow when work arrives, and warm up over seconds? One process moves in turn
to each of CPUs 0..LAST-1 (idle before it came: nothing else is pinned there), DWELL_S on each, ROTATIONS times,
reading the sync tier's stand-in back to back in 20-ms blocks; beside it `tools.host_speed_log --cpu LAST` runs
busy all along (the warm control). Each block: epoch start, CPU, seconds since the move, median µs.
Run from the repository root: python s69_move_probe.py OUT_DIR [DWELL_S] [ROTATIONS]"""
import json, os, statistics, subprocess, sys, time

sys.path.insert(0, os.getcwd())
from harness.judge.timing.host_speed import stand_in_s

out = sys.argv[1]
dwell, rotations = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0, int(sys.argv[3]) if len(sys.argv) > 3 else 3
last = max(os.sched_getaffinity(0))
os.makedirs(out, exist_ok=True)
control = subprocess.Popen([sys.executable, "-m", "tools.host_speed_log", "--out", f"{out}/control.txt", "--cpu", str(last)])
time.sleep(3)  # the control warms first
blocks = []
for r in range(rotations):
    for cpu in range(last):
        os.sched_setaffinity(0, {cpu})
        moved = time.perf_counter()
        while time.perf_counter() - moved < dwell:
            began, since, until, readings = time.time(), time.perf_counter() - moved, time.perf_counter() + 0.02, []
            while time.perf_counter() < until:
                readings.append(stand_in_s())
            blocks.append([round(began, 3), cpu, round(since, 3), round(statistics.median(readings) * 1e6, 2)])
    print(f"rotation {r} done {time.strftime('%H:%M:%S')}", flush=True)
control.terminate(); control.wait(5)
json.dump(blocks, open(f"{out}/mover.json", "w"))
ctrl = [tuple(map(float, l.split())) for l in open(f"{out}/control.txt") if len(l.split()) == 2]
fast = min(min(b[3] for b in blocks), min(v for _, v in ctrl))
slow = 1.3 * fast
print(f"fastest block {fast:.2f} us; slow above {slow:.2f}")


def control_slow_share(t0, t1):
    inside = [v for t, v in ctrl if t0 <= t < t1]
    return sum(v > slow for v in inside) / len(inside) if inside else float("nan")


for lo, hi in ((0, 0.25), (0.25, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, dwell)):
    part = [b for b in blocks if lo <= b[2] < hi]
    if not part:
        continue
    share = sum(b[3] > slow for b in part) / len(part)
    ctrl_shares = [x for x in (control_slow_share(b[0], b[0] + 0.02) for b in part) if x == x]
    print(f"{lo:4.2f}-{hi:4.2f} s after the move: mover slow {share:.2f} of {len(part)} blocks, median "
          f"{statistics.median(b[3] for b in part):.2f} us; control at those moments slow "
          f"{statistics.mean(ctrl_shares) if ctrl_shares else float('nan'):.2f}")
