"""The evidence behind the decode-variants figure: a torch.profiler trace of the module's decode step
at batch 16, a few steps of each variant the figure times, every step under a label of its name:
eager (about a hundred and fifty short kernels with the GPU idle between them), torch.compile's
default mode (fewer, fused kernels, one per layer growing with the whole KV cache),
mode="reduce-overhead", the eager step captured in a CUDA graph, and the compiled step captured.
The variants and the step are decode_step.py's own. On the CPU: the small model at batch 1, eager
and torch.compile(backend="eager") only (no CUDA graphs). Open the trace in ui.perfetto.dev or
chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from _model import CPU, GPU, build
from decode_step import step, variants
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m13/evidence"  # every file this snippet writes starts with m13-evidence-
BATCH = 16  # where the compiled step's cache-sized kernel outweighs the launches it saves


def sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


# --8<-- [start:trace]
def profiled_calls(calls: dict, dev: str, steps: int):
    """torch.profiler over `steps` steps; a step runs each call once under a label of its name,
    the device synchronized at its end (so a label's kernels run inside it). Returns the profiler
    and each label's host microseconds per call."""
    for fn in calls.values():  # warm-up, outside the trace
        fn()
    sync(dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    host_us = {name: [] for name in calls}
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for _ in range(steps):
            for name, fn in calls.items():
                start = time.perf_counter()
                with record_function(name):
                    fn()
                    sync(dev)
                host_us[name].append((time.perf_counter() - start) * 1e6)
    return prof, host_us


# --8<-- [end:trace]


def per_label(prof, names) -> dict:
    """For each label: the device kernels (and copies) that ran inside one call, their number and
    summed microseconds. Found by time: a call ends with the device synchronized, so a kernel that
    starts while its label is open is its own (graph replays and Triton launches too)."""
    events = prof.events()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
    kernels = [k for k in kernels if k.name not in names]  # the labels' own rows on the GPU's timeline
    out = {}
    for name in names:
        calls = [
            [k for k in kernels if e.time_range.start <= k.time_range.start < e.time_range.end]
            for e in events
            if e.name == name and e.device_type == DeviceType.CPU
        ]
        out[name] = {
            "kernels_per_call": summarize([len(ks) for ks in calls], "kernels"),
            "kernel_us_per_call": summarize(
                [sum(k.time_range.elapsed_us() for k in ks) for ks in calls], "us", clock="device"
            ),
        }
    return out


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
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg, batch = (GPU, BATCH) if cuda and not small else (CPU, 1)
    steps = 3 if cuda else 2
    if not cuda:
        torch.set_num_threads(1)  # as decode_step.py on a CPU
    model = build(cfg, dev, dtype).eval()
    with torch.no_grad():
        model.setup_cache(batch)
        token = torch.zeros(batch, 1, dtype=torch.long, device=dev)
        pos = torch.zeros(1, dtype=torch.long, device=dev)
        runs, first_call_s = variants(model, token, pos, cuda)  # compiles here, outside the trace
        calls = {name: (lambda r=run: step(r, token, pos, cfg.max_len)) for name, run in runs.items()}
        prof, host_us = profiled_calls(calls, dev, steps)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    torch._dynamo.reset()
    return {
        "repetitions": steps,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "config": dict(cfg.__dict__),
        "batch": batch,
        "labels": list(calls),
        "first_call_s": first_call_s,
        # host time of one profiled step, device synchronized at its end: the profiler's own cost included
        "profiled_step_us": {name: summarize(t, "us", clock="host") for name, t in host_us.items()},
        **({"kernels": per_label(prof, calls)} if cuda else {}),
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} decode steps at batch {batch} of each variant ({', '.join(calls)}), each step "
                    "under a label of its name"
                    + (
                        ": the eager step's launches and the GPU's idle gaps, the compiled step's fused kernels, "
                        "and the captured steps replayed as one launch"
                        if cuda
                        else ""
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    c = r["config"]
    print(
        f"torch.profiler trace of the decode step, {c['layers']} layers, d {c['d']}, batch {r['batch']}, {r['dtype']},"
    )
    print(f"  on {device_name()}")
    for name in r["labels"]:
        s = r["profiled_step_us"][name]
        line = f"  {name:>16}: one profiled step {s['median']:9.0f} us (host)"
        if "kernels" in r:
            count, busy = (r["kernels"][name][f]["median"] for f in ("kernels_per_call", "kernel_us_per_call"))
            line += f", {count:4.0f} kernels, {busy:7.1f} us in them"
        print(line)
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
