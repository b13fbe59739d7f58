"""The tiny add kernel's own GPU time, with and without the launch in the way, and how idle
the GPU sits while eager mode issues a chain of such ops."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us, graph_us, host_us, host_us_each

PROCESSES = 3  # host-side numbers: the build job runs this snippet in three fresh processes

# --8<-- [start:constants]
NUMEL = 1024  # the same tiny add as host_overhead.py
CHAIN = 64  # the chain runs CHAIN // 2 turns of mul, add, relu: 96 kernels

# --8<-- [end:constants]


# --8<-- [start:workloads]
def workloads(dev: str) -> dict:
    """What is timed, name: (the function, the grad mode it runs under)."""
    a, b = torch.randn(NUMEL, device=dev), torch.randn(NUMEL, device=dev)
    out = torch.empty_like(a)
    a_grad, b_grad = a.clone().requires_grad_(), b.clone().requires_grad_()

    def chain():
        x = a
        for _ in range(CHAIN // 2):
            # mul, add, relu: three small kernels per turn
            x = torch.relu(x * 1.0001 + b)
        return x

    return {
        # no autograd, no allocation
        "add": (lambda: torch.add(a, b, out=out), torch.inference_mode),
        # autograd on, output allocated
        "full_eager": (
            lambda: torch.add(a_grad, b_grad),
            contextlib.nullcontext,
        ),
        "chain": (chain, torch.inference_mode),
    }


# --8<-- [end:workloads]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    work = workloads(dev)
    add, _ = work["add"]
    chain, _ = work["chain"]
    # The two eager rows: host time per op, back to back, the two interleaved round by round.
    eager = host_us_each(
        {"eager_back_to_back": work["add"], "full_eager": work["full_eager"]},
        calls=50 if small else 5000,
        repeats=5 if small else 30,
    )
    eager_stream, full_eager = eager["eager_back_to_back"], eager["full_eager"]
    with torch.inference_mode():
        replayed = graph_us(add)  # thousands of adds in one CUDA graph: no launch gaps
        event_timed = gpu_us(add)  # one launch between two CUDA events, L2 flushed
        chain_eager = host_us(chain, calls=2 if small else 200, repeats=5 if small else 30)
        chain_graph = graph_us(chain)
    chain_kernels = 3 * (CHAIN // 2)
    return {
        "repetitions": min(replayed["n"], event_timed["n"], eager_stream["n"]),
        "numel": NUMEL,
        "add_us": {
            "graph_replay": replayed,
            "event_timed_launch": event_timed,
            "eager_back_to_back": eager_stream,
            "full_eager": full_eager,
        },
        "host_to_kernel_ratio": {
            "full_eager": full_eager["median"] / replayed["median"],
            "lean_eager": eager_stream["median"] / replayed["median"],
        },
        "chain": {
            "kernels": chain_kernels,
            "eager_us": chain_eager,
            "graph_us": chain_graph,
            "gpu_busy_fraction": chain_graph["median"] / chain_eager["median"],
        },
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.add of {r['numel']} floats on {device_name()}, us per op")
    for name, s in r["add_us"].items():
        print(f"  {name:<20} {s['median']:7.2f}   (p10 {s['p10']:.2f}, p90 {s['p90']:.2f})")
    c = r["chain"]
    print(
        f"chain of {c['kernels']} kernels: eager {c['eager_us']['median']:.1f} us, "
        f"graph replay {c['graph_us']['median']:.1f} us, GPU busy {c['gpu_busy_fraction']:.0%}"
    )
