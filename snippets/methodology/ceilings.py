"""The two ceilings every chapter compares against, measured in the same build as the chapter:
device-to-device copy bandwidth (bytes read + bytes written) and bf16 matrix products of several
shapes (square ones, and the two of module 03's model at 4,096 tokens) after a long warm-up,
with the GPU's SM clock read before and after; the ceiling is the fastest shape."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us, rate

PROCESSES = 1  # one process: both ceilings are GPU-bound device times, not host timings


# --8<-- [start:workloads]
def copy_workload(numel: int, dev: str):
    """A device-to-device copy of numel random floats: the function to time, and the bytes it
    moves (read plus written)."""
    src = torch.randn(numel, device=dev)  # random data, never zeros
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src), 2 * src.numel() * src.element_size()


def gemm_workload(m: int, n: int, k: int, dev: str, dtype: torch.dtype):
    """An m x k by k x n matrix product on random data into a preallocated output: the function
    to time, and its FLOPs."""
    a, b = torch.randn(m, k, device=dev, dtype=dtype), torch.randn(k, n, device=dev, dtype=dtype)
    c = torch.empty(m, n, device=dev, dtype=dtype)
    return lambda: torch.mm(a, b, out=c), 2 * m * n * k


# --8<-- [end:workloads]


GEMM_SHAPES = {  # name: (m, n, k)
    "4096^3": (4096, 4096, 4096),
    "8192^3": (8192, 8192, 8192),
    "16384^3": (16384, 16384, 16384),
    "m03 up-projection, 4096 tokens": (4096, 4096, 1024),
    "m03 down-projection, 4096 tokens": (4096, 1024, 4096),
}


def sm_clock_mhz() -> int:
    """The GPU's current SM clock (NVML through torch.cuda.clock_rate), or 0 where it can't be read."""
    try:
        return int(torch.cuda.clock_rate()) if torch.cuda.is_available() else 0
    except Exception:  # no NVML bindings installed
        return 0


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    # 2 GiB per buffer on the GPU: far beyond the H200's 60 MB L2, so this is HBM, not cache.
    copy, copy_bytes = copy_workload(2**18 if small else 2**29, dev)
    copy_us = gpu_us(copy)

    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    shapes = {"256^3": (256, 256, 256)} if small else GEMM_SHAPES
    clock_before = sm_clock_mhz()
    gemms = {}
    for name, (m, n, k) in shapes.items():
        gemm, flops = gemm_workload(m, n, k, dev, dtype)
        # half a second of warm-up per shape: the clocks settle before the samples are taken
        mm_us = gpu_us(gemm, warmup_ms=500, rep_ms=300)
        gemms[name] = {"m": m, "n": n, "k": k, "time_us": mm_us, "TFLOPs": rate(mm_us, flops / 1e12, "TFLOP/s")}
    best = max(gemms, key=lambda name: gemms[name]["TFLOPs"]["median"])
    return {
        "repetitions": min(copy_us["n"], *(g["time_us"]["n"] for g in gemms.values())),
        "copy": {"bytes": copy_bytes, "time_us": copy_us, "GBps": rate(copy_us, copy_bytes / 1e9, "GB/s")},
        "gemm": {**gemms[best], "shape": best, "dtype": str(dtype).removeprefix("torch.")},
        "gemm_shapes": gemms,
        "sm_clock_mhz": {"before": clock_before, "after": sm_clock_mhz()},
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"ceilings on {device_name()}")
    print(f"  copy  {r['copy']['bytes'] / 2**30:5.1f} GiB moved   {r['copy']['GBps']['median']:10.1f} GB/s")
    for name, g in r["gemm_shapes"].items():
        print(f"  GEMM  {name:<34} {r['gemm']['dtype']:<9} {g['TFLOPs']['median']:10.1f} TFLOP/s")
    clock = r["sm_clock_mhz"]
    print(f"  ceiling: {r['gemm']['shape']}; SM clock {clock['before']} -> {clock['after']} MHz")
