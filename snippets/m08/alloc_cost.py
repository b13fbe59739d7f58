"""What one torch.empty costs the host on the GPU when the caching allocator has a block of that size
in its cache ("cached") and when it has none and must call cudaMalloc ("uncached":
torch.cuda.empty_cache() just before), at sizes in the small pool (1,000 bytes, a block of 1,024;
256 KiB; 1 MiB, the largest small request), in the large pool below the 20 MiB segment (4 MiB), and
above it (33 MiB, a segment of 34 MiB, whose last 1 MiB is not split off; 256 MiB; 2 GiB: each a
segment of its own). Host clock. Each sample is one call between two device synchronisations
(coursekit.bench, calls=1), so a "floor" variant that calls nothing is timed in the same rounds; the
set-up (filling or emptying the cache) runs outside the timed call. memory_stats read around every
timed call say which path it took: cudaMalloc calls, bytes reserved and allocated per call; the
plain-Python model of the allocator (_allocator_model.py) predicts the same numbers.

Then the steady state of a training loop: 1,000 back-to-back torch.empty calls per size, each
tensor freed at once, so every call after the first is served from the cache; torch.empty(0), which
makes a tensor without allocating, is the baseline.

CPU stand-in: the same calls on the CPU allocator (host times of torch.empty on the CPU; the cache's
set-up does nothing there), and the allocator's path per call from the model."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
# isort: split
from _allocator_model import (
    CONSTANTS,
    GiB,
    KiB,
    MiB,
    Model,
    allocation_size,
    from_memory_stats,
    pool_of,
    round_size,
    should_split,
)

from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # host-side timings: three fresh processes give the run-to-run spread
SIZES = [1000, 256 * KiB, 1 * MiB, 4 * MiB, 33 * MiB, 256 * MiB, 2 * GiB]  # 1000 and 33 MiB show the rounding
SMALL_SIZES = SIZES[:5]  # on the CPU
COUNTED = ("num_device_alloc", "num_device_free", "num_alloc_retries", "segments", "allocated_bytes", "reserved_bytes")


# --8<-- [start:paths]
class AllocationPath:
    """torch.empty(size) served from the cache (cached=True) or after empty_cache (cached=False), one
    timed call per prepared() block. prepared() fills or empties the cache first, then counts what the
    allocator did during the call: from memory_stats on a GPU, and from the model of the allocator
    (which replays the same calls) everywhere."""

    def __init__(self, size: int, dev: str, cached: bool):
        self.size, self.dev, self.cached = size, dev, cached
        self.kept, self.model = [], Model()
        self.calls, self.seen, self.predicted = 0, dict.fromkeys(COUNTED, 0), dict.fromkeys(COUNTED, 0)

    def alloc(self):  # the timed call
        self.kept.append(torch.empty(self.size, dtype=torch.uint8, device=self.dev))

    def stats(self) -> dict:
        return from_memory_stats(torch.cuda.memory_stats()) if self.dev == "cuda" else self.model.state()

    @contextlib.contextmanager
    def prepared(self):
        if self.cached:  # allocated and freed at once: its block waits in the cache
            torch.empty(self.size, dtype=torch.uint8, device=self.dev)
            self.model.free(self.model.malloc(self.size))
        else:  # every segment without a live block goes back to the driver (cudaFree)
            torch.cuda.empty_cache()
            self.model.empty_cache()
        before, model_before = self.stats(), self.model.state()
        yield
        blocks = [self.model.malloc(self.size) for _ in self.kept]  # the model replays the timed calls
        after, model_after = self.stats(), self.model.state()
        for key in COUNTED:
            self.seen[key] += after[key] - before[key]
            self.predicted[key] += model_after[key] - model_before[key]
        self.calls += len(self.kept)
        self.kept.clear()  # the tensors die: their blocks return to the cache
        for block in blocks:
            self.model.free(block)

    def per_call(self, counts: dict) -> dict:
        return {key: value / self.calls for key, value in counts.items()}


# --8<-- [end:paths]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = SMALL_SIZES if small else SIZES
    repeats, loop_calls = (5, 50) if small else (25, 1000)
    points = []
    for size in sizes:
        paths = {"cached": AllocationPath(size, dev, cached=True), "uncached": AllocationPath(size, dev, cached=False)}
        variants = {"floor": (lambda: None, contextlib.nullcontext)}  # the two synchronisations around a call
        variants |= {name: (path.alloc, path.prepared) for name, path in paths.items()}
        timed = host_us_each(variants, calls=1, repeats=repeats, warmup=1)
        rounded = round_size(size)
        segment = allocation_size(rounded)
        split = should_split(pool_of(rounded), segment - rounded)  # a new segment's rest: cut off, or kept
        points.append(
            {
                "size_bytes": size,
                "pool": pool_of(rounded),
                "rounded_bytes": rounded,  # the model's rules: round_size, get_allocation_size, should_split
                "segment_bytes": segment,
                "block_bytes": rounded if split else segment,
                "host_us": timed,
                "per_call": {name: path.per_call(path.seen) for name, path in paths.items()},
                "per_call_model": {name: path.per_call(path.predicted) for name, path in paths.items()},
            }
        )
        del paths, variants
    torch.cuda.empty_cache()

    # --8<-- [start:steady]
    loop = {"no_allocation": lambda: torch.empty(0, dtype=torch.uint8, device=dev)}
    loop |= {f"{size}": lambda size=size: torch.empty(size, dtype=torch.uint8, device=dev) for size in sizes}
    steady = host_us_each({k: (f, contextlib.nullcontext) for k, f in loop.items()}, loop_calls, repeats, warmup=10)
    # --8<-- [end:steady]
    for point in points:
        point["alloc_free_us"] = steady[f"{point['size_bytes']}"]
    return {
        "repetitions": repeats,
        "device": dev,
        "allocator": "torch.cuda caching allocator" if dev == "cuda" else "CPU allocator; per_call from the model",
        "calls_per_loop_repetition": loop_calls,
        "no_allocation_us": steady["no_allocation"],
        "constants": CONSTANTS,  # c10/core/AllocatorConfig.h in torch 2.11, as _allocator_model.py quotes them
        "points": points,
        "notes": [
            "host_us: one torch.empty per sample, between two device synchronisations; floor times the same "
            "interval with no call in it, in the same rounds",
            "per_call: memory_stats deltas per timed call (num_device_alloc counts cudaMalloc calls); "
            "per_call_model: the same numbers from _allocator_model.py",
            "alloc_free_us: back-to-back torch.empty calls, each tensor freed at once (served from the cache)",
        ]
        + ([] if dev == "cuda" else ["no GPU: torch.empty on the CPU allocator; per_call is the model's"]),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.empty host us per call on {device_name()} ({r['allocator']})")
    print(
        f"{'bytes':>11} {'pool':>6} {'segment':>10} {'floor':>7} {'cached':>7} {'uncached':>9} {'cudaMallocs':>11}",
        end="",
    )
    print(f" {'loop':>6}")
    for p in r["points"]:
        t = {k: s["median"] for k, s in p["host_us"].items()}
        mallocs = p["per_call"]["uncached"]["num_device_alloc"]
        print(
            f"{p['size_bytes']:>11} {p['pool']:>6} {p['segment_bytes']:>10} {t['floor']:7.1f} {t['cached']:7.1f}",
            end="",
        )
        print(f" {t['uncached']:9.1f} {mallocs:11.2f} {p['alloc_free_us']['median']:6.2f}")
    print(f"torch.empty(0): {r['no_allocation_us']['median']:.2f} us")
