"""Time per torch.add against tensor size, 1 element to 2^28: the overhead floor, the bandwidth
slope, and the size where one stops hiding the other."""

import math
import statistics

import torch

from coursekit.bench import device_name, graph_us, host_us

PROCESSES = 3  # host-side numbers: the build job runs this snippet in three fresh processes


def time_add(numel: int, dev: str, calls: int, repeats: int) -> dict:
    """One size: eager time per torch.add and the kernel's alone. The inputs are freed on return,
    before the next size allocates its own."""
    with torch.inference_mode():
        a, b = torch.randn(numel, device=dev), torch.randn(numel, device=dev)
        # Eager as written: torch.add allocates its output; many calls back to back, then sync.
        eager = host_us(lambda: torch.add(a, b), calls=calls, repeats=repeats, warmup=3)
        kernel = graph_us(lambda: torch.add(a, b))  # the kernel alone, launch gaps removed
    return {"numel": numel, "bytes": 3 * 4 * numel, "eager_us": eager, "kernel_us": kernel}


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    exponents = range(0, 17, 4) if small else range(0, 29)
    repeats = 5 if small else 15
    points = []
    for e in exponents:
        calls = 3 if small else max(8, min(2000, 2**31 // (12 * 2**e)))
        points.append(time_add(2**e, dev, calls, repeats))

    # The floor: eager time per op wherever the kernel takes under a quarter of it.
    overhead_bound = [
        p["eager_us"]["median"] for p in points if p["kernel_us"]["median"] < 0.25 * p["eager_us"]["median"]
    ]
    floor_us = statistics.median(overhead_bound or [points[0]["eager_us"]["median"]])
    # The slope: bytes over kernel time at the largest size (inputs far beyond L2).
    big = points[-1]
    bandwidth_GBps = big["bytes"] / (big["kernel_us"]["median"] * 1e-6) / 1e9
    # Crossover: the first size whose kernel alone takes longer than the floor (log-interpolated).
    crossover = None
    for lo, hi in zip(points, points[1:]):
        if lo["kernel_us"]["median"] < floor_us <= hi["kernel_us"]["median"]:
            t0, t1 = math.log(lo["kernel_us"]["median"]), math.log(hi["kernel_us"]["median"])
            f = (math.log(floor_us) - t0) / (t1 - t0)
            crossover = 2 ** (math.log2(lo["numel"]) + f * (math.log2(hi["numel"]) - math.log2(lo["numel"])))
            break
    return {
        "repetitions": repeats,
        "device": dev,
        "dtype": "float32",
        "points": points,
        "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size if dev == "cuda" else 0,
        "floor_us": floor_us,
        "bandwidth_GBps": bandwidth_GBps,
        "crossover_numel": crossover if crossover is not None else -1,
        "crossover_bytes": 12 * crossover if crossover is not None else -1,
        "model_crossover_numel": floor_us * 1e-6 * bandwidth_GBps * 1e9 / 12,
        "tiny_gpu_busy_fraction": points[0]["kernel_us"]["median"] / points[0]["eager_us"]["median"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.add, float32, on {device_name()}: us per op")
    print(f"{'numel':>11} {'eager':>9} {'kernel':>9}")
    for p in r["points"]:
        print(f"{p['numel']:>11} {p['eager_us']['median']:9.2f} {p['kernel_us']['median']:9.2f}")
    print(
        f"floor {r['floor_us']:.2f} us, bandwidth {r['bandwidth_GBps']:,.4g} GB/s, "
        f"kernel time passes the floor at {r['crossover_numel']:.3g} elements"
    )
