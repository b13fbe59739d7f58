"""Compile time against graph size: the first call of torch.compile on a chain of N steps (a matmul,
a tanh and an add each), every on-disk cache empty, for three backends that stop at successive
stages: Dynamo alone (backend="eager"), Dynamo + AOTAutograd (backend="aot_eager") and the whole
default pipeline (Inductor), with the number of operations Dynamo captured."""

# --8<-- [start:imports]
import contextlib
import time

import torch
from torch._dynamo.utils import counters
from torch._inductor.utils import fresh_cache

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # each point is one cold compile (a single sample); the sizes and counts do not vary
BACKENDS = ["eager", "aot_eager", "inductor"]  # Dynamo alone; + AOTAutograd; + Inductor
STEPS = [4, 16, 64, 256]


# --8<-- [start:chain]
# --8<-- [start:chain_fn]
def chain(steps: int):
    """A function of steps matmul-tanh-add steps: Dynamo unrolls the loop
    into 3 * steps operations."""

    def run(x, w):
        for _ in range(steps):
            x = torch.tanh(x @ w) + x
        return x

    return run


# --8<-- [end:chain_fn]
def first_call_s(fn, x, w, backend: str, cold: bool = True) -> tuple[float, int]:
    """Seconds for the first call of torch.compile(fn) (Inductor's and Triton's on-disk caches empty
    when cold), and the number of operations Dynamo put in the graph."""
    torch._dynamo.reset()  # forget compiled code in this process too
    counters.clear()
    with fresh_cache() if cold else contextlib.nullcontext():
        compiled = torch.compile(fn, backend=backend, dynamic=False)
        start = time.perf_counter()
        compiled(x, w)
        if x.is_cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds, counters["stats"]["calls_captured"]


# --8<-- [end:chain]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    steps_list = [2, 4] if small else STEPS
    backends = BACKENDS if cuda else BACKENDS[:2]  # a cold Inductor CPU cache probes ISAs for ~16 s
    torch.manual_seed(0)
    x, w = torch.randn(64, 64, device=dev), torch.randn(64, 64, device=dev) / 8
    points = []
    with torch.no_grad():
        # The process's first compile with each backend also pays its imports and start-up: untimed.
        for backend in [] if small else backends:  # the small (CPU test) run only exercises the code
            first_call_s(chain(1), x, w, backend)
        for steps in steps_list:
            point = {"steps": steps, "first_call_s": {}}
            for backend in backends:
                seconds, ops = first_call_s(chain(steps), x, w, backend, cold=not small)
                point["first_call_s"][backend] = summarize([seconds], "s", "host")  # one sample: one cold compile
                point["ops"] = ops  # the same graph for every backend
            points.append(point)
    torch._dynamo.reset()
    return {
        "device": dev,
        "repetitions": 1,
        "shape": [64, 64],
        "points": points,
        "cold": not small,
        "notes": [] if cuda else ["no Inductor on a CPU, and caches left warm: a cold Inductor CPU cache probes ISAs"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    backends = list(r["points"][0]["first_call_s"])
    caches = "cold caches" if r["cold"] else "caches not emptied"
    print(f"first call of torch.compile, {caches}, on {device_name()} (seconds)")
    print(f"  {'steps':>6} {'ops':>5} " + " ".join(f"{b:>10}" for b in backends))
    for p in r["points"]:
        times = " ".join(f"{p['first_call_s'][b]['median']:10.2f}" for b in backends)
        print(f"  {p['steps']:>6} {p['ops']:>5} {times}")
    for note in r["notes"]:
        print("note:", note)
