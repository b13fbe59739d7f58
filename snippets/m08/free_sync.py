"""What giving memory back costs the host while the GPU is busy. A kernel that keeps the stream busy
for about 2 ms (torch.cuda._sleep; its device time is measured first) is queued, and right behind it
one of: torch.cuda.empty_cache() with nothing in the cache to release; empty_cache() with one free
64 MiB segment in the cache, which it returns with cudaFree; and a free then a reallocation of the
same 64 MiB, served from the cache (del x; torch.empty). Each is also timed with the GPU idle, and
the sleep kernel's launch alone is the baseline of the busy calls.

The time is the host's from the call to its return (coursekit.bench's issue samples: the device is
drained before the call, not inside the timed interval), so a call that waits for the device takes
about as long as the queued kernel has left to run; the same calls with the device drained after
them inside the interval are kept too. memory_stats around each call count the cudaFree calls
(num_device_free) and the allocator's waits on its recorded events (num_sync_all_streams).

CPU stand-in: there is no device queue, so nothing is queued (the sleep is a no-op and the "busy"
calls are the idle ones), empty_cache does nothing, and torch.empty uses the CPU allocator: the
data keep their shape, the facts on waiting are the GPU's."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
# isort: split
from _allocator_model import MiB, from_memory_stats

from coursekit.bench import device_name, gpu_us, host_us_rounds, summarize

PROCESSES = 3  # host-side timings: three fresh processes give the run-to-run spread
SLEEP_CYCLES = 4_000_000  # torch.cuda._sleep spins for this many clock cycles: about 2 ms at 1.98 GHz
SEGMENT = 64 * MiB  # past the 10 MiB at which a request gets a segment of its own size
COUNTED = ("num_device_free", "num_device_alloc", "num_sync_all_streams")


# --8<-- [start:calls]
class Calls:
    """The calls timed, each after a set-up that leaves the cache as the call needs it."""

    def __init__(self, dev: str):
        self.dev, self.kept = dev, []
        self.busy = (lambda: torch.cuda._sleep(SLEEP_CYCLES)) if dev == "cuda" else (lambda: None)

    def empty(self):  # set-up: nothing cached, nothing live
        self.kept.clear()
        torch.cuda.empty_cache()

    def one_free_segment(self):  # set-up: a 64 MiB segment in the cache, free
        self.empty()
        torch.empty(SEGMENT, dtype=torch.uint8, device=self.dev)  # allocated and freed at once

    def one_live_tensor(self):  # set-up: a 64 MiB tensor alive
        self.empty()
        self.kept.append(torch.empty(SEGMENT, dtype=torch.uint8, device=self.dev))

    def free_and_reallocate(self):  # the timed call: its block back to the cache, then taken again
        self.kept.clear()
        self.kept.append(torch.empty(SEGMENT, dtype=torch.uint8, device=self.dev))


CASES = {  # name: (the call, its set-up)
    "empty_cache, nothing cached": (lambda c: torch.cuda.empty_cache(), Calls.empty),
    "empty_cache, a free segment cached": (lambda c: torch.cuda.empty_cache(), Calls.one_free_segment),
    "free and reallocate": (Calls.free_and_reallocate, Calls.one_live_tensor),
}
# --8<-- [end:calls]


def counting(calls: Calls, setup, counts: dict):
    """A context factory: the set-up, then memory_stats before and after the timed call."""

    @contextlib.contextmanager
    def context():
        setup(calls)
        before = from_memory_stats(torch.cuda.memory_stats())
        yield
        after = from_memory_stats(torch.cuda.memory_stats())
        counts["calls"] += 1
        for key in COUNTED:
            counts[key] += after[key] - before[key]

    return context


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    repeats = 5 if small else 25
    calls = Calls(dev)
    sleep_us = gpu_us(calls.busy, rep_ms=100)  # how long the queued kernel keeps the stream busy
    variants, counts = {"sleep launch": (calls.busy, contextlib.nullcontext)}, {}
    for name, (call, setup) in CASES.items():
        for stream in ("idle", "busy"):
            counts[name, stream] = dict.fromkeys(("calls", *COUNTED), 0)
            # --8<-- [start:busy]
            if stream == "busy":
                fn = lambda call=call: (calls.busy(), call(calls))  # queued behind ~2 ms of device work
            else:
                fn = lambda call=call: call(calls)
            # --8<-- [end:busy]
            variants[f"{name} ({stream})"] = (fn, counting(calls, setup, counts[name, stream]))
    rounds = host_us_rounds(variants, calls=1, repeats=repeats, warmup=1, issue_per_round=1)
    calls.empty()

    def summary(name, kind):
        return summarize(rounds[kind][name], "us", "host", rounds=True)

    cases = []
    for (name, stream), count in counts.items():
        variant = f"{name} ({stream})"
        per_call = {key: count[key] / count["calls"] for key in COUNTED}
        cases.append(
            {"case": name, "stream": stream, "returned_us": summary(variant, "issue_us"), **per_call}
            | {"returned_and_drained_us": summary(variant, "host_us")}
        )
    return {
        "repetitions": repeats,
        "device": dev,
        "sleep_cycles": SLEEP_CYCLES,
        "segment_bytes": SEGMENT,
        "sleep_device_us": sleep_us,
        "sleep_launch_us": summary("sleep launch", "issue_us"),
        "cases": cases,
        "notes": [
            "returned_us: host time from the call to its return, the device drained before it (the busy "
            "variants include queuing the sleep kernel: compare sleep_launch_us)",
            "returned_and_drained_us: the same call followed by a device synchronisation, both timed",
            "num_device_free, num_device_alloc, num_sync_all_streams: memory_stats deltas per call",
        ]
        + ([] if dev == "cuda" else ["no GPU: no kernel queued, empty_cache does nothing, all counts are 0"]),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"host us from call to return on {device_name()}; the busy stream runs a kernel of", end="")
    print(f" {r['sleep_device_us']['median']:.0f} us (its launch alone: {r['sleep_launch_us']['median']:.1f} us)")
    print(f"  {'case':<36} {'stream':>6} {'returned':>9} {'+drain':>9} {'cudaFree':>9}")
    for c in r["cases"]:
        print(f"  {c['case']:<36} {c['stream']:>6} {c['returned_us']['median']:9.1f}", end="")
        print(f" {c['returned_and_drained_us']['median']:9.1f} {c['num_device_free']:9.2f}")
