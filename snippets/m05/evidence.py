"""The evidence behind the op-count figure: the compile log of one training step of ladder.py's
transformer block, whose graphs the figure counts: Dynamo's graph, AOTAutograd's joint
forward-and-backward graph, the forward and backward graphs the partitioner cuts it into, and the
code Inductor generates for each.

torch reads TORCH_TRACE (a folder for its structured compile log, which tlparse turns into pages)
and TORCH_LOGS once, when its logging starts at `import torch`. So the compile runs in a child
Python process started with both variables set: this same file, run with --compile-once. The
folder is packed into a .tar.gz; what TORCH_LOGS printed is kept as text beside it.

After the compile, the same child takes a torch.profiler trace of the step the op-count figure's
block runs: a few training steps of the compiled block, then as many of the eager block, each under a
label, gzipped, to open in ui.perfetto.dev (the compiled steps reuse the graphs just compiled: the
trace holds no compile). Timed: each profiled step in the child, host clock."""

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
from ladder import Block
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the logs are evidence to read, not a timing: one process

KEY = "m05/evidence"  # every file this snippet writes starts with m05-evidence-
CHILD = "--compile-once"  # `python evidence.py --compile-once`: the child process's part
TORCH_LOGS = "aot_joint_graph,aot_graphs"
TRACE = "--trace"  # `--trace PATH`: where the child writes the profiler trace


# --8<-- [start:compile_once]
def shape(small: bool) -> tuple[int, int, int, int]:
    """batch, seq, d_model, heads: ladder.py's sizes."""
    return (2, 16, 64, 4) if small else (4, 2048, 2048, 16)


def compile_once(small: bool):
    """What the child process compiles, with its logs on: one training step of the block, forward
    and backward, as kernels.py compiles it (one graph: fullgraph=True). Returns the block, its
    compiled module and the input, for the profiled steps."""
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    batch, seq, d, heads = shape(small)
    torch.manual_seed(0)
    model = Block(d, heads).to(dev, dtype)
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype, requires_grad=True)
    compiled = torch.compile(model, fullgraph=True)
    compiled(x).sum().backward()
    return model, compiled, x


# --8<-- [end:compile_once]


# --8<-- [start:trace]
def profiled_steps(model, compiled, x, steps: int):
    """torch.profiler over `steps` training steps of the compiled block, then `steps` of the eager one
    (forward, backward, gradients zeroed, as kernels.py times them), each step under a label.
    Returns the profiler and each step's host microseconds per variant."""
    cuda = x.is_cuda
    variants = {"compiled": compiled, "eager": model}

    def step(fn):
        model.zero_grad(set_to_none=True)
        fn(x).sum().backward()

    step(model)  # the eager warm-up, outside the trace (the compiled step already ran)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    host_us = {name: [] for name in variants}
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for name, fn in variants.items():
            for i in range(steps):
                start = time.perf_counter()
                with record_function(f"{name} step {i + 1}"):
                    step(fn)
                    if cuda:
                        torch.cuda.synchronize()
                host_us[name].append((time.perf_counter() - start) * 1e6)
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


# --8<-- [start:child]
def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)


def compile_logs(small: bool, trace: Path) -> tuple[Path, Path, float, dict]:
    """Run compile_once in a child Python with TORCH_TRACE and TORCH_LOGS set (and the compiled-graph
    caches off, so that every stage runs and is logged); pack the trace folder into a .tar.gz whose
    folder names this snippet, and keep the child's stderr, where TORCH_LOGS prints, as text (file
    paths in it cut to the file's name); the child writes its profiler trace to `trace`.
    Returns both paths, the child's wall seconds and the profiled steps' host microseconds."""
    stem = KEY.replace("/", "-")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"{stem}-torch_trace"
        env = dict(os.environ, TORCH_TRACE=str(folder), TORCH_LOGS=TORCH_LOGS)
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
        argv = [sys.executable, str(Path(__file__).resolve()), CHILD, TRACE, str(trace)] + (
            ["--small"] if small else []
        )
        start = time.perf_counter()
        child = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - start
        if child.returncode != 0:
            raise RuntimeError(f"{KEY}: the compile in a child process failed:\n{child.stderr[-3000:]}")
        if not list(folder.glob("*.log")):
            raise RuntimeError(f"{KEY}: the child process wrote no TORCH_TRACE log in {folder}")
        if not trace.is_file():
            raise RuntimeError(f"{KEY}: the child process wrote no profiler trace at {trace}")
        archive = artifact(KEY, "torch_trace.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
    text = artifact(KEY, "torch_logs.txt")
    # the profiler's own start and stop lines ("USDT: ...") are left out: not part of the compile
    said = "".join(line for line in child.stderr.splitlines(True) if not line.startswith("USDT:"))
    text.write_text(f"# {KEY}: what TORCH_LOGS={TORCH_LOGS} printed (stderr of the compile)\n{short_paths(said)}")
    return archive, text, seconds, json.loads(child.stdout.strip().splitlines()[-1])


# --8<-- [end:child]


def measure(small: bool = False) -> dict:
    trace = artifact(KEY, "trace.json.gz")
    archive, text, seconds, host_us = compile_logs(small, trace)
    steps = len(host_us["compiled"])
    batch, seq, d, heads = shape(small)
    where = "Triton kernels" if torch.cuda.is_available() else "C++ kernels"
    return {
        "repetitions": 1,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "shape": {"batch": batch, "seq": seq, "d_model": d, "heads": heads},
        "torch_logs": TORCH_LOGS,
        # the child's whole run: starting Python, importing torch, one compile, one training step
        "child_s": summarize([seconds], "s", clock="host"),
        # host time of one profiled training step per variant (the profiler's own cost included)
        "profiled_step_us": {name: summarize(v, "us", clock="host") for name, v in host_us.items()},
        "artifacts": [
            {
                "name": archive.name,
                "what": "compile log",
                "opens_with": "tlparse (pip install tlparse), run on the .log file inside the archive",
                "shows": (
                    "TORCH_TRACE's log of one training step of the transformer block: in tlparse's index, the one "
                    "compile 0/0 lists Dynamo's graph (dynamo_output_graph), the joint forward-and-backward graph "
                    "(aot_joint_graph), the forward and backward graphs the partitioner cut it into "
                    f"(aot_forward_graph, aot_backward_graph) and, for each, Inductor's {where} "
                    "(inductor_output_code)"
                ),
            },
            {
                "name": text.name,
                "what": "compile log",
                "opens_with": "a text editor",
                "shows": (
                    f"what TORCH_LOGS={TORCH_LOGS} prints for the same step: the joint graph of ATen operators, "
                    "then the forward and backward graphs, with the tensors the forward saves for the backward "
                    "among the forward's outputs"
                ),
            },
            {
                "name": trace.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"{steps} training steps of the compiled block, then {steps} of the eager one, each under a "
                    f"label: the compiled steps call Inductor's {where} and the library calls between them, the "
                    "eager steps one ATen operator after another"
                    + (", with every kernel on the GPU's row" if torch.cuda.is_available() else "")
                ),
            },
        ],
    }


if __name__ == "__main__":
    if CHILD in sys.argv:  # the child process that measure() starts
        small = "--small" in sys.argv
        prof, host_us = profiled_steps(*compile_once(small), steps=2)
        write_trace(prof, Path(sys.argv[sys.argv.index(TRACE) + 1]))
        print(json.dumps(host_us))  # the parent reads this last line
        sys.exit(0)
    r = measure(small=not torch.cuda.is_available())
    print(f"compile logs of one training step of the block {r['shape']} on {device_name()}")
    print(f"  the child process took {r['child_s']['median']:.1f} s")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
