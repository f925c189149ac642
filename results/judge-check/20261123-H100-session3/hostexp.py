"""Device experiment: host time of fla-recurrent's run and the events figure, old-style vs new-style setup."""
import os, statistics, sys, time
from pathlib import Path
import torch
sys.path.insert(0, os.getcwd())
from harness.judge.solutions import import_package
from harness.judge.timing import L2Flusher
mod = import_package("flarec", "main", Path("solutions/fla-recurrent"))
dev, B = "cuda", int(sys.argv[1])
def fresh(seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g, device=dev).to(dt)
    return {"q": r(B,1,4,128), "k": r(B,1,4,128), "v": r(B,1,8,128), "state": r(B,8,128,128, dt=torch.float32),
            "A_log": r(8, dt=torch.float32), "a": r(B,1,8), "dt_bias": r(8, dt=torch.float32), "b": r(B,1,8), "scale": 0.0}
base = fresh(0)
def dests(): return {"output": torch.full((B,1,8,128), float("nan"), dtype=torch.bfloat16, device=dev),
                     "new_state": torch.full((B,8,128,128), float("nan"), device=dev)}
ring = [dests() for _ in range(8)]
flush = L2Flusher(dev)
def old_setup(i): return dict({k: (v.clone() if torch.is_tensor(v) else v) for k, v in base.items()}, **ring[0])
def new_setup(i):
    d = ring[i % 8]
    for t in d.values(): t.fill_(float("nan"))
    return dict(fresh(1000 + i), **{k: t.view(t.shape) for k, t in d.items()})
r_fd, w_fd = os.pipe()
if os.fork() == 0:
    os.close(w_fd)
    while os.read(r_fd, 4096): pass
    os._exit(0)
def loop(setup, write=False, sync=False, n=300):
    for i in range(300): a = setup(i); flush(); mod.run(a)
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(n)]; en = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    host = []
    for i in range(n):
        a = setup(i); flush()
        if sync: torch.cuda.synchronize()
        st[i].record(); t0 = time.perf_counter(); mod.run(a); host.append(time.perf_counter() - t0); en[i].record()
        if write: os.write(w_fd, b"x" * 64)
    torch.cuda.synchronize()
    ev = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(st, en))
    return statistics.median(ev), ev[int(0.9 * n)], statistics.median(host) * 1e6
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record(); flush(); e.record(); torch.cuda.synchronize(); print(f"flush {s.elapsed_time(e)*1e3:.1f} us", os.environ.get("TRITON_CACHE_DIR"))
for name, setup, w, sy in [("old", old_setup, 0, 0), ("new", new_setup, 0, 0), ("new+pipe", new_setup, 1, 0),
                           ("old-sync", old_setup, 0, 1), ("new-sync", new_setup, 0, 1), ("old", old_setup, 0, 0)]:
    med, p90, h = loop(setup, w, sy)
    print(f"B={B} {name:9s} events median {med:6.1f} p90 {p90:6.1f} | host run() median {h:6.1f} us")
