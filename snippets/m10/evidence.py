"""The evidence behind the recompile-spikes figure: torch.compile's structured compile log
(TORCH_TRACE) of sweep.py's model called at batch sizes 8, 16, 1 and 2, the start of its order
"eight_first", packed with a README into a .tar.gz to open with tlparse (or read in a text editor).
In it: the first graph specialised to batch 8; the recompile at 16, its reason and the symbol
created for the batch dimension with its range from 2; the recompile at 1 (0/1 specialisation,
its own graph); the reuse at 2; and each graph's guards. The README says what to search for.

TORCH_TRACE is read once, when torch sets up its logging at import, so the compiles run in a child
Python process started with the variable set: this file run again with --child. On a GPU the
backend is Inductor (bf16, d=1024, the generated kernels logged too); on a CPU it is aot_eager
(d=64), as in sweep.py. Timed: each call in the child (host clock) and the child's whole run."""

# --8<-- [start:imports]
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
def child(dev: str) -> None:
    """Runs in the child (TORCH_TRACE set): the compiled step at each size of ORDER; prints, as JSON,
    each call's host seconds and whether Dynamo compiled a graph for it."""
    cuda = dev == "cuda"
    dtype, d, backend = (torch.bfloat16, 1024, "inductor") if cuda else (torch.float32, 64, "aot_eager")
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
    return {
        "repetitions": 1,
        **run,
        "order": ORDER,
        "compiled_at": [c["batch"] for c in calls if c["compiled"]],
        "call_s": {str(c["batch"]): summarize([c["seconds"]], "s", clock="host") for c in calls},
        "child_s": child_s,  # the child's whole run: start-up, imports, compiles
        "logs": logs,
        "artifacts": [
            {
                "name": path.name,
                "what": "compile log",
                "opens_with": "tlparse",
                "shows": "torch.compile's structured log of batch sizes 8, 16, 1 and 2: three compiles, "
                "each recompile's reason, the symbol made for the batch and its range, every graph's guards",
            }
        ],
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        sys.exit()
    r = measure(small=not torch.cuda.is_available())
    print(f"TORCH_TRACE of the compiled MLP (d={r['d']}, {r['backend']}) on {device_name()}")
    print(f"  batch sizes {r['order']}: compiled at {r['compiled_at']}; child ran {r['child_s']:.1f} s")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']} ({', '.join(r['logs'])}), open it in {a['opens_with']}")
