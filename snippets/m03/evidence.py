"""The evidence behind the speed-up figure: a torch.profiler trace of the four-block model of
modes.py at one token (where the host binds) and at 4,096 (where compute does), forwards back to
back in eager mode, eager captured in a CUDA graph, and torch.compile's default and
reduce-overhead modes, one labelled block per variant and size, to open in ui.perfetto.dev or
chrome://tracing. max-autotune is left out: its cold autotune alone takes 15 s to a minute."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from modes import BLOCKS, CUDA_ONLY_MODES, Block, variants
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m03/evidence"  # every file this snippet writes starts with m03-evidence-
TRACED_MODES = ["eager", "eager-cudagraph", "default", "reduce-overhead"]


# --8<-- [start:trace]
def profiled_forwards(d: int, token_counts, dev: str, calls: int):
    """torch.profiler over `calls` forwards back to back of each variant at each size, under a
    label "<mode>, <tokens> tokens"; the variants are compiled and warm before the trace starts.
    Returns the profiler and each label's host microseconds per forward."""
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    modes = [m for m in TRACED_MODES if dev == "cuda" or m not in CUDA_ONLY_MODES]
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(BLOCKS)]).to(dev, dtype).eval()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    runs = {}
    with torch.no_grad():
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            # compiles and warms up each: a static graph per size (dynamic=False), both kept, so that
            # nothing compiles inside the trace
            for mode, run in variants(model, x, modes).items():
                runs[f"{mode}, {tokens} token{'s' if tokens > 1 else ''}"] = run
        activities = [ProfilerActivity.CPU]
        if dev == "cuda":
            activities.append(ProfilerActivity.CUDA)
        per_forward_us = {}
        sync()
        with profile(activities=activities) as prof:
            prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
            for label, run in runs.items():
                start = time.perf_counter()
                with record_function(label):
                    for _ in range(calls):
                        run()
                    sync()
                per_forward_us[label] = (time.perf_counter() - start) * 1e6 / calls
    return prof, per_forward_us, modes


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
    if dev == "cpu":
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    d, token_counts = (256, (1, 16)) if small else (1024, (1, 4096))  # modes.py's width; its end sizes
    calls = 3
    prof, per_forward_us, modes = profiled_forwards(d, token_counts, dev, calls)
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    return {
        "repetitions": calls,
        "device": dev,
        "d_model": d,
        "blocks": BLOCKS,
        "tokens": list(token_counts),
        "modes": modes,
        # host time per forward inside the trace: the profiler's own cost included
        "profiled_forward_us": summarize(list(per_forward_us.values()), "us", clock="host"),
        "per_label_us": per_forward_us,
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{calls} forwards back to back of the {BLOCKS}-block model for each of "
                    f"{', '.join(modes)}, at {' and '.join(map(str, token_counts))} tokens, each under a label "
                    "naming variant and size"
                    + (
                        "; on the GPU's rows, the idle gaps between eager's kernels at one token, the few "
                        "fused kernels of the compiled modes, and at 4,096 tokens the matrix products filling the row"
                        if dev == "cuda"
                        else ""
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of {r['blocks']} MLP blocks, d={r['d_model']}, on {device_name()}")
    for label, us in r["per_label_us"].items():
        print(f"  {label:<32} {us:9.1f} us per forward (profiler included)")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
