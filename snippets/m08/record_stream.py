"""A tensor freed on the default stream while a side stream still reads it, with and without
Tensor.record_stream. x (64 MiB of 1.0) is written on the default stream; a side stream waits for
it, spins for about 10 ms (torch.cuda._sleep), then reads it (doubled = x * 2). The host meanwhile
drops x and allocates y, of the same size, on the default stream, and fills it with 7.0. The
caching allocator only knows that x belonged to the default stream, so without record_stream it
hands x's block to y at once, y's fill runs while the side stream is still asleep, and the side
stream then reads 7.0: doubled comes out 14.0, not 2.0, every time (the sleep makes the race
deterministic). With x.record_stream(side) the allocator records an event on the side stream when
x is freed and keeps the block until that event completes, so y gets a new block: the right answer,
at the cost of one more 64 MiB segment reserved (and a cudaMalloc). The other fix,
default.wait_stream(side) before the free, keeps the block and makes y's fill wait on the GPU instead.

Every case starts from an empty cache; the facts (did y get x's block, was doubled wrong, how many
bytes were reserved after y) are kept for every case run, and the host time of each case (the
queueing, the free and the reallocation; from the call to its return, the device idle at the
start) is timed with coursekit.bench. CPU stand-in: the same sequence on the plain-Python model of
the allocator (_allocator_model.py), with the device's memory as a value per block address and the
side stream's delayed read run when the "device" is synchronised."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
# isort: split
from _allocator_model import MiB, Model

from coursekit.bench import device_name, gpu_us, host_us_rounds, summarize

PROCESSES = 1  # the facts (block reused, answer corrupted, bytes reserved) are deterministic by construction
SLEEP_CYCLES = 20_000_000  # clock cycles of torch.cuda._sleep: ~10 ms at 1.98 GHz, far more than the host needs
NUMEL = 16 * 2**20  # float32 elements: 64 MiB, a segment of its own
FIXES = ["none", "record_stream", "wait_stream"]


# --8<-- [start:case]
class Case:
    """x read on a side stream after a delay, freed on the default stream, y allocated in its place.
    run() is the timed part; checked() starts each run from an empty cache and checks it afterwards."""

    def __init__(self, fix: str):
        self.fix, self.side, self.facts = fix, torch.cuda.Stream(), []

    def run(self):
        main = torch.cuda.current_stream()
        x = torch.full((NUMEL,), 1.0, device="cuda")
        self.side.wait_stream(main)  # the side stream sees x's values...
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(SLEEP_CYCLES)  # ...but reads them only ~10 ms from now
            self.doubled = x * 2  # allocated on the side stream: 2.0 everywhere if x is intact
        if self.fix == "record_stream":
            x.record_stream(self.side)  # x's block waits for the side stream's work queued so far
        elif self.fix == "wait_stream":
            main.wait_stream(self.side)  # the default stream's later work waits for the side stream
        self.x_ptr = x.data_ptr()
        del x  # the last reference: the block is free for the default stream's next allocation
        self.y = torch.full((NUMEL,), 7.0, device="cuda")

    @contextlib.contextmanager
    def checked(self):
        torch.cuda.empty_cache()  # nothing cached: y gets x's block or a new one
        yield
        same, reserved = self.y.data_ptr() == self.x_ptr, torch.cuda.memory_reserved()
        torch.cuda.synchronize()
        values = sorted(self.doubled.unique().tolist())
        self.facts.append({"same_block": same, "reserved_bytes": reserved, "doubled_values": values})
        self.y = self.doubled = None


# --8<-- [end:case]


class ModelCase:
    """CPU stand-in: Case's sequence on the model of the allocator. Memory is a value per block address;
    the side stream's delayed read is a function run when the 'device' synchronises."""

    MAIN, SIDE = 0, 1

    def __init__(self, fix: str):
        self.fix, self.facts, self.model, self.memory = fix, [], Model(), {}

    def run(self):
        x = self.model.malloc(4 * NUMEL, self.MAIN)
        self.memory[x.addr] = 1.0
        self.doubled_block = self.model.malloc(4 * NUMEL, self.SIDE)  # doubled, on the side stream
        pending = [lambda addr=x.addr: self.memory[addr] * 2]  # the side stream's read, ~10 ms later
        if self.fix == "record_stream":
            self.model.record_stream(x, self.SIDE)
        self.x_ptr = x.addr
        self.model.free(x)
        self.y = self.model.malloc(4 * NUMEL, self.MAIN)
        if self.fix == "wait_stream":  # y's fill waits for the side stream
            self.doubled = [read() for read in pending]
        self.memory[self.y.addr] = 7.0  # otherwise the idle default stream fills y at once
        if self.fix != "wait_stream":
            self.doubled = [read() for read in pending]

    @contextlib.contextmanager
    def checked(self):
        self.model.empty_cache()
        yield
        same, reserved = self.y.addr == self.x_ptr, self.model.reserved()
        self.model.synchronize()
        self.facts.append({"same_block": same, "reserved_bytes": reserved, "doubled_values": sorted(set(self.doubled))})
        self.model.free(self.y)
        self.model.free(self.doubled_block)


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    repeats = 5 if small else 20
    cases = {fix: (Case if cuda else ModelCase)(fix) for fix in FIXES}
    sleep_us = gpu_us((lambda: torch.cuda._sleep(SLEEP_CYCLES)) if cuda else (lambda: None), rep_ms=100)
    variants = {fix: (case.run, case.checked) for fix, case in cases.items()}
    rounds = host_us_rounds(variants, calls=1, repeats=repeats, warmup=1, issue_per_round=1)
    results = []
    for fix, case in cases.items():
        facts = case.facts
        results.append(
            {
                "fix": fix,
                "cases": len(facts),
                "same_block_cases": sum(f["same_block"] for f in facts),
                "corrupted_cases": sum(f["doubled_values"] != [2.0] for f in facts),
                "doubled_values_seen": sorted({v for f in facts for v in f["doubled_values"]}),
                "reserved_bytes": max(f["reserved_bytes"] for f in facts),
                "reserved_bytes_min": min(f["reserved_bytes"] for f in facts),
                "run_us": summarize(rounds["issue_us"][fix], "us", "host", rounds=True),
                "run_and_drain_us": summarize(rounds["host_us"][fix], "us", "host", rounds=True),
            }
        )
    return {
        "repetitions": repeats,
        "device": "cuda" if cuda else "model (CPU stand-in)",
        "tensor_bytes": 4 * NUMEL,
        "sleep_cycles": SLEEP_CYCLES,
        "sleep_device_us": sleep_us,
        "fixes": results,
        "notes": [
            "every case runs from an empty cache; cases counts every run (warm-up and both kinds of sample)",
            "reserved_bytes: memory_reserved() right after y's allocation (x or y, and doubled on the side stream)",
            "run_us: host time of one case from the call to its return, the device idle at the start; "
            "run_and_drain_us adds a device synchronisation, so it includes the side stream's sleep",
        ]
        + ([] if cuda else ["no GPU: the allocator model, with memory as a value per block address"]),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"x freed while a side stream still reads it, then y allocated ({r['device']}, {device_name()})")
    print(
        f"  {'fix':<14} {'y got x block':>14} {'wrong answers':>14} {'values read':>14} {'reserved MiB':>13} {'us':>7}"
    )
    for f in r["fixes"]:
        print(
            f"  {f['fix']:<14} {f['same_block_cases']:>7}/{f['cases']:<6} {f['corrupted_cases']:>7}/{f['cases']:<6}",
            end="",
        )
        print(f" {str(f['doubled_values_seen']):>14} {f['reserved_bytes'] // MiB:>13} {f['run_us']['median']:7.1f}")
