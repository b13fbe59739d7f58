"""The evidence behind the batch-sweep figure: a torch.profiler trace of the course's top-k against
torch.topk at batch 64 (float32 logits [64, 262,144], k = 50), with torch.sort and a copy of the
logits as the figure has them, a few calls each, every call under a label of its name. Each variant
runs twice: called from Python (every launch on the host's row: our plan's two launches against
torch.topk's several) and replayed from one CUDA graph, as the figure times it (race.graphed). On
the CPU: Triton's interpreter, [2, 600] logits, no graphs. Open the trace in ui.perfetto.dev or
chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from _topk import plan, topk  # the course's kernel (_topk.py)
from race import SMALL, VOCAB, K, graphed
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m12/evidence"  # every file this snippet writes starts with m12-evidence-
BATCH = 64  # a serving batch: the figure's middle target
SMALL_BATCH = 2


def labelled(logits, k: int, cuda: bool) -> dict:
    """label -> one call: each variant of the figure called eagerly, then (on a GPU) replayed."""
    copy = torch.empty_like(logits)
    eager = {
        "ours": lambda: topk(logits, k),
        "torch_topk": lambda: torch.topk(logits, k),
        "torch_sort": lambda: torch.sort(logits, dim=-1, descending=True),
        "copy": lambda: copy.copy_(logits),
    }
    replayed = {f"{name}_graph_replay": graphed(fn) for name, fn in eager.items()} if cuda else {}
    return eager | replayed


def sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


# --8<-- [start:trace]
def profiled_calls(calls: dict, dev: str, steps: int):
    """torch.profiler over `steps` steps; a step runs each call once under a label of its name,
    the device synchronized at its end (so a label's kernels run inside it). Returns the profiler
    and each label's host microseconds per call."""
    for fn in calls.values():  # warm-up, outside the trace (Triton compiles here)
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
    dev = "cuda" if cuda else "cpu"
    batch, vocab = (SMALL_BATCH, SMALL["vocab"]) if small else (BATCH, VOCAB)
    steps = 2 if small else 3
    torch.manual_seed(0)
    logits = torch.randn(batch, vocab, device=dev)  # random, never zeros, as race.py's
    values, indices = topk(logits, K)
    calls = labelled(logits, K, cuda)
    prof, host_us = profiled_calls(calls, dev, steps)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    launches = plan(batch, vocab, K)
    launch_words = f"{len(launches)} launch" + ("es" if len(launches) > 1 else "")
    return {
        "repetitions": steps,
        "device": dev,
        "batch": batch,
        "vocab": vocab,
        "k": K,
        "dtype": "float32",
        "plan": launches,
        "values_match": bool(torch.equal(values, torch.topk(logits, K)[0])),
        "labels": list(calls),
        # host time of one profiled call, device synchronized at its end: the profiler's own cost included
        "profiled_call_us": {name: summarize(t, "us", clock="host") for name, t in host_us.items()},
        **({"kernels": per_label(prof, calls)} if cuda else {}),
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} calls each of the course's top-k ({launch_words}), torch.topk, torch.sort and a copy of "
                    f"the logits on [{batch}, {vocab:,}] float32 logits, k = {K}, each call under a label of its name"
                    + (
                        ", called from Python and replayed from a CUDA graph (labels ending _graph_replay)"
                        if cuda
                        else ""
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of top-k, [{r['batch']}, {r['vocab']}] float32, k = {r['k']}, on {device_name()}")
    print(f"  the course's kernel: {len(r['plan'])} launches; its values equal torch.topk's: {r['values_match']}")
    for name in r["labels"]:
        s = r["profiled_call_us"][name]
        line = f"  {name:>22}: one profiled call {s['median']:9.0f} us (host)"
        if "kernels" in r:
            count, busy = (r["kernels"][name][f]["median"] for f in ("kernels_per_call", "kernel_us_per_call"))
            line += f", {count:3.0f} kernels, {busy:7.1f} us in them"
        print(line)
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
