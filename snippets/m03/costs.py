"""What torch.compile's modes cost besides run time, for the model of modes.py: the cold compile
of each mode at one token and at 4,096; the memory that reduce-overhead's CUDA graph pool keeps;
one recorded CUDA graph per distinct shape even with symbolic shapes, and the warning past
`triton.cudagraph_dynamic_shape_warn_limit`; and a graph that mutates its input, which
reduce-overhead runs without CUDA graphs."""

import contextlib
import logging
import time

import torch
from modes import BLOCKS, Block  # the same model as modes.py
from torch import nn
from torch._dynamo.utils import counters
from torch._inductor.utils import fresh_cache

from coursekit.bench import device_name, summarize

PROCESSES = 1  # compile times are one cold compile each; memory and counts do not vary between runs
MODES = ["default", "reduce-overhead", "max-autotune-no-cudagraphs"]
CUDA_ONLY = ["reduce-overhead", "max-autotune-no-cudagraphs"]


# --8<-- [start:cold]
def cold_compile_s(model, x, mode: str) -> float:
    """Seconds for the first call of a new torch.compile of model, every on-disk cache empty."""
    torch._dynamo.reset()  # forget compiled code in this process too
    with fresh_cache():  # Inductor's and Triton's caches in a new, empty folder
        run = torch.compile(model, mode=mode, dynamic=False)
        start = time.perf_counter()
        run(x)
        if x.is_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start


# --8<-- [end:cold]


# --8<-- [start:pool]
def reserved_by(model, x, mode: str) -> int:
    """Bytes the caching allocator holds after three calls of model compiled in mode, above what
    it held before (with reduce-overhead: the recorded graph's private memory pool)."""
    torch._dynamo.reset()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    run = torch.compile(model, mode=mode, dynamic=False)
    for _ in range(3):  # reduce-overhead: a warm-up, then the recording, then a replay
        out = run(x)
    torch.cuda.synchronize()
    held = torch.cuda.memory_reserved() - before
    del out, run
    torch._dynamo.reset()  # releases the graph and its pool
    return held


# --8<-- [end:pool]


# --8<-- [start:shapes]
class Messages(logging.Handler):
    """Keeps what torch's "cudagraphs" logs say while it is installed (a context manager)."""

    LOGGERS = [f"torch._inductor.{m}.__cudagraphs" for m in ("cudagraph_trees", "cudagraph_utils")]

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())

    def __enter__(self):
        import torch._inductor.cudagraph_trees  # noqa: F401  (creates the loggers, registered with torch._logging)

        torch._logging.set_logs(cudagraphs=True)  # as TORCH_LOGS=cudagraphs
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc):
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)
        torch._logging.set_logs()


def recordings_per_shape(model, d: int, sizes: list[int]) -> dict:
    """Call reduce-overhead with dynamic=True on len(sizes) distinct token counts: how many CUDA
    graphs it records, and whether it warns."""
    torch._dynamo.reset()
    run = torch.compile(model, mode="reduce-overhead", dynamic=True)
    with Messages() as messages:
        for tokens in sizes:
            x = torch.randn(tokens, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                run(x)
        torch.cuda.synchronize()
    torch._dynamo.reset()
    recorded = [m for m in messages.seen if m.startswith("Recording cudagraph tree for")]
    warned = [m for m in messages.seen if "distinct sizes" in m]
    return {
        "sizes": len(sizes),
        "graphs_recorded": len(recorded),
        "warned": bool(warned),
        "warning": warned[0] if warned else "",
        "warn_limit": torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit,
    }


# --8<-- [end:shapes]


# --8<-- [start:mutation]
def add_one_then_matmul(x, w):
    x.add_(1)  # mutates an input of the graph
    return x @ w


def mutation_skip(d: int) -> dict:
    """reduce-overhead on a function that mutates its input: does it still use a CUDA graph?"""
    torch._dynamo.reset()
    counters.clear()
    x, w = (torch.randn(d, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    run = torch.compile(add_one_then_matmul, mode="reduce-overhead")
    with Messages() as messages:
        for _ in range(3):
            run(x, w)
        torch.cuda.synchronize()
    torch._dynamo.reset()
    skipped = [m for m in messages.seen if m.startswith("skipping cudagraphs")]
    return {"cudagraph_skips": counters["inductor"]["cudagraph_skips"], "message": skipped[0] if skipped else ""}


# --8<-- [end:mutation]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    d = 256 if small else 1024
    token_counts = [1] if small else [1, 4096]
    modes = MODES if cuda else [m for m in MODES if m not in CUDA_ONLY]
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(BLOCKS)]).to(dev, dtype).eval()
    out = {"repetitions": 1, "d_model": d, "blocks": BLOCKS, "dtype": str(dtype).removeprefix("torch."), "points": []}
    with torch.no_grad():
        # The process's first compile also pays the compiler's start-up: pay it here, untimed.
        warm = contextlib.nullcontext() if small else fresh_cache()  # a cold CPU cache probes ISAs for ~16 s
        with warm:
            torch.compile(nn.Linear(8, 8).to(dev, dtype))(torch.randn(2, 8, device=dev, dtype=dtype))
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            point = {"tokens": tokens, "first_call_s": {}}
            for mode in modes:
                if small:  # no fresh cache on a CPU (see above): the small run only exercises the code
                    torch._dynamo.reset()
                    start = time.perf_counter()
                    torch.compile(model, mode=mode, dynamic=False)(x)
                    seconds = time.perf_counter() - start
                else:
                    seconds = cold_compile_s(model, x, mode)
                point["first_call_s"][mode] = summarize([seconds], "s", "host")  # one sample: one cold compile
            if cuda:
                point["reserved_bytes"] = {m: reserved_by(model, x, m) for m in ("default", "reduce-overhead")}
                point["input_bytes"] = x.numel() * x.element_size()
            out["points"].append(point)
        if cuda:
            out["shapes"] = recordings_per_shape(model, d, [8 * (i + 1) for i in range(10)])
            out["mutation"] = mutation_skip(d)
    out["notes"] = (
        []
        if cuda
        else [f"{m}: skipped, it needs CUDA" for m in CUDA_ONLY]
        + ["compiles on a CPU are warm (a cold CPU cache probes ISAs for ~16 s); no CUDA graphs on a CPU"]
    )
    return out


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['blocks']} MLP blocks, d={r['d_model']}, {r['dtype']}, on {device_name()}")
    for p in r["points"]:
        cold = ", ".join(f"{m} {s['median']:.1f} s" for m, s in p["first_call_s"].items())
        print(f"  {p['tokens']:>5} tokens: first call (cold compile) {cold}")
        if "reserved_bytes" in p:
            held = ", ".join(f"{m} {b / 2**20:.1f} MiB" for m, b in p["reserved_bytes"].items())
            print(f"               memory held after three calls: {held}")
    if "shapes" in r:
        s = r["shapes"]
        print(f"  dynamic=True, {s['sizes']} sizes: {s['graphs_recorded']} CUDA graphs recorded, warned: {s['warned']}")
        m = r["mutation"]
        print(f"  an input mutated in the graph: cudagraph skips {m['cudagraph_skips']}: {m['message'][:80]}")
    for note in r["notes"]:
        print("note:", note)
