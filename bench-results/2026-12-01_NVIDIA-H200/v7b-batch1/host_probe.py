"""Eager host cost of batch-1 renorm: host us/call (300 calls, no sync), do_bench median, cProfile of top-k."""
import cProfile, io, pstats, sys, time
sys.path.insert(0, ".")
import torch, triton.testing
import impl
dev = "cuda"
gen = torch.Generator(device=dev).manual_seed(0)
probs = torch.softmax(torch.randn(1, 129280, device=dev, generator=gen) * 3, -1)
k50 = torch.full((1,), 50, dtype=torch.int32, device=dev)
k1000 = torch.full((1,), 1000, dtype=torch.int32, device=dev)
p = torch.full((1,), 0.9, device=dev)
cases = {"top_p p=0.9": lambda: impl.top_p_renorm(probs, p), "top_k k=50": lambda: impl.top_k_renorm(probs, k50),
         "top_k k=1000": lambda: impl.top_k_renorm(probs, k1000)}
for fn in cases.values():
    for _ in range(50): fn()
torch.cuda.synchronize()
for name, fn in cases.items():
    best = 1e9
    for _ in range(3):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(300): fn()
        best = min(best, (time.perf_counter() - t0) / 300 * 1e6)
        torch.cuda.synchronize()
    med = 1e3 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    print(f"{name:14s} host {best:6.1f} us/call  do_bench {med:6.1f} us", flush=True)
prof = cProfile.Profile(); fn = cases["top_k k=50"]
prof.enable()
for _ in range(200): fn()
prof.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(16); print(s.getvalue()[-3500:])
