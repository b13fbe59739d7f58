"""How many kernels one torch.topk call launches, and which, at the shapes of this module: batch 1,
64 and 256, vocabulary 32,768 and 262,144, k = 1, 50 and 1,024 (float32 logits, random); and one
torch.sort (descending) of the same logits; and the course's top-k (_topk.py) beside them. Read from
torch.profiler (CUDA activity only): every kernel and memset of one warm call, names verbatim, counted.
The count follows from the source (aten/src/ATen/native/cuda/TensorTopK.cu and TensorTopK.cpp): for
these slices should_use_multiblock picks the multi-block radix select (mbtopk::launch), whose every
pass of 8 bits (4 passes for float32, 2 for bfloat16) launches a digit count per block, a cumulative
sum over the blocks and the blocks' within-k counts; then come the kth counts, two CUB prefix sums,
the gather, and the sort of the k results (sortKeyValueInplace). The names stored are the measured
build's, verbatim: they, not this summary, are the evidence.

Also timed, per shape (device time, bench.gpu_us_each, 5 rounds): torch.topk launched eagerly from
the host against the same call replayed from a CUDA graph: what the launches cost in time.

On the CPU (small=True): batch 1 and 4, vocabulary 600, k 1 and 50; the profiler's CPU operators
stand in for kernels (there are none), and the course's top-k is counted from its plan."""

# --8<-- [start:imports]
from collections import Counter

import torch
from _topk import plan, topk  # the course's kernel (_topk.py)
from race import graphed  # capture once, replay (race.py)
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each

PROCESSES = 1  # one process: counts are exact, and the times are device times (CUDA events)

FULL = {"batches": [1, 64, 256], "vocabs": [32768, 262144], "ks": [1, 50, 1024]}
SMALL = {"batches": [1, 4], "vocabs": [600], "ks": [1, 50]}


# --8<-- [start:count]
def launched(fn) -> dict:
    """What one call of fn puts on the device, from torch.profiler: kernels and memsets by name,
    verbatim, with counts. Without a GPU: the CPU operators of the call instead."""
    cuda = torch.cuda.is_available()
    fn()  # warm: a first call may allocate, compile or pick an algorithm
    for _ in range(2):  # the first profile is a warm-up (CUPTI's start-up), the second is kept
        if cuda:
            torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            fn()
            if cuda:
                torch.cuda.synchronize()
    device = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    names = Counter(e.name for e in prof.events() if e.device_type == device)
    memsets = sum(n for name, n in names.items() if name.startswith("Memset"))
    return {
        "kernels": sum(names.values()) - memsets,
        "memsets": memsets,
        "by_name": [{"name": name, "count": n} for name, n in sorted(names.items())],
    }


# --8<-- [end:count]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    shape = SMALL if small else FULL
    torch.manual_seed(0)
    topks, sorts = [], []
    for vocab in shape["vocabs"]:
        for batch in shape["batches"]:
            logits = torch.randn(batch, vocab, device=dev)  # random, never zeros
            sorts.append(
                {"batch": batch, "vocab": vocab, **launched(lambda x=logits: torch.sort(x, dim=-1, descending=True))}
            )
            for k in shape["ks"]:
                call = lambda x=logits, k=k: torch.topk(x, k)  # noqa: E731  (one call, three uses)
                times = gpu_us_each({"eager": call, "graph": graphed(call)}, rounds=5, rep_ms=20)
                ours = launched(lambda x=logits, k=k: topk(x, k)) if cuda else None
                topks.append(
                    {
                        "batch": batch,
                        "vocab": vocab,
                        "k": k,
                        **launched(call),
                        "time_us": times,
                        "ours_launches": len(plan(batch, vocab, k)),
                        "ours_profiled": ours,
                    }
                )
    return {
        "repetitions": min(t["n"] for p in topks for t in p["time_us"].values()),
        "activity": "CUDA kernels and memsets" if cuda else "CPU operators (no GPU: no kernels)",
        "topk": topks,
        "sort": sorts,
        "torch_topk_kernels": {"min": min(p["kernels"] for p in topks), "max": max(p["kernels"] for p in topks)},
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"launches per call on {device_name()} ({r['activity']})")
    print(f"  {'batch':>6} {'V':>8} {'k':>6} {'topk':>5} {'memset':>7} {'ours':>5} {'eager us':>9} {'graph us':>9}")
    for p in r["topk"]:
        t = p["time_us"]
        print(
            f"  {p['batch']:>6} {p['vocab']:>8} {p['k']:>6} {p['kernels']:>5} {p['memsets']:>7} {p['ours_launches']:>5}"
            f" {t['eager']['median']:9.1f} {t['graph']['median']:9.1f}"
        )
    for p in r["sort"]:
        print(f"  torch.sort batch {p['batch']} V {p['vocab']}: {p['kernels']} kernels, {p['memsets']} memsets")
    first = r["topk"][-1]
    print(f"  torch.topk at batch {first['batch']}, V {first['vocab']}, k {first['k']}:")
    for entry in first["by_name"]:
        print(f"    {entry['count']} x {entry['name'][:110]}")
