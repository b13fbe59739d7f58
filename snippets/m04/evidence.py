"""The evidence behind the guard-cost figure: the compile log of bump_all from guards.py, the
function whose guards the figure times, compiled for ten tensors, called again (the guards pass),
then called with tensors of a new size (a guard fails and Dynamo recompiles).

torch reads TORCH_TRACE (a folder for its structured compile log, which tlparse turns into pages)
and TORCH_LOGS once, when its logging starts at `import torch`. So the compile runs in a child
Python process started with both variables set: this same file, run with --compile-once. The
folder is packed into a .tar.gz; what TORCH_LOGS printed is kept as text beside it."""

# --8<-- [start:imports]
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from guards import bump_all, own_copy, short_paths

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


def measure(small: bool = False) -> dict:
    archive, text, seconds = compile_logs(small)
    return {
        "repetitions": 1,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "tensors": TENSORS,
        "torch_logs": TORCH_LOGS,
        # the child's whole run: starting Python, importing torch, two compiles, three calls
        "child_s": summarize([seconds], "s", clock="host"),
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
