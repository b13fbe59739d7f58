"""The evidence behind the routes figure: a torch.profiler trace of one MoE layer's experts, the
routing given, run each way the figure compares, a few calls each, every call under a label of its
name: the loop over experts (its host sync, then a few small kernels per expert), the padded bmm,
sort-permute with torch._grouped_mm and with the course's Triton grouped GEMM, and the dense
yardstick. The Qwen-like shape (128 experts, top-8) at 4,096 tokens, bf16, built by routes.py's own
setup and variants; on the CPU, the tiny shape at 96 tokens in float16, the Triton kernel in the
interpreter. Open the trace in ui.perfetto.dev or chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from _moe import SHAPES, SMALL_SHAPES, SMALL_TOKENS
from routes import ROUTES, setup, variants
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m11/evidence"  # every file this snippet writes starts with m11-evidence-
SHAPE, TOKENS = "qwen3", 4096  # the short answer's point: many small experts, a prefill chunk
TRACED = ["dense", *ROUTES]  # the figure's yardstick and its four ways


def sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


# --8<-- [start:trace]
def profiled_calls(calls: dict, dev: str, steps: int):
    """torch.profiler over `steps` steps; a step runs each call once under a label of its name,
    the device synchronized at its end (so a label's kernels run inside it). Returns the profiler
    and each label's host microseconds per call."""
    for fn in calls.values():  # warm-up, outside the trace (the Triton kernel tunes here)
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
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float16)
    shape, tokens = (SMALL_SHAPES[SHAPE], SMALL_TOKENS) if small else (SHAPES[SHAPE], TOKENS)
    steps = 2 if small else 3
    layer, x, ids, weights, capacity = setup(SHAPE, shape, tokens, dev, dtype)
    every = variants(x, ids, weights, layer, capacity)
    calls = {name: every[name] for name in TRACED}
    with torch.no_grad():
        prof, host_us = profiled_calls(calls, dev, steps)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    return {
        "repetitions": steps,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": SHAPE,
        "layer": shape,
        "tokens": tokens,
        "labels": TRACED,
        # host time of one profiled call, device synchronized at its end: the profiler's own cost included
        "profiled_call_us": {name: summarize(t, "us", clock="host") for name, t in host_us.items()},
        **({"kernels": per_label(prof, TRACED)} if cuda else {}),
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} calls each of one MoE layer's experts ({shape['experts']} experts, top-{shape['top_k']}, "
                    f"{tokens:,} tokens) run as the loop over experts, the padded bmm, torch._grouped_mm and the "
                    "Triton grouped GEMM, and of the dense yardstick, each call under a label of its name"
                    + (
                        ": the loop's host sync and its few small kernels per expert against the grouped "
                        "routes' few kernels, on the GPU's row"
                        if cuda
                        else ""
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of the MoE experts, {r['shape']}-like, {r['tokens']} tokens, on {device_name()}")
    for name in r["labels"]:
        s = r["profiled_call_us"][name]
        line = f"  {name:>15}: one profiled call {s['median']:9.0f} us (host)"
        if "kernels" in r:
            count, busy = (r["kernels"][name][f]["median"] for f in ("kernels_per_call", "kernel_us_per_call"))
            line += f", {count:4.0f} kernels, {busy:7.0f} us in them"
        print(line)
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
