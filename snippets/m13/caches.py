"""The caches that make compile time bearable, turned on one layer at a time: the module's model at 2
layers (d_model 1,024, bf16, forward only, 1 x 1,024 tokens) compiled with
mode="max-autotune-no-cudagraphs", so that autotuning every GEMM has a cost, in fresh child processes
(subprocess.run with sys.executable), each with its own TORCHINDUCTOR_CACHE_DIR (TRITON_CACHE_DIR unset:
Inductor then puts Triton's cache at <cache dir>/triton/<device>, torch/_inductor/runtime/cache_dir_utils.py):

- cold: an empty directory; the directory it fills is the source of the others, which start from
  copies of parts of it:
- triton: only triton/ (compiled kernels: cubins, Triton's own cache) warm;
- triton+autotune: also cache/ (max-autotune's GEMM choice timings, PersistentCache, kept while
  torch._inductor.config.autotune_local_cache is on) and the *.best_config files (the Triton
  heuristics' chosen launch configs, beside each kernel's code);
- all: the whole directory, with fxgraph/ (the FX graph cache, torch._inductor.config.fx_graph_cache)
  and aotautograd/ (AOTAutograd's cache, torch._functorch.config.enable_autograd_cache) warm.
Stored per case: the first call's seconds (compile and one run; one sample each), Inductor's and
AOTAutograd's cache counters and how many GEMM autotunings ran; and a listing of the cold directory
(top-level entries, files and bytes), with the default root (user name replaced by <user>).

On the CPU (small=True): d_model 32, 1 layer, 16 tokens, float32, mode="default" (max-autotune
needs a GPU), Inductor's C++ backend; the cold and all cases only (a cold C++ compile takes tens
of seconds on a 2-core machine). The data says so."""

# --8<-- [start:imports]
import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _model import CPU, GPU, build
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # every case runs in its own child process; its first-call seconds are one sample each
LAYERS, TOKENS = 2, 1024
CASES = ["cold", "triton", "triton+autotune", "all"]


def child(small: bool) -> dict:
    """Compile and run the model once in this (fresh) process; the seconds and the counters."""
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg = CPU if small or not cuda else GPU
    model = build(cfg, dev, dtype, layers=1 if small else LAYERS).eval()
    x = torch.randint(cfg.vocab, (1, 16 if small else TOKENS), device=dev)
    fn = torch.compile(model, mode="max-autotune-no-cudagraphs" if cuda else "default")
    with torch.no_grad():
        counters.clear()
        start = time.perf_counter()  # a one-off event: perf_counter (bench times repeated calls)
        fn(x)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return {
        "first_call_s": summarize([seconds], "s", "host"),
        "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
        "autograd_cache_hit": counters["aot_autograd"]["autograd_cache_hit"],
        "autograd_cache_miss": counters["aot_autograd"]["autograd_cache_miss"],
        "gemm_autotunings": counters["inductor"]["select_algorithm_autotune"],  # benchmarks not found in cache/
        "gemm_precompiles": counters["inductor"]["select_algorithm_precompile"],
        "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR", "").replace(
            os.environ["TORCHINDUCTOR_CACHE_DIR"], "<cache dir>"
        ),
    }


CHILD = """
import importlib.util, json, os, sys
path, function = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(path))  # for its sibling _model.py
spec = importlib.util.spec_from_file_location("caches_snippet", path)
snippet = importlib.util.module_from_spec(spec)
sys.modules["caches_snippet"] = snippet  # torch.compile looks a function's globals up by module name
spec.loader.exec_module(snippet)
print(json.dumps(getattr(snippet, function)(*json.loads(sys.argv[3]))))
"""


def in_child(cache_dir: Path, small: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE")}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    args = [sys.executable, "-c", CHILD, os.path.abspath(__file__), child.__name__, json.dumps([small])]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=500)
    if proc.returncode != 0:
        raise RuntimeError(f"the child on {cache_dir.name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --8<-- [start:layers]
def warm_copy(cold: Path, to: Path, case: str) -> None:
    """A cache directory with only `case`'s layers copied from the cold run's."""
    to.mkdir()
    if case == "all":
        shutil.copytree(cold, to, dirs_exist_ok=True)
        return
    if (cold / "triton").exists():
        shutil.copytree(cold / "triton", to / "triton")  # compiled kernels
    if case == "triton+autotune":
        if (cold / "cache").exists():
            shutil.copytree(cold / "cache", to / "cache")  # GEMM choice timings (max-autotune)
        for f in cold.rglob("*.best_config"):  # Triton launch configs, beside each kernel's code
            (to / f.relative_to(cold)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, to / f.relative_to(cold))


def listing(root: Path) -> dict:
    """Top-level entries of a cache directory: files and bytes under each; Inductor's two-character
    code directories (generated kernels and wrappers, by hash) counted together."""
    out = {}
    for entry in sorted(root.iterdir()):
        key = "<2-char code dirs>" if entry.is_dir() and len(entry.name) == 2 else entry.name
        files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file()]
        row = out.setdefault(key, {"files": 0, "bytes": 0, "best_config_files": 0})
        row["files"] += len(files)
        row["bytes"] += sum(f.stat().st_size for f in files)
        row["best_config_files"] += sum(f.name.endswith(".best_config") for f in files)
    return out


# --8<-- [end:layers]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    cases = CASES if cuda else ["cold", "all"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="m13-caches-") as tmp:
        cold = Path(tmp) / "cold"
        cold.mkdir()
        results["cold"] = in_child(cold, small)
        layout = listing(cold)
        for case in cases[1:]:
            warm_copy(cold, Path(tmp) / case.replace("+", "-"), case)
            results[case] = in_child(Path(tmp) / case.replace("+", "-"), small)
    return {
        "repetitions": 1,
        "device": "cuda" if cuda else "cpu",
        "mode": "max-autotune-no-cudagraphs" if cuda else "default on the CPU",
        "layers": LAYERS if cuda and not small else 1,
        "cases": [{"case": c, **results[c]} for c in cases],
        "cold_dir_layout": layout,
        "default_root": default_cache_dir().replace(getpass.getuser(), "<user>"),
        "fx_graph_cache_default": bool(torch._inductor.config.fx_graph_cache),
        "autograd_cache_default": bool(torch._functorch.config.enable_autograd_cache),
        "autotune_local_cache_default": bool(torch._inductor.config.autotune_local_cache),
        "notes": ["first_call_s: one sample per case, each in a fresh process"]
        + ([] if cuda else ["CPU run: mode default (no autotuning), cases cold and all only"]),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"compile caches, {r['layers']} layers, {r['mode']}, on {device_name()}; default root {r['default_root']}")
    print(f"{'case':>16} {'first s':>8} {'fx hit/miss':>11} {'aot hit/miss':>12} {'autotunings':>11}")
    for c in r["cases"]:
        print(
            f"{c['case']:>16} {c['first_call_s']['median']:8.1f}"
            f" {c['fxgraph_cache_hit']:>5}/{c['fxgraph_cache_miss']:<5}"
            f" {c['autograd_cache_hit']:>6}/{c['autograd_cache_miss']:<5} {c['gemm_autotunings']:>11}"
        )
    for name, row in r["cold_dir_layout"].items():
        print(f"  {name:<22} {row['files']:>5} files {row['bytes'] / 2**20:8.2f} MiB")
