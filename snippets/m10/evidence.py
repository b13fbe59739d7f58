"""The evidence behind the recompile-spikes figure: torch.compile's structured compile log
(TORCH_TRACE) of sweep.py's model called at batch sizes 8, 16, 1 and 2, the start of its order
"eight_first", packed with a README into a .tar.gz to open with tlparse (or read in a text editor).
In it: the first graph specialised to batch 8; the recompile at 16, its reason and the symbol
created for the batch dimension with its range from 2; the recompile at 1 (0/1 specialisation,
its own graph); the reuse at 2; and each graph's guards. The README says what to search for.

TORCH_TRACE is read once, when torch sets up its logging at import, so the compiles run in a child
Python process started with the variable set: this file run again with --child. On a GPU the
backend is Inductor (bf16, d=1024, the generated kernels logged too); on a CPU it is aot_eager
(d=64), as in sweep.py. Timed: each call in the child (host clock) and the child's whole run.

Then, in this process, a torch.profiler trace of the same calls (batch sizes 8, 16, 1, 2 of a freshly
compiled step), each call under a label of its batch size, gzipped, to open in ui.perfetto.dev: the
calls that compile are long spans holding Dynamo's and the backend's phases, the reuse a short one.
Inductor's caches are warm by then (the child's compiles filled them), so these spans are shorter
than a cold compile's. Timed: each profiled call, host clock."""

# --8<-- [start:imports]
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from sweep import MLP, compile_step
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the log is evidence to read, not a timing: one process

KEY = "m10/evidence"  # every file this snippet writes starts with m10-evidence-
ORDER = [8, 16, 1, 2]  # the start of sweep.py's order "eight_first": three compiles, then a reuse
README = """course snippet: m10/evidence (snippets/m10/evidence.py)
torch {torch}, backend {backend}, {dtype}, d={d}, on {device}
The .log file is torch.compile's structured log (TORCH_TRACE) of a compiled MLP block
(snippets/m10/sweep.py) called at batch sizes {order}, each once, in one fresh process.
Open it with tlparse (pip install tlparse; tlparse <file>.log gives an HTML index per compile),
or search it in a text editor for:
  "dynamo_start"                one per compile: three (batch 8, 16, 1); batch 2 reuses a graph
  "artifact" ... "recompile_reasons"   why the graph for 8 was refused at 16, and the graph for
                                the symbolic batch at 1
  "create_symbol"               the symbol made for the batch dimension at 16, and its range
  "dynamo_cpp_guards_str"       each graph's guards: the size of L['x'] pinned (8, then 1), or a range
  "dynamo_output_graph"         each graph, with the sizes it saw (a number, or a symbol)
"""


# --8<-- [start:child]
def setup(dev: str):
    """The child's model and settings: (dtype, d, backend)."""
    return (torch.bfloat16, 1024, "inductor") if dev == "cuda" else (torch.float32, 64, "aot_eager")


def child(dev: str) -> None:
    """Runs in the child (TORCH_TRACE set): the compiled step at each size of ORDER; prints, as JSON,
    each call's host seconds and whether Dynamo compiled a graph for it."""
    cuda = dev == "cuda"
    dtype, d, backend = setup(dev)
    torch.manual_seed(0)
    step = compile_step(MLP(d).to(dev, dtype).eval(), backend)
    calls = []
    with torch.no_grad():
        for batch in ORDER:
            x = torch.randn(batch, d, device=dev, dtype=dtype)
            graphs = counters["stats"]["unique_graphs"]
            start = time.perf_counter()
            step(x)
            if cuda:
                torch.cuda.synchronize()
            calls.append({"batch": batch, "seconds": time.perf_counter() - start,
                          "compiled": counters["stats"]["unique_graphs"] > graphs})  # fmt: skip
    info = {"torch": torch.__version__, "backend": backend, "dtype": str(dtype).removeprefix("torch."), "d": d}
    print(json.dumps({**info, "device": dev, "calls": calls}))


def traced_run(dev: str, trace_dir: Path) -> dict:
    """This file run again as a child with TORCH_TRACE=trace_dir; what its child() printed."""
    env = {**os.environ, "TORCH_TRACE": str(trace_dir)}
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", dev],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the traced child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --8<-- [end:child]


# --8<-- [start:trace]
def profiled_calls(dev: str):
    """torch.profiler over the calls of ORDER on a freshly compiled step (Dynamo reset first), each
    call under a label of its batch size. Returns the profiler and each call's batch, host
    microseconds and whether Dynamo compiled a graph for it."""
    dtype, d, backend = setup(dev)
    torch._dynamo.reset()
    torch.manual_seed(0)
    step = compile_step(MLP(d).to(dev, dtype).eval(), backend)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    calls = []
    with torch.no_grad(), profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for batch in ORDER:
            x = torch.randn(batch, d, device=dev, dtype=dtype)
            graphs = counters["stats"]["unique_graphs"]
            start = time.perf_counter()
            with record_function(f"batch {batch}"):
                step(x)
                if dev == "cuda":
                    torch.cuda.synchronize()
            calls.append({"batch": batch, "us": (time.perf_counter() - start) * 1e6,
                          "compiled": counters["stats"]["unique_graphs"] > graphs})  # fmt: skip
    torch._dynamo.reset()
    return prof, calls


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


def readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A member as a reader unpacks it: readable by all, owned by nobody in particular."""
    info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
    return info


def pack(path: Path, trace_dir: Path, run: dict) -> list[str]:
    """The child's log files and a README naming this snippet, in one .tar.gz; the names packed."""
    logs = sorted(p for p in trace_dir.iterdir() if p.is_file())
    if not logs:
        raise RuntimeError(f"TORCH_TRACE wrote nothing in {trace_dir}")
    text = README.format(**run, order=", ".join(map(str, ORDER))).encode()
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        info = tarfile.TarInfo(f"{path.name.removesuffix('.tar.gz')}/README.txt")
        info.size, info.mtime, info.mode = len(text), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(text))
        for log in logs:
            tar.add(log, arcname=f"{path.name.removesuffix('.tar.gz')}/{log.name}", filter=readable)
    return [log.name for log in logs]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    path = artifact(KEY, "torch_trace.tar.gz")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run = traced_run(dev, Path(tmp))
        child_s = time.perf_counter() - start
        logs = pack(path, Path(tmp), run)
    calls = run.pop("calls")
    prof, profiled = profiled_calls(dev)
    trace = artifact(KEY, "trace.json.gz")
    write_trace(prof, trace)
    return {
        "repetitions": 1,
        **run,
        "order": ORDER,
        "compiled_at": [c["batch"] for c in calls if c["compiled"]],
        "call_s": {str(c["batch"]): summarize([c["seconds"]], "s", clock="host") for c in calls},
        "child_s": child_s,  # the child's whole run: start-up, imports, compiles
        "logs": logs,
        # in this process, under the profiler (its own cost included; Inductor's caches warm)
        "profiled_compiled_at": [c["batch"] for c in profiled if c["compiled"]],
        "profiled_call_us": {str(c["batch"]): summarize([c["us"]], "us", clock="host") for c in profiled},
        "artifacts": [
            {
                "name": path.name,
                "what": "compile log",
                "opens_with": "tlparse",
                "shows": "torch.compile's structured log of batch sizes 8, 16, 1 and 2: three compiles, "
                "each recompile's reason, the symbol made for the batch and its range, every graph's guards",
            },
            {
                "name": trace.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": "the same four calls of a freshly compiled step, each under a label of its batch size: "
                "the three that compile are long spans holding Dynamo's and the backend's phases, the call at "
                "batch 2 reuses a graph and is short (Inductor's caches were warm, so the compiles are shorter "
                "than cold ones)",
            },
        ],
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        sys.exit()
    r = measure(small=not torch.cuda.is_available())
    print(f"TORCH_TRACE of the compiled MLP (d={r['d']}, {r['backend']}) on {device_name()}")
    print(f"  batch sizes {r['order']}: compiled at {r['compiled_at']}; child ran {r['child_s']:.1f} s")
    spans = ", ".join(f"{b}: {s['median'] / 1e3:.1f} ms" for b, s in r["profiled_call_us"].items())
    print(f"  profiled calls, compiled at {r['profiled_compiled_at']}: {spans}")
    for a in r["artifacts"]:
        logs = f" ({', '.join(r['logs'])})" if a["what"] == "compile log" else ""
        print(f"  {a['name']}: {a['what']}{logs}, open it in {a['opens_with']}")
