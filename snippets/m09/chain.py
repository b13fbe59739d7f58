"""What one kernel costs when it is launched from Python and when it is replayed from a CUDA graph:
a chain of n in-place adds, x.add_(1), for n = 1, 10, 100 and 1,000, on a tiny tensor (256 floats:
the kernel's own time is the GPU's floor for a kernel) and on a 16 MiB one (4 Mi floats read and
written, held in the H200's 60 MB L2: a kernel of a few microseconds).

Clock: wall time per kernel, on the host. bench.host_us_rounds times back-to-back calls with a
device synchronize at both ends, eager and replay in the same interleaved rounds. Wall time and
not device time, because eager's cost is the host's: the GPU sits idle between kernels waiting for
the next launch, a gap that events around one kernel do not see. The device time of one add inside
a graph (bench.graph_us: launch gaps removed) is stored as the floor both approach. Per n also: the
host time for one call to return from an idle GPU (the launch alone); the host time to capture the
chain (torch.cuda.graph, with the synchronize and empty_cache it does first) and to instantiate it
(CUDAGraph(keep_graph=True), then instantiate()), several captures each; and the bytes of the
graph's private memory pool, for this in-place chain and for an out-of-place one (y = y + 1, one
allocation per step).

On a CPU there are no CUDA graphs: the "graph" rows come from constraints.StandInGraph, which reruns
the chain and copies its result, so they time eager plus a copy; "capture" is the stand-in's one
run; pool bytes are 0. The sizes are smaller (the data says which)."""

# --8<-- [start:imports]
import contextlib
import time

import torch
from constraints import StandInGraph  # the CPU's stand-in for a captured graph, from constraints.py

# --8<-- [end:imports]
from coursekit.bench import device_name, graph_us, host_us_rounds, summarize

PROCESSES = 3  # host-bound: wall time of launches; three fresh processes give the run-to-run spread
LENGTHS = [1, 10, 100, 1000]  # kernels per chain
SIZES = {"tiny": 256, "few_us": 4 * 2**20}  # floats per tensor (on a CPU: 256 and 4,096)
KERNELS_PER_SAMPLE = 2000  # each timed sample launches this many kernels: calls = KERNELS_PER_SAMPLE // n
CAPTURES = 5  # capture and instantiate samples per chain


# --8<-- [start:chain]
def chain(x, n: int):
    for _ in range(n):
        x.add_(1)
    return x


def chain_out_of_place(x, n: int):
    for _ in range(n):
        x = x + 1  # a new tensor each step; the previous one is freed
    return x


# --8<-- [end:chain]


# --8<-- [start:capture]
def captured(fn, x, n: int):
    """A graph of fn(x, n): (graph, host us to capture it, host us to instantiate it). One-off
    events, so perf_counter around each (bench times repeated calls)."""
    if not x.is_cuda:
        start = time.perf_counter()
        graph = StandInGraph(lambda t: fn(t, n), (x,))
        return graph, (time.perf_counter() - start) * 1e6, 0.0
    # capture_end() then leaves instantiation to us
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    start = time.perf_counter()
    with torch.cuda.graph(graph):
        fn(x, n)
    recorded = time.perf_counter()
    graph.instantiate()  # cudaGraphInstantiate: the executable graph replay() launches
    return graph, (recorded - start) * 1e6, (time.perf_counter() - recorded) * 1e6


def pool_bytes(pool) -> int:
    """Bytes the caching allocator holds for a private pool (graph.pool()): its segments in a snapshot."""
    pool = tuple(pool)
    return sum(s["total_size"] for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == pool)


# --8<-- [end:capture]


# --8<-- [start:point]
def time_chain(x, n: int, repeats: int, per_sample: int) -> dict:
    """Wall us per kernel, eager against replay, in the same rounds; and the launch alone."""
    graph, _, _ = captured(chain, x, n)
    calls = max(2, per_sample // n)
    null = contextlib.nullcontext
    raw = host_us_rounds(
        {"eager": (lambda: chain(x, n), null), "graph": (graph.replay, null)},
        calls=calls,
        repeats=repeats,
        warmup=max(1, calls // 10),
        issue_per_round=2,
    )
    per_kernel = {k: [us / n for us in samples] for k, samples in raw["host_us"].items()}
    return {
        "calls_per_repetition": calls,
        "wall_us_per_kernel": {k: summarize(v, "us", "host", rounds=True) for k, v in per_kernel.items()},
        "speedup": summarize([e / g for e, g in zip(per_kernel["eager"], per_kernel["graph"])], "x", "host"),
        "issue_us": {k: summarize(v, "us", "host") for k, v in raw["issue_us"].items()},
    }


# --8<-- [end:point]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    sizes = {"tiny": 256, "few_us": 4096} if small else SIZES
    repeats, per_sample = (3, 200) if small else (15, KERNELS_PER_SAMPLE)
    floors, points = {}, []
    for size, numel in sizes.items():
        x = torch.zeros(numel, device=dev)
        floors[size] = {
            "elements": numel,
            "bytes_moved": 2 * numel * x.element_size(),  # read and write x
            "device_us_per_kernel": graph_us(lambda: x.add_(1)),
        }
        for n in LENGTHS:
            point = {"size": size, "kernels": n, **time_chain(x, n, repeats, per_sample)}
            captures = [captured(chain, x, n) for _ in range(CAPTURES)]
            point["capture_us"] = summarize([c[1] for c in captures], "us", "host")
            point["instantiate_us"] = summarize([c[2] for c in captures], "us", "host")
            out_of_place, _, _ = captured(chain_out_of_place, x, n)
            graphs = {"in_place": captures[0][0], "out_of_place": out_of_place}  # the stand-in has no pool: 0
            point["pool_bytes"] = {k: pool_bytes(g.pool()) if cuda else 0 for k, g in graphs.items()}
            del captures, out_of_place, graphs
            points.append(point)
    notes = [
        "wall_us_per_kernel: host wall time of back-to-back calls (synchronized at both ends) over the kernels "
        "per call; issue_us: host time for one call to return, from an idle device; capture_us includes the "
        "synchronize and empty_cache that torch.cuda.graph does before capturing"
    ]
    if not cuda:
        notes.append(
            "no CUDA graphs on a CPU: 'graph' is the stand-in (constraints.StandInGraph), which reruns the chain "
            "and copies its result; instantiate_us and pool_bytes are 0; device_us_per_kernel is host time"
        )
    return {
        "repetitions": repeats,
        "device": dev,
        "graph": "torch.cuda.CUDAGraph" if cuda else "StandInGraph (CPU stand-in)",
        "lengths": LENGTHS,
        "sizes": floors,
        "points": points,
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"x.add_(1) chains on {device_name()} ({r['graph']})")
    for size, f in r["sizes"].items():
        print(f"{size}: {f['elements']} floats, one add in a graph {f['device_us_per_kernel']['median']:.2f} us")
        print(f"{'n':>6} {'eager us/k':>11} {'graph us/k':>11} {'speedup':>8} {'replay issue':>13}", end="")
        print(f" {'capture us':>11} {'instantiate':>12} {'pool in/out MiB':>16}")
        for p in (p for p in r["points"] if p["size"] == size):
            w, pool = p["wall_us_per_kernel"], p["pool_bytes"]
            print(f"{p['kernels']:>6} {w['eager']['median']:>11.2f} {w['graph']['median']:>11.2f}", end="")
            print(f" {p['speedup']['median']:>7.1f}x {p['issue_us']['graph']['median']:>13.1f}", end="")
            print(f" {p['capture_us']['median']:>11.0f} {p['instantiate_us']['median']:>12.0f}", end="")
            print(f" {pool['in_place'] / 2**20:>7.1f}/{pool['out_of_place'] / 2**20:<8.1f}")
    for note in r["notes"]:
        print("note:", note)
