"""Regional against whole-model compilation of the module's model (_model.py, d_model 1,024, bf16)
at 4 and 16 layers (regional_48.py: 48; nested at 16 only), forward only (inference under no_grad; 1 x 1,024 tokens).

- whole: torch.compile(model): Dynamo traces every block, Inductor compiles one graph of them all.
- regional: each block compiled alone, `for block in model.blocks: block.compile()`, as PyTorch's
  recipe "Reducing torch.compile cold start compilation time with regional compilation" does; the
  embeddings and the head stay eager. With torch._dynamo.config.inline_inbuilt_nn_modules (on by
  default since 2.5) a block's weights are graph inputs, not constants, so every block reuses the
  code compiled for the first: one graph, however many layers (counters below).
- nested: torch.compile(model) with each block's forward marked torch.compiler.nested_compile_region
  (hierarchical compilation: Dynamo still traces the region at every call, installs one subgraph
  when the traces match and emits an invoke_subgraph call at each use, so AOTAutograd and Inductor
  lower it once).

Each case runs in a fresh child process (subprocess.run with sys.executable) with its own
TORCHINDUCTOR_CACHE_DIR (TRITON_CACHE_DIR unset, so Inductor puts Triton's cache inside it): cold =
an empty directory; warm = a second process on the same directory (the FX graph, AOTAutograd and
Triton caches on disk; Dynamo still traces). Stored per case: the first call's seconds (compile and
one run: one sample each, cold and warm), the steady forward time (host wall time per call, device
synchronized at both ends: bench.host_us), Dynamo's counters (frames compiled, unique graphs) and
the cache counters (FX graph and AOTAutograd cache hits and misses), and the outputs' largest
difference from eager.

On the CPU (small=True): whole and regional only (nested is tested in tests/), d_model 32, 2 layers,
16 tokens, float32, two children at a time, and backend="aot_eager" (Dynamo and AOTAutograd, no
Inductor: its cold C++ compiles take about a minute per case on a 2-core machine), so the FX graph
cache counters stay 0 there. The data says so."""

# --8<-- [start:imports]
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from _model import CPU, GPU, Block, build
from torch._dynamo.utils import counters

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us

PROCESSES = 1  # every case runs in its own child processes; its first-call seconds are one sample each
LAYERS = [4, 16]
STRATEGIES = ["whole", "regional", "nested"]
NESTED_AT = (16,)  # nested_compile_region at 16 layers only: each case costs a cold and a warm process
TOKENS = 1024


# --8<-- [start:strategies]
class NestedBlock(Block):
    @torch.compiler.nested_compile_region  # traced at each call, lowered once for every block
    def forward(self, x, cache=None, pos=None):
        return super().forward(x, cache, pos)


def compiled(model, strategy: str, **options):
    if strategy == "whole":
        return torch.compile(model, **options)
    if strategy == "regional":
        for block in model.blocks:
            block.compile(**options)  # nn.Module.compile: this block's calls go through torch.compile
        return model
    for block in model.blocks:
        block.__class__ = NestedBlock  # the same weights; forward marked as a nested region
    return torch.compile(model, **options)


# --8<-- [end:strategies]


def child(layers: int, strategy: str, small: bool) -> dict:
    """One case, in this (fresh) process: compile, first call, steady time, counters."""
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    if not cuda:
        torch.set_num_threads(1)
    cfg = CPU if small or not cuda else GPU
    model = build(cfg, dev, dtype, layers=layers).eval()
    x = torch.randint(cfg.vocab, (1, 16 if small else TOKENS), device=dev)
    with torch.no_grad():
        reference = model(x)  # eager, before anything is compiled
        fn = compiled(model, strategy, **({} if cuda else {"backend": "aot_eager"}))  # CPU: see docstring
        counters.clear()
        start = time.perf_counter()  # a one-off event: perf_counter (bench times repeated calls)
        out = fn(x)
        if cuda:
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        facts = {
            "frames_compiled": counters["frames"]["ok"],
            "unique_graphs": counters["stats"]["unique_graphs"],
            "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
            "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
            "autograd_cache_hit": counters["aot_autograd"]["autograd_cache_hit"],
            "autograd_cache_miss": counters["aot_autograd"]["autograd_cache_miss"],
        }
        steady = host_us(lambda: fn(x), calls=3 if small else 20, repeats=3 if small else 10, warmup=2)
    return {
        "layers": layers,
        "strategy": strategy,
        "first_call_s": first_call_s,
        "forward_us": steady,
        "max_abs_diff_vs_eager": (out.float() - reference.float()).abs().max().item(),
        **facts,
    }


# --8<-- [start:child]
CHILD = """
import importlib.util, json, os, sys
path, function = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(path))  # for its sibling _model.py
spec = importlib.util.spec_from_file_location("regional_snippet", path)
snippet = importlib.util.module_from_spec(spec)
sys.modules["regional_snippet"] = snippet  # torch.compile looks a function's globals up by module name
spec.loader.exec_module(snippet)
print(json.dumps(getattr(snippet, function)(*json.loads(sys.argv[3]))))
"""


def in_child(cache_dir: str, layers: int, strategy: str, small: bool) -> dict:
    """child() in a fresh Python whose Inductor cache is cache_dir (Triton's inside it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE")}
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    args = [
        sys.executable,
        "-c",
        CHILD,
        os.path.abspath(__file__),
        child.__name__,
        json.dumps([layers, strategy, small]),
    ]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=400)
    if proc.returncode != 0:
        raise RuntimeError(f"the {strategy} child at {layers} layers failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cold_then_warm(layers: int, strategy: str, small: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="m13-regional-") as cache_dir:
        return {
            "cold": in_child(cache_dir, layers, strategy, small),
            "warm": in_child(cache_dir, layers, strategy, small),
        }


# --8<-- [end:child]


def inline_inbuilt_nn_modules() -> bool:
    """The Dynamo setting regional compilation relies on (deprecated after 2.11: always on)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return bool(getattr(torch._dynamo.config, "inline_inbuilt_nn_modules", True))


def tolerant(layers: int, strategy: str, small: bool) -> dict:
    """cold_then_warm, except that a nested_compile_region case that fails is stored, its error verbatim
    (the newest of the three ways: the page reports what it did, not a missing point)."""
    try:
        return cold_then_warm(layers, strategy, small)
    except RuntimeError as error:
        if strategy != "nested":
            raise
        return {"error": str(error)[-2000:]}


def run_cases(layer_counts: list[int], strategies: list[str], small: bool, nested_at=()) -> dict:
    cases = [(n, s) for n in layer_counts for s in strategies if s != "nested" or n in nested_at]
    workers = 1 if torch.cuda.is_available() else 2  # on a GPU one at a time, so the timings stay apart
    with ThreadPoolExecutor(workers) as pool:
        runs = list(pool.map(lambda case: tolerant(*case, small), cases))
    return {
        "repetitions": runs[0]["cold"]["forward_us"]["n"],
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "d_model": (CPU if small or not torch.cuda.is_available() else GPU).d,
        "tokens": 16 if small else TOKENS,
        "strategies": strategies,
        "inline_inbuilt_nn_modules": inline_inbuilt_nn_modules(),
        "points": [{"layers": n, "strategy": s, **run} for (n, s), run in zip(cases, runs)],
        "notes": [
            "first_call_s: compile plus one forward, one sample each; cold in an empty cache directory, "
            "warm in a second process on the same directory",
            "forward_us: host wall time per forward, back to back, device synchronized at both ends",
        ]
        + ([] if torch.cuda.is_available() else ["CPU run: backend='aot_eager', no Inductor: no FX graph cache"]),
    }


def measure(small: bool = False) -> dict:
    return run_cases([2] if small else LAYERS, STRATEGIES[:2] if small else STRATEGIES, small, NESTED_AT)


def report(r: dict) -> None:
    print(f"regional vs whole compilation, d {r['d_model']}, {r['tokens']} tokens, forward, on {device_name()}")
    print(
        f"{'layers':>6} {'strategy':>9} {'cold s':>7} {'warm s':>7} {'fwd us':>9} {'graphs':>6}"
        f" {'fx hit/miss (warm)':>19}"
    )
    for p in r["points"]:
        c, w = p["cold"], p["warm"]
        print(
            f"{p['layers']:>6} {p['strategy']:>9} {c['first_call_s']:7.1f} {w['first_call_s']:7.1f}"
            f" {w['forward_us']['median']:9.0f} {c['unique_graphs']:>6}"
            f" {w['fxgraph_cache_hit']:>9}/{w['fxgraph_cache_miss']}"
        )


if __name__ == "__main__":
    report(measure(small=not torch.cuda.is_available()))
