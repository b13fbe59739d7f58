"""Vector add in Triton against torch.add: 2^28 float32 elements (1 GiB per tensor, far beyond the
H200's L2) on the GPU. One program per block of BLOCK_SIZE elements: its offsets from program_id,
a mask for the tail, loads, an add, a store. Bandwidth counts the bytes read plus written (three
4-byte values per element); a device-to-device copy of the same size is the roofline beside it.
A few BLOCK_SIZE / num_warps pairs are timed, the tutorial's (1024, 4) first."""

# --8<-- [start:imports]
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton runs the kernels in its interpreter, on the CPU
import triton  # noqa: E402  (imported after the switch above, as Triton's documentation has it)
import triton.language as tl  # noqa: E402

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us, rate  # noqa: E402

PROCESSES = 1  # one process: every number here is a device-side time (CUDA events), not a host timing

NUMEL = 2**28  # 1 GiB of float32 per tensor on the GPU
NUMEL_SMALL = 2**12 + 17  # on the CPU, through the interpreter; not a multiple of any block: the mask matters
TUTORIAL = (1024, 4)  # (BLOCK_SIZE, num_warps) of Triton's vector-add tutorial
CONFIGS = [TUTORIAL, (2048, 4), (4096, 8), (8192, 8)]  # 8 to 32 elements per thread


# --8<-- [start:kernel]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)  # which block of the vector this program owns
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # a block of indices, not one index
    mask = offsets < n_elements  # the last block may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, block_size: int = 1024, num_warps: int = 4):
    """out = x + y: one program per BLOCK_SIZE elements, each run by num_warps warps."""
    n = out.numel()
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=num_warps)
    return out


# --8<-- [end:kernel]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = NUMEL_SMALL if small else NUMEL
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)  # random data, never zeros
    out = torch.empty_like(x)
    moved = 3 * n * x.element_size()  # x and y read, out written

    torch_us = gpu_us(lambda: torch.add(x, y, out=out))  # the peer, into a preallocated output too
    matches = torch.equal(add(x, y, out.fill_(float("nan"))), x + y)  # float32 addition: the same bits either way
    triton_rows = []
    for block_size, num_warps in CONFIGS:
        t = gpu_us(lambda: add(x, y, out, block_size, num_warps))
        triton_rows.append(
            {
                "block_size": block_size,
                "num_warps": num_warps,
                "elements_per_thread": block_size // (32 * num_warps),
                "tutorial": (block_size, num_warps) == TUTORIAL,
                "time_us": t,
                "GBps": rate(t, moved / 1e9, "GB/s"),
                "vs_torch_add": torch_us["median"] / t["median"],
            }
        )
    # The roofline: a device-to-device copy moving as many bytes as the add (3n/2 floats read, as many written).
    src = torch.randn(3 * n // 2, device=dev)
    dst = torch.empty_like(src)
    copy_bytes = 2 * src.numel() * src.element_size()
    copy_us = gpu_us(lambda: dst.copy_(src))
    copy = {"bytes": copy_bytes, "time_us": copy_us, "GBps": rate(copy_us, copy_bytes / 1e9, "GB/s")}
    best = max(triton_rows, key=lambda r: r["GBps"]["median"])
    return {
        "repetitions": min(torch_us["n"], copy_us["n"], *(r["time_us"]["n"] for r in triton_rows)),
        "numel": n,
        "dtype": "float32",
        "bytes_moved": moved,
        "matches_torch": matches,
        "torch_add": {"time_us": torch_us, "GBps": rate(torch_us, moved / 1e9, "GB/s")},
        "triton": triton_rows,
        "best": {k: best[k] for k in ("block_size", "num_warps", "vs_torch_add")},
        "copy": copy,
        "fraction_of_copy": {
            "torch_add": (moved / torch_us["median"]) / (copy_bytes / copy_us["median"]),
            "triton_best": best["GBps"]["median"] / copy["GBps"]["median"],
        },
        "notes": [] if dev == "cuda" else ["CPU run: the kernels ran in Triton's interpreter; times are host times"],
        # the scoreboard's row (coursekit/scoreboard.py): ours against the peer, timed in this run
        "races": [
            {
                "name": f"Triton vector add, {n:,} fp32",
                "peer": "torch.add",
                "ours": best["time_us"],
                "theirs": torch_us,
                "bar": 0.98,
                "chapter": "part-k/07-triton.md",
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"vector add of {r['numel']} float32 on {device_name()}; bytes read + written: {r['bytes_moved']}")
    print(f"  {'variant':<28} {'us':>10} {'GB/s':>9} {'vs torch.add':>13}")
    t = r["torch_add"]
    print(f"  {'torch.add':<28} {t['time_us']['median']:10.1f} {t['GBps']['median']:9.1f}")
    for row in r["triton"]:
        name = f"triton BLOCK_SIZE={row['block_size']} warps={row['num_warps']}"
        print(
            f"  {name:<28} {row['time_us']['median']:10.1f} {row['GBps']['median']:9.1f} {row['vs_torch_add']:12.3f}x"
        )
    c = r["copy"]
    print(f"  {'copy (roofline)':<28} {c['time_us']['median']:10.1f} {c['GBps']['median']:9.1f}")
    print(f"  matches torch.add bit for bit: {r['matches_torch']}")
    for note in r["notes"]:
        print(f"  note: {note}")
