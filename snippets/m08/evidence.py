"""The evidence behind the allocator-timeline figure: the same small training run as timeline.py (an
MLP of two blocks, d=1024, float32, built on the GPU, two AdamW steps on 256 tokens, then
torch.cuda.empty_cache()), recorded by the allocator's history with Python stack traces
(torch.cuda.memory._record_memory_history) and dumped as a memory snapshot, the pickle that
pytorch.org/memory_viz draws: every allocation and free in order, the segments reserved, and the line
of Python that asked for each block. Each phase runs under a profiler label of its name
(record_function), which the history records beside the events (global_record_annotations). The
snapshot is kept under 2 MB: where the pickle would be larger, each event keeps only its two
innermost stack frames and those outside torch's own files (the data says so).

CPU stand-in: there is no CUDA snapshot on a CPU; the run (d=64, 16 tokens) is profiled instead with
profile_memory=True, a gzipped Chrome trace whose memory events (allocations and frees of the CPU
allocator, which caches nothing) open in ui.perfetto.dev. On a GPU the run is also profiled that way,
after the snapshot (with CUDA activity too): the phases' labels, each kernel and each cudaMalloc on the
GPU's and the host's rows, and the CUDA caching allocator's allocations and frees as memory events.
Timed: each training step, host clock."""

# --8<-- [start:imports]
import gzip
import json
import os
import pickle
import tempfile
import time

import torch
from timeline import mlp, train_step
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the snapshot is evidence to read, not a timing: one process

KEY = "m08/evidence"  # every file this snippet writes starts with m08-evidence-
MAX_ENTRIES = 5000  # the history's ring buffer: the run records far fewer, so nothing is dropped
MAX_BYTES = 1_800_000  # the snapshot's budget, under the 2 MB a reader downloads
KEEP_FRAMES = 8  # where the snapshot is over budget: the frames each event keeps (fewer_frames)


# --8<-- [start:run]
def training_run(dev: str, d: int, tokens: int) -> list:
    """timeline.py's run, each phase under a label: build, two steps, empty_cache. Returns the
    host microseconds of each training step."""
    torch.manual_seed(0)
    phase = lambda name: record_function(name)
    with phase("init"):
        model = mlp(d).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(tokens, d, device=dev)
    step_us = []
    for step in (1, 2):
        start = time.perf_counter()
        train_step(model, opt, x, lambda name, step=step: phase(f"step {step} {name}"))
        if dev == "cuda":
            torch.cuda.synchronize()
        step_us.append((time.perf_counter() - start) * 1e6)
    with phase("empty_cache"):
        torch.cuda.empty_cache()  # the cached segments that hold no live block go back to the driver
    return step_us


def fewer_frames(frames: list) -> list:
    """A stack cut down: the innermost frames (first in the list) and those outside torch's own files
    (the model's and this run's lines), at most KEEP_FRAMES."""
    kept = [f for i, f in enumerate(frames) if i < 2 or "/torch/" not in str(f.get("filename", ""))]
    return kept[:KEEP_FRAMES]


def cuda_snapshot(path, d: int, tokens: int) -> dict:
    """The run under the allocator's history, with Python stacks, dumped as a snapshot pickle."""
    torch.cuda.init()  # the allocator exists once CUDA is initialised: only then can it record
    torch.cuda.memory._record_memory_history(
        "all", context="all", stacks="python", max_entries=MAX_ENTRIES, global_record_annotations=True
    )  # global_record_annotations: the record_function labels go into the snapshot too
    step_us = training_run("cuda", d, tokens)
    snapshot = torch.cuda.memory._snapshot()  # what torch.cuda.memory._dump_snapshot pickles
    torch.cuda.memory._record_memory_history(None)
    blob, trimmed = pickle.dumps(snapshot), False
    if len(blob) > MAX_BYTES:  # over budget: fewer frames per event
        for trace in snapshot["device_traces"]:
            for event in trace:
                event["frames"] = fewer_frames(event.get("frames", []))
        for segment in snapshot["segments"]:
            for block in segment.get("blocks", []):
                if "frames" in block:
                    block["frames"] = fewer_frames(block["frames"])
        blob, trimmed = pickle.dumps(snapshot), True
    path.write_bytes(blob)
    events = snapshot["device_traces"][torch.cuda.current_device()]
    return {
        "step_us": step_us,
        "events": len(events),
        "segments_at_end": len(snapshot["segments"]),
        "frames_trimmed": trimmed,  # True: each event kept at most KEEP_FRAMES frames (fewer_frames)
    }


# --8<-- [end:run]


def profiled_run(path, dev: str, d: int, tokens: int) -> dict:
    """The run under the profiler with profile_memory, a gzipped Chrome trace (the CPU's stand-in for
    the snapshot; on a GPU, beside it, with the kernels and the CUDA runtime's calls too)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    if dev == "cpu":
        torch.set_num_threads(1)  # ops this small only lose to an OpenMP pool's hand-offs
    with profile(activities=activities, profile_memory=True) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        step_us = training_run(dev, d, tokens)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as src:
            trace = src.read()
    finally:
        os.unlink(tmp)
    events = json.loads(trace)["traceEvents"]
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(trace)
    return {"step_us": step_us, "events": sum(e.get("name") == "[memory]" for e in events)}


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    d, tokens = (64, 16) if small else (1024, 256)
    if cuda:
        path = artifact(KEY, "memory_snapshot.pickle")
        run = cuda_snapshot(path, d, tokens)
        trace = artifact(KEY, "trace.json.gz")
        traced = profiled_run(trace, "cuda", d, tokens)  # after the snapshot: the history is off
        described = {
            "what": "memory snapshot",
            "opens_with": "pytorch.org/memory_viz",
            "shows": "every allocation, free and segment of the training run in order, with the Python stack "
            "that asked for each block and the phases' labels",
        }
    else:
        path = artifact(KEY, "memory_trace.json.gz")
        run = profiled_run(path, "cpu", d, tokens)
        described = {
            "what": "profiler trace",
            "opens_with": "ui.perfetto.dev or chrome://tracing",
            "shows": "the training run on the CPU, each phase under a label of its name, with the CPU "
            "allocator's allocations and frees as memory events (no CUDA snapshot without a GPU)",
        }
    extra, listed = {}, []
    if cuda:
        extra = {
            "trace_memory_events": traced["events"],
            # host time of each profiled training step (the profiler's own cost included)
            "profiled_step_us": summarize(traced["step_us"], "us", clock="host"),
        }
        listed = [
            {
                "name": trace.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": "the same training run again, each phase under a label of its name: the kernels on the "
                "GPU's row, the cudaMalloc calls among the host's runtime calls, and the caching allocator's "
                "allocations and frees as memory events",
            }
        ]
    return {
        "repetitions": len(run["step_us"]),
        "device": "cuda" if cuda else "cpu",
        "d_model": d,
        "tokens": tokens,
        **{k: v for k, v in run.items() if k != "step_us"},
        # host time of each recorded training step: the recording's own cost included
        "recorded_step_us": summarize(run["step_us"], "us", clock="host"),
        **extra,
        "artifacts": [{"name": path.name, **described}] + listed,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"MLP d={r['d_model']}, {r['tokens']} tokens, on {device_name()}: {r['events']} memory events recorded")
    s = r["recorded_step_us"]
    print(f"  one recorded training step {s['median']:.0f} us (min {s['min']:.0f}, max {s['max']:.0f})")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
