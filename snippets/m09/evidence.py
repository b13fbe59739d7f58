"""The evidence behind the per-kernel figure: a torch.profiler trace of the same chain of in-place adds
as chain.py (x.add_(1), 100 of them on a tensor of 256 floats), launched from Python ("eager") and
replayed from the CUDA graph captured from it ("graph replay"), a few calls of each under a label of
its name, to open in ui.perfetto.dev. On the GPU's row the eager kernels stand apart, each waiting for
the host to launch it; the replayed ones follow each other, all issued by one cudaGraphLaunch.

CPU stand-in: no CUDA graphs on a CPU; the "graph" is chain.py's stand-in (constraints.StandInGraph),
which reruns the chain and copies its result, so the trace shows host-side operators only, at the
small size. Timed: each profiled call of both, host clock."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from chain import captured, chain
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m09/evidence"  # every file this snippet writes starts with m09-evidence-
KERNELS = 100  # adds per chain: one of chain.py's lengths
GPU_ROW = ", with the kernels on the GPU's row: the eager ones apart, each waiting on the host; the replayed ones close"
NUMEL = 256  # chain.py's "tiny" tensor: the kernel's own time is the GPU's floor


# --8<-- [start:trace]
def profiled_calls(dev: str, calls: int):
    """torch.profiler over `calls` eager calls of the chain, then `calls` replays of its graph,
    each call under a label. Returns the profiler and each call's host microseconds per variant."""
    x = torch.zeros(NUMEL, device=dev)
    graph, _, _ = captured(chain, x, KERNELS)
    variants = {"eager": lambda: chain(x, KERNELS), "graph replay": graph.replay}
    for fn in variants.values():  # warm-up, outside the trace
        fn()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    host_us = {name: [] for name in variants}
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for name, fn in variants.items():
            for i in range(calls):
                start = time.perf_counter()
                with record_function(f"{name} {i + 1}"):
                    fn()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                host_us[name].append((time.perf_counter() - start) * 1e6)
    return prof, host_us


# --8<-- [end:trace]


def write_trace(prof, path) -> None:
    """export_chrome_trace to a temporary file, then gzip it to `path`."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as src:
            trace = src.read()
    finally:
        os.unlink(tmp)
    json.loads(trace)  # the profiler wrote a complete JSON document
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(trace)


def measure(small: bool = False) -> dict:
    calls = 2 if small else 3
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    prof, host_us = profiled_calls(dev, calls)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    graph = "a CUDA graph's replay" if dev == "cuda" else "the CPU stand-in for a graph (a rerun and a copy)"
    return {
        "repetitions": calls,
        "device": dev,
        "kernels_per_call": KERNELS,
        "numel": NUMEL,
        # host time of one profiled call (the profiler's own cost included), per variant
        "profiled_call_us": {name: summarize(v, "us", clock="host") for name, v in host_us.items()},
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{calls} calls of a chain of {KERNELS} in-place adds launched from Python, then {calls} of "
                    f"{graph}, each call under a label" + (GPU_ROW if dev == "cuda" else "")
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of a chain of {r['kernels_per_call']} x.add_(1) on {device_name()}")
    for name, s in r["profiled_call_us"].items():
        print(f"  {name:<13} one profiled call {s['median']:.0f} us (min {s['min']:.0f}, max {s['max']:.0f})")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
