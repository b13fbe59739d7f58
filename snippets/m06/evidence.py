"""The evidence behind the bytes-moved and bandwidth figures: the compile log of norm_block.py's
block, y = x + gelu(layer_norm(x) * w + b), with the kernel Inductor generates for it
(inductor_output_code), and a torch.profiler trace of the block compiled (one fused kernel) and in
eager mode (a kernel per op), at the figures' size.

torch reads TORCH_TRACE (a folder for its structured compile log, which tlparse turns into pages)
and TORCH_LOGS once, when its logging starts at `import torch`. So the logged compile runs in a
child Python process started with both variables set: this same file, run with --compile-once.
The folder is packed into a .tar.gz; what TORCH_LOGS printed is kept as text beside it. The
profile runs in this process, on a compile of its own."""

# --8<-- [start:imports]
import gzip
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from norm_block import block
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the logs and the trace are evidence to read, not a timing: one process

KEY = "m06/evidence"  # every file this snippet writes starts with m06-evidence-
CHILD = "--compile-once"  # `python evidence.py --compile-once`: the child process's part
TORCH_LOGS = "fusion,output_code"


# --8<-- [start:compile_once]
def inputs(small: bool):
    """x, w and b as norm_block.py makes them, at its sizes (x larger than the H200's L2 on a GPU)."""
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    rows, d = (64, 256) if small else (16384, 4096)
    torch.manual_seed(0)
    x = torch.randn(rows, d, device=dev, dtype=dtype)
    return x, torch.randn(d, device=dev, dtype=dtype), torch.randn(d, device=dev, dtype=dtype)


def compile_once(small: bool) -> None:
    """What the child process compiles, with its logs on: the block, as norm_block.py compiles it."""
    if not torch.cuda.is_available():
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    with torch.no_grad():
        torch.compile(block, fullgraph=True, dynamic=False)(*inputs(small))


# --8<-- [end:compile_once]


# --8<-- [start:child]
def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)


def compile_logs(small: bool) -> tuple[Path, Path, float]:
    """Run compile_once in a child Python with TORCH_TRACE and TORCH_LOGS set (and the compiled-graph
    caches off, so that every stage runs and is logged); pack the trace folder into a .tar.gz whose
    folder names this snippet, and keep the child's stderr, where TORCH_LOGS prints, as text (file
    paths in it cut to the file's name).
    Returns both paths and the child's wall seconds."""
    stem = KEY.replace("/", "-")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"{stem}-torch_trace"
        env = dict(os.environ, TORCH_TRACE=str(folder), TORCH_LOGS=TORCH_LOGS)
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
        argv = [sys.executable, str(Path(__file__).resolve()), CHILD] + (["--small"] if small else [])
        start = time.perf_counter()
        child = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - start
        if child.returncode != 0:
            raise RuntimeError(f"{KEY}: the compile in a child process failed:\n{child.stderr[-3000:]}")
        if not list(folder.glob("*.log")):
            raise RuntimeError(f"{KEY}: the child process wrote no TORCH_TRACE log in {folder}")
        archive = artifact(KEY, "torch_trace.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
    text = artifact(KEY, "torch_logs.txt")
    text.write_text(
        f"# {KEY}: what TORCH_LOGS={TORCH_LOGS} printed (stderr of the compile)\n{short_paths(child.stderr)}"
    )
    return archive, text, seconds


# --8<-- [end:child]


# --8<-- [start:trace]
def profiled_calls(small: bool, calls: int):
    """torch.profiler over `calls` calls of the block compiled, then in eager mode, each under a
    label of its name (compiled and warm before the trace starts). Returns the profiler and each
    label's host microseconds per call, waiting for the device."""
    x, w, b = inputs(small)
    cuda = x.is_cuda
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    runs = {"compiled (fused)": lambda: compiled(x, w, b), "eager (a kernel per op)": lambda: block(x, w, b)}
    per_call_us = {}
    with torch.no_grad():
        for run in runs.values():
            for _ in range(3):
                run()  # the first compiles
        sync()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
            for label, run in runs.items():
                start = time.perf_counter()
                with record_function(label):
                    for _ in range(calls):
                        run()
                    sync()
                per_call_us[label] = (time.perf_counter() - start) * 1e6 / calls
    return prof, per_call_us


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


# --8<-- [end:trace]


def measure(small: bool = False) -> dict:
    archive, text, seconds = compile_logs(small)
    if not torch.cuda.is_available():
        torch.set_num_threads(1)  # as norm_block.py: compiled C++ kernels bring their own OpenMP pool
    calls = 3
    prof, per_call_us = profiled_calls(small, calls)
    trace = artifact(KEY, "trace.json.gz")
    write_trace(prof, trace)
    x, _, _ = inputs(small)
    cuda = x.is_cuda
    code = "a Triton kernel" if cuda else "C++ code"
    return {
        "repetitions": calls,
        "device": "cuda" if cuda else "cpu",
        "rows": x.shape[0],
        "d": x.shape[1],
        "torch_logs": TORCH_LOGS,
        # the child's whole run: starting Python, importing torch, one compile, one call
        "child_s": summarize([seconds], "s", clock="host"),
        "per_label_us": per_call_us,
        "artifacts": [
            {
                "name": archive.name,
                "what": "compile log",
                "opens_with": "tlparse (pip install tlparse), run on the .log file inside the archive",
                "shows": (
                    "TORCH_TRACE's log of the block's compile: in tlparse's index, compile 0/0 lists Dynamo's "
                    "graph, the graphs before and after Inductor's passes and, under inductor_output_code, "
                    f"the module Inductor wrote: {code} that computes layer_norm, gelu and the add in one pass"
                    + (" over rows, the row read twice" if cuda else "")
                ),
            },
            {
                "name": text.name,
                "what": "compile log",
                "opens_with": "a text editor",
                "shows": (
                    f"what TORCH_LOGS={TORCH_LOGS} prints for the same compile: the scheduler's fusion "
                    "decisions, then the output code with the kernel's source"
                ),
            },
            {
                "name": trace.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{calls} calls of the block compiled, then {calls} in eager mode, each under a label of its "
                    "name"
                    + (
                        f" ({x.shape[0]:,} rows of {x.shape[1]:,}); on the GPU's rows, one fused kernel per "
                        "compiled call against eager's kernel per op, each reading and writing the whole tensor"
                        if cuda
                        else ""
                    )
                ),
            },
        ],
    }


if __name__ == "__main__":
    if CHILD in sys.argv:  # the child process that measure() starts
        compile_once(small="--small" in sys.argv)
        sys.exit(0)
    r = measure(small=not torch.cuda.is_available())
    print(f"compile logs and a profiler trace of the norm block, {r['rows']} x {r['d']}, on {device_name()}")
    print(f"  the child process took {r['child_s']['median']:.1f} s")
    for label, us in r["per_label_us"].items():
        print(f"  {label:<24} {us:9.1f} us per call (profiler included)")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
