"""Probe: does a process's last seconds decide how fast its next trial runs, past a 0.2 s busy warm-up?
Each cycle: HISTORY_S of a pattern, then WARM_S of back-to-back readings (the tiers' clock warm-up), then TRIAL_S of
readings that count (a sync trial's length). Patterns of the history: "busy" (readings back to back), "duty" (5 ms of
readings, then a blocking pipe read another process answers 5 ms later: the worker's life), "spin" (duty, the wait
polling a non-blocking read), "duty-pin" (duty with the process pinned to the CPU it was on, history to trial end).
python s69_history_probe.py OUT.json [ROUNDS] [CYCLES]"""
import json, os, statistics, subprocess, sys, time

sys.path.insert(0, os.getcwd())
from harness.judge.timing.host_speed import host_probe_s

HISTORY_S, WARM_S, TRIAL_S, ON_S = 2.0, 0.2, 0.02, 0.005
ANSWER = [sys.executable, "-c", "import os, sys, time\nr, w = int(sys.argv[1]), int(sys.argv[2])\n"
          "while os.read(r, 1):\n    time.sleep(0.005)\n    os.write(w, b'x')"]


def cpu_now():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])


def readings_for(seconds, out=None):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x = host_probe_s() * 1e6
        if out is not None:
            out.append(x)


def wait_poll(fd):
    while True:
        try:
            if os.read(fd, 1):
                return
        except BlockingIOError:
            pass


def history(name, answer):
    if name == "busy":
        return readings_for(HISTORY_S)
    ask_w, got_r = answer
    end = time.perf_counter() + HISTORY_S
    while time.perf_counter() < end:
        readings_for(ON_S)
        os.write(ask_w, b"x")
        wait_poll(got_r) if name == "spin" else os.read(got_r, 1)


def cycle(name):
    answer, proc, everyone = None, None, os.sched_getaffinity(0)
    if name != "busy":
        ask_r, ask_w = os.pipe(); got_r, got_w = os.pipe()
        os.set_blocking(got_r, name != "spin")
        proc = subprocess.Popen([*ANSWER, str(ask_r), str(got_w)], pass_fds=(ask_r, got_w))
        os.close(ask_r); os.close(got_w)
        answer = (ask_w, got_r)
    if name == "duty-pin":
        os.sched_setaffinity(0, {cpu_now()})
    try:
        cpu_start = cpu_now()
        history(name, answer)
        readings_for(WARM_S)
        cpu_trial = cpu_now()
        trial = []
        readings_for(TRIAL_S, trial)
        return {"pattern": name, "cpu_start": cpu_start, "cpu_trial": cpu_trial, "cpu_end": cpu_now(),
                "trial": [round(x, 2) for x in trial]}
    finally:
        os.sched_setaffinity(0, everyone)
        if proc is not None:
            os.close(answer[0]); proc.wait(5); os.close(answer[1])


out, rounds, cycles = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6, int(sys.argv[3]) if len(sys.argv) > 3 else 3
names = ["busy", "duty", "spin", "duty-pin"]
rows = []
for r in range(rounds):
    order = names if r % 2 == 0 else names[::-1]
    for c in range(cycles):
        for name in order:
            row = cycle(name)
            row["round"] = r
            rows.append(row)
    print(f"round {r} done {time.strftime('%H:%M:%S')}", flush=True)
json.dump(rows, open(out, "w"))
fast = min(x for row in rows for x in row["trial"])
for row in rows:
    row["median"] = statistics.median(row["trial"])
    row["slow"] = row["median"] > 1.3 * fast
print(f"fastest reading {fast:.2f} us; a trial is slow when its median is above {1.3 * fast:.2f}")
for r in range(rounds):
    print(f"round {r}: " + ", ".join(
        f"{n} {sum(x['slow'] for x in rows if x['round'] == r and x['pattern'] == n)}/{cycles}" for n in names))
for n in names:
    mine = [x for x in rows if x["pattern"] == n]
    print(f"{n:9s} slow trials {sum(x['slow'] for x in mine)}/{len(mine)}  median of medians "
          f"{statistics.median(x['median'] for x in mine):.2f} us  migrated history->trial {sum(x['cpu_start'] != x['cpu_trial'] for x in mine)}")
