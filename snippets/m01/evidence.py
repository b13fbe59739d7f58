"""The evidence behind the step-time figure: a torch.profiler trace of the small training step
run three ways (eager PyTorch, torch.compile, jax.jit), the same steps train_step.py times, one
labelled block per way, to open in ui.perfetto.dev or chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import jax
import torch
from torch.profiler import ProfilerActivity, profile, record_function
from train_step import runners

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m01/evidence"  # every file this snippet writes starts with m01-evidence-


# --8<-- [start:trace]
def profiled_steps(hidden: int, batch: int, dev: str, steps: int):
    """torch.profiler over `steps` training steps of each way of train_step.py, each way's steps
    under a label of its name (every step waits for its device, as the timed steps do).
    Returns the profiler and each step's host microseconds, by way."""
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    jax_dev = jax.devices("gpu" if dev == "cuda" else "cpu")[0]
    runs = runners(hidden, batch, dev, dtype, jax_dev)
    for run in runs.values():  # compile and warm up, outside the trace
        for _ in range(5):
            run()
    activities = [ProfilerActivity.CPU]
    if dev == "cuda":
        activities.append(ProfilerActivity.CUDA)  # CUPTI records XLA's kernels too
    step_us = {name: [] for name in runs}
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for name, run in runs.items():
            with record_function(name):
                for _ in range(steps):
                    start = time.perf_counter()
                    with record_function("one_training_step"):
                        run()
                    step_us[name].append((time.perf_counter() - start) * 1e6)
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
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    # train_step.py's small_mlp, the size where the host sets the pace
    hidden, batch = (64, 16) if small else (1024, 256)
    steps = 2 if small else 3
    prof, step_us = profiled_steps(hidden, batch, dev, steps)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    return {
        "repetitions": steps,
        "device": dev,
        "hidden": hidden,
        "batch": batch,
        "variants": list(step_us),
        # host time of one profiled step, waiting for the device: the profiler's own cost included
        "profiled_step_us": {name: summarize(us, "us", clock="host") for name, us in step_us.items()},
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} small training steps (hidden {hidden}, batch {batch}) each of eager, torch.compile "
                    "and jax.jit, each way's steps under a label of its name and each step under one_training_step"
                    + (
                        "; on the GPU's rows, eager's many short kernels with gaps between them against the "
                        "compiled steps' fewer kernels"
                        if dev == "cuda"
                        else ""
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(
        f"torch.profiler trace of the small training step (hidden {r['hidden']}, batch {r['batch']}) on {device_name()}"
    )
    for name, s in r["profiled_step_us"].items():
        print(f"  {name:<14} {r['repetitions']} profiled steps, median {s['median']:.0f} us (profiler included)")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
