"""The evidence behind the guard-cost figure: the compile log of bump_all from guards.py, the
function whose guards the figure times, compiled for ten tensors, called again (the guards pass),
then called with tensors of a new size (a guard fails and Dynamo recompiles).

torch reads TORCH_TRACE (a folder for its structured compile log, which tlparse turns into pages)
and TORCH_LOGS once, when its logging starts at `import torch`. So the compile runs in a child
Python process started with both variables set: this same file, run with --compile-once. The
folder is packed into a .tar.gz; what TORCH_LOGS printed is kept as text beside it.

Beside the logs, in this process: a torch.profiler trace of the calls the guard-cost figure times
for the same ten tensors (sweep_variants of guards.py: eager, the captured graph alone, the guard
check alone, and the compiled call, guards and all), a few calls of each under a label of its name,
gzipped, to open in ui.perfetto.dev."""

# --8<-- [start:imports]
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from guards import bump_all, own_copy, short_paths, sweep_variants
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the logs are evidence to read, not a timing: one process

KEY = "m04/evidence"  # every file this snippet writes starts with m04-evidence-
CHILD = "--compile-once"  # `python evidence.py --compile-once`: the child process's part
TORCH_LOGS = "guards,recompiles,graph_code"
TENSORS = 10  # guarded tensor inputs, one of the figure's sizes


# --8<-- [start:compile_once]
def compile_once(small: bool) -> None:
    """What the child process compiles, with its logs on: bump_all for TENSORS tensors (one guard
    tree), the same call again (the guards pass: no compile), then tensors of a new size (the size
    guard fails: a recompile and a second graph; dynamic=False keeps it static, as the sweep)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    compiled = torch.compile(own_copy(bump_all), dynamic=False)
    with torch.no_grad():
        xs = [torch.randn(16, device=dev) for _ in range(TENSORS)]
        compiled(xs)
        compiled(xs)
        compiled([torch.randn(32, device=dev) for _ in range(TENSORS)])


# --8<-- [end:compile_once]


# --8<-- [start:child]
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
def profiled_calls(dev: str, calls: int):
    """torch.profiler over `calls` calls of each variant the guard-cost figure times for TENSORS tensors,
    each call under a label of its variant's name (under torch.no_grad, as compiled). Returns the
    profiler and each call's host microseconds per variant."""
    variants, _ = sweep_variants(TENSORS, dev, inductor=False)
    with torch.no_grad():
        for fn in variants.values():  # warm-up, outside the trace
            fn()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    host_us = {name: [] for name in variants}
    with torch.no_grad(), profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for name, fn in variants.items():
            for _ in range(calls):
                start = time.perf_counter()
                with record_function(name):
                    fn()
                host_us[name].append((time.perf_counter() - start) * 1e6)
        if dev == "cuda":
            torch.cuda.synchronize()
    torch._dynamo.reset()
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
    archive, text, seconds = compile_logs(small)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    calls = 10 if small else 20
    prof, host_us = profiled_calls(dev, calls)
    trace = artifact(KEY, "trace.json.gz")
    write_trace(prof, trace)
    return {
        "repetitions": 1,
        "device": dev,
        "tensors": TENSORS,
        "torch_logs": TORCH_LOGS,
        # the child's whole run: starting Python, importing torch, two compiles, three calls
        "child_s": summarize([seconds], "s", clock="host"),
        "profiled_calls": calls,
        # host time of one profiled call per variant: the profiler's own cost included
        "profiled_call_us": {name: summarize(v, "us", clock="host") for name, v in host_us.items()},
        "artifacts": [
            {
                "name": archive.name,
                "what": "compile log",
                "opens_with": "tlparse (pip install tlparse), run on the .log file inside the archive",
                "shows": (
                    f"TORCH_TRACE's log of bump_all compiled for {TENSORS} tensors, called again, then with tensors of "
                    "a new size: in tlparse's index, "
                    "two compiles of one frame, 0/0 and 0/1; each has Dynamo's graph (dynamo_output_graph), "
                    "its guards (dynamo_cpp_guards_str) and Inductor's code (inductor_output_code), and 0/1 "
                    "names the failed guard that caused it (recompile_reasons)"
                ),
            },
            {
                "name": text.name,
                "what": "compile log",
                "opens_with": "a text editor",
                "shows": (
                    f"what TORCH_LOGS={TORCH_LOGS} prints for the same calls: the captured graph's code, the guard "
                    f"tree (one group of checks per tensor, {TENSORS} tensors) and the recompile with its reason, "
                    "a size that no longer matches"
                ),
            },
            {
                "name": trace.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{calls} calls of each thing the guard-cost figure times for {TENSORS} tensors, each call under "
                    "a label of its name: bump_all run eagerly, the captured graph alone, the guard check alone, "
                    "and the compiled call (guards, Dynamo's cache lookup and the graph)"
                    + (", with each call's kernel on the GPU's row" if dev == "cuda" else "")
                ),
            },
        ],
    }


if __name__ == "__main__":
    if CHILD in sys.argv:  # the child process that measure() starts
        compile_once(small="--small" in sys.argv)
        sys.exit(0)
    r = measure(small=not torch.cuda.is_available())
    print(f"compile logs of bump_all over {r['tensors']} tensors on {device_name()}")
    print(f"  the child process took {r['child_s']['median']:.1f} s")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
