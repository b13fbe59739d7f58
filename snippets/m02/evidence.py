"""The evidence behind the host-overhead figure: a torch.profiler trace of the same tiny adds,
one labelled block per layer of the stack, to open in ui.perfetto.dev or chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from host_overhead import NUMEL, variants
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m02/evidence"  # every file this snippet writes starts with m02-evidence-


# --8<-- [start:trace]
def profiled_steps(dev: str, calls: int, steps: int):
    """torch.profiler over `steps` steps; a step runs `calls` adds of
    each variant of host_overhead.py, each under a label of its name.
    Returns the profiler and each step's host microseconds."""
    fns = variants(dev)
    for fn, mode in fns.values():  # warm-up, outside the trace
        with mode():
            fn()
    activities = [ProfilerActivity.CPU]
    if dev == "cuda":
        activities.append(ProfilerActivity.CUDA)
    step_us = []
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for _ in range(steps):
            start = time.perf_counter()
            for name, (fn, mode) in fns.items():
                with record_function(name), mode():
                    for _ in range(calls):
                        fn()
            if dev == "cuda":
                torch.cuda.synchronize()
            step_us.append((time.perf_counter() - start) * 1e6)
    return prof, step_us


# --8<-- [end:trace]


def write_trace(prof, path) -> None:
    """export_chrome_trace to a temporary file, then gzip it to `path`
    (Perfetto and chrome://tracing open the .json.gz as it is)."""
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
    calls, steps = (10, 2) if small else (20, 3)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    prof, step_us = profiled_steps(dev, calls, steps)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    return {
        "repetitions": steps,
        "calls_per_variant": calls,
        "numel": NUMEL,
        "device": dev,
        "variants": list(variants(dev)),
        # host time of one profiled step (every variant's adds): the profiler's own cost included
        "profiled_step_us": summarize(step_us, "us", clock="host"),
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} steps of {calls} tiny torch.add calls per layer of the stack, "
                    "each layer's calls under a label of its name"
                    + (", with each add's kernel on the GPU's row" if dev == "cuda" else "")
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of {r['numel']}-float torch.add calls on {device_name()}")
    print(f"  {r['repetitions']} steps of {r['calls_per_variant']} calls per variant: {', '.join(r['variants'])}")
    s = r["profiled_step_us"]
    print(f"  one profiled step {s['median']:.0f} us (p10 {s['p10']:.0f}, p90 {s['p90']:.0f})")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
