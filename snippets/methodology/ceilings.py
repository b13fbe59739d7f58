"""The two ceilings every chapter compares against, measured in the same build as the chapter:
device-to-device copy bandwidth (bytes read + bytes written) and a large bf16 matrix product."""

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


def gemm_workload(n: int, dev: str, dtype: torch.dtype):
    """An n x n by n x n matrix product on random data into a preallocated output: the function
    to time, and its FLOPs."""
    a, b = (torch.randn(n, n, device=dev, dtype=dtype) for _ in range(2))
    c = torch.empty(n, n, device=dev, dtype=dtype)
    return lambda: torch.mm(a, b, out=c), 2 * n**3


# --8<-- [end:workloads]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    # 2 GiB per buffer on the GPU: far beyond the H200's 60 MB L2, so this is HBM, not cache.
    copy, copy_bytes = copy_workload(2**18 if small else 2**29, dev)
    copy_us = gpu_us(copy)

    n = 256 if small else 8192
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    gemm, gemm_flops = gemm_workload(n, dev, dtype)
    mm_us = gpu_us(gemm)

    return {
        "repetitions": min(copy_us["n"], mm_us["n"]),
        "copy": {"bytes": copy_bytes, "time_us": copy_us, "GBps": rate(copy_us, copy_bytes / 1e9, "GB/s")},
        "gemm": {
            "n": n,
            "dtype": str(dtype).removeprefix("torch."),
            "time_us": mm_us,
            "TFLOPs": rate(mm_us, gemm_flops / 1e12, "TFLOP/s"),
        },
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"ceilings on {device_name()}")
    print(f"  copy  {r['copy']['bytes'] / 2**30:5.1f} GiB moved   {r['copy']['GBps']['median']:10.1f} GB/s")
    print(f"  GEMM  {r['gemm']['n']}^3 {r['gemm']['dtype']:<9} {r['gemm']['TFLOPs']['median']:10.1f} TFLOP/s")
