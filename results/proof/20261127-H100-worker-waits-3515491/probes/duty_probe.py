"""Probe (for the next session): does a process that works in bursts read the host slow more often than one that
never stops, over long segments? Patterns, SECONDS each, alternating over ROUNDS: "busy" (host_speed readings back
to back), "duty" (readings for 5 ms, then a blocking pipe read that another process answers 5 ms later: the worker's
half-busy life), "duty50" (50 ms on, 50 ms off). Unpinned, as the worker. python s68_duty_probe.py OUT.json [SECONDS] [ROUNDS]"""
import json, os, statistics, subprocess, sys, time

sys.path.insert(0, os.getcwd())
from harness.judge.timing.host_speed import host_probe_s

ANSWER = [sys.executable, "-c", "import os, sys, time\nr, w, pause = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])\n"
          "while os.read(r, 1):\n    time.sleep(pause)\n    os.write(w, b'x')"]


def segment(name, seconds):
    readings, end, on, pause = [], time.perf_counter() + seconds, {"busy": None, "duty": 0.005, "duty50": 0.05}[name], None
    answer = None
    if on is not None:
        ask_r, ask_w = os.pipe(); got_r, got_w = os.pipe()
        answer = subprocess.Popen([*ANSWER, str(ask_r), str(got_w), str(on)], pass_fds=(ask_r, got_w))
        os.close(ask_r); os.close(got_w)
    try:
        while time.perf_counter() < end:
            burst_end = time.perf_counter() + (on or seconds)
            while time.perf_counter() < min(burst_end, end):
                readings.append(host_probe_s() * 1e6)
            if answer is not None:
                os.write(ask_w, b"x"); os.read(got_r, 1)  # blocked until the other process answers
    finally:
        if answer is not None:
            os.close(ask_w); answer.wait(5); os.close(got_r)
    return readings


out, seconds, rounds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 15.0, int(sys.argv[3]) if len(sys.argv) > 3 else 4
rows = []
for r in range(rounds):
    for name in (("busy", "duty", "duty50") if r % 2 == 0 else ("duty50", "duty", "busy")):
        got = segment(name, seconds)
        rows.append({"round": r, "pattern": name, "readings": [round(x, 2) for x in got]})
        print(f"round {r} {name:7s} n {len(got):6d} median {statistics.median(got):.2f} us", flush=True)
json.dump(rows, open(out, "w"))
fast = min(x for row in rows for x in row["readings"])
for row in rows:
    row["slow"] = sum(x > 1.3 * fast for x in row["readings"]) / len(row["readings"])
for r in range(rounds):
    print(f"round {r}: " + ", ".join(f"{row['pattern']} {row['slow']:.2f}" for row in rows if row["round"] == r))
