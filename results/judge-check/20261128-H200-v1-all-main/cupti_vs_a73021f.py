"""CUPTI medians per solution: the H200 contest-v1 run at 7064245 against the three main runs at a73021f
(results/judge-check/20261128-H200-clock-busy-ab/runs-slim.jsonl.gz)."""
import gzip, json, statistics as st
rows = [json.loads(l) for l in gzip.open("results/judge-check/20261128-H200-clock-busy-ab/runs-slim.jsonl.gz")]
old = {}
for r in rows:
    if r["git_commit"] != "a73021f":
        continue
    by = {}
    for t in r["traces"]:
        if t["status"] == "PASSED":
            by.setdefault(t["solution"], []).append(t["tiers"]["cupti"]["value_us"])
    for s, v in by.items():
        old.setdefault(s, []).append(st.median(v))
new = {}
for l in gzip.open("results/runs/20261128T155104Z_NVIDIA-H200-contest-v1/traces.jsonl.gz"):
    t = json.loads(l)
    ev = t["evaluation"]
    if ev["status"] == "PASSED":
        new.setdefault(t["solution"], []).append(ev["performance"]["tiers"]["cupti"]["value_us"])
print("| solution | a73021f, three runs (µs) | 7064245 (µs) | new / old mean |")
print("|---|---|---|---|")
for s in sorted(new, key=lambda s: st.median(new[s])):
    o = old.get(s)
    n = st.median(new[s])
    if not o:
        print(f"| {s} | – | {n:.3f} | – |"); continue
    print(f"| {s} | {min(o):.3f}–{max(o):.3f} | {n:.3f} | {n / st.mean(o):.3f} |")
