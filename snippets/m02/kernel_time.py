"""The tiny add kernel's own GPU time, with and without the launch in the way, and how idle
the GPU sits while eager mode issues a chain of such ops."""

import torch

from coursekit.bench import device_name, gpu_us, graph_us, host_us

NUMEL = 1024  # the same tiny add as host_overhead.py
CHAIN = 64  # elementwise ops in the chain


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = torch.randn(NUMEL, device=dev), torch.randn(NUMEL, device=dev)
    out = torch.empty_like(a)

    def add():
        torch.add(a, b, out=out)

    def chain():
        x = a
        for _ in range(CHAIN // 2):
            x = torch.relu(x * 1.0001 + b)  # mul, add, relu: three small kernels per turn ...
        return x

    a_grad, b_grad = a.clone().requires_grad_(), b.clone().requires_grad_()
    # The whole eager path (autograd on, output allocated): host time per op, back to back.
    full_eager = host_us(lambda: torch.add(a_grad, b_grad), calls=50 if small else 5000, repeats=5 if small else 30)
    with torch.inference_mode():
        # --8<-- [start:timers]
        replayed = graph_us(add)  # thousands of adds in one CUDA graph: no launch gaps
        event_timed = gpu_us(add)  # one launch between two CUDA events, L2 flushed
        eager_stream = host_us(add, calls=50 if small else 5000, repeats=5 if small else 30)
        # --8<-- [end:timers]
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
