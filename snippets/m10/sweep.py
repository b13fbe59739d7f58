"""One small compiled model (an MLP block: layer norm, up-projection, GELU, down-projection, residual)
called on a sweep of batch sizes, size 1 included, in two orders: ascending from 1, and 8 then 16 then 1.
For every call: its wall time on the host with the device drained at both ends (coursekit.bench.host_us
with one call, one repetition: a spike is one such call, and it is the compile), whether Dynamo compiled a
graph for it (torch._dynamo.utils.counters["stats"]["unique_graphs"], counted before and after the call,
not guessed) and the seconds Dynamo itself timed for that compile (compilation_time_metrics'
"_compile.compile_inner"). Also what Dynamo said while it compiled, captured from its loggers (what
TORCH_LOGS="recompiles,guards,graph_code,dynamic" prints): each recompile's reason, the symbol it created
for the batch dimension and its range, the input's size as each graph saw it, and the shape guards.

The orders show the three rules of the default (dynamic=None, torch._dynamo.config.automatic_dynamic_shapes):
the first size compiles a graph specialised to it; the second distinct size recompiles with a symbolic
batch size whose range starts at 2; size 1 fails that graph's guard (0/1 specialisation) and gets a graph
of its own. Ascending from 1 therefore compiles twice, 8-16-1 three times.

Each order starts from a fresh Dynamo (torch._dynamo.reset()) and fresh, empty Inductor and Triton caches
(torch._inductor.utils.fresh_cache()), so every compile is cold. One unrecorded compile first takes the
process's one-time start-up (the compile workers, Triton, cuBLAS) out of the first order's first call.
On a GPU the backend is Inductor, bf16, d=1024; on a CPU (small) it is aot_eager (Dynamo and AOTAutograd,
the same shape decisions, no Inductor: its cold C++ compile alone takes longer than the CPU budget)."""

# --8<-- [start:imports]
import contextlib
import logging
import re

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import compilation_time_metrics, counters
from torch._inductor.utils import fresh_cache

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us, summarize

PROCESSES = 3  # host wall times and cold compile times: three fresh processes give the run-to-run spread
ORDERS = {
    "ascending": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "eight_first": [8, 16, 1, 2, 4, 32, 64, 128, 256],
}
SMALL_ORDERS = {"ascending": [1, 2, 8], "eight_first": [8, 16, 1, 2]}
CALLS_PER_SIZE = 3  # the first call at a size may compile; the next ones are the steady state


# --8<-- [start:model]
class MLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def compile_step(model, backend: str):
    def step(x):  # the compiled frame: guards name its argument L['x']
        return model(x)

    # dynamic=None: specialise first, then automatic dynamic
    return torch.compile(step, backend=backend)


# --8<-- [end:model]


# --8<-- [start:captured]
LOGGERS = {
    "recompiles": "torch._dynamo.guards.__recompiles",  # TORCH_LOGS=recompiles: why a cached graph was refused
    "guards": "torch._dynamo.guards.__guards",  # TORCH_LOGS=guards: each new graph's guards
    "graph_code": "torch._dynamo.output_graph.__graph_code",  # TORCH_LOGS=graph_code: each graph, with sizes
    "dynamic": "torch.fx.experimental.symbolic_shapes",  # TORCH_LOGS=dynamic: symbols created, and their ranges
}


def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name; terminal colours removed."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", re.sub(r"\x1b\[[0-9;]*m", "", text))


@contextlib.contextmanager
def captured():
    """What Dynamo logs inside the block, as (artifact, message) pairs, kept instead of printed."""
    kept = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: kept.append((record.name, short_paths(record.getMessage())))
    torch._logging.set_logs(recompiles=True, guards=True, graph_code=True, dynamic=logging.INFO)
    saved = []
    for name in LOGGERS.values():
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate))
        log.handlers, log.propagate = [handler], False  # to us only, not to torch's printing handlers
    try:
        yield kept
    finally:
        for log, handlers, propagate in saved:
            log.handlers, log.propagate = handlers, propagate
        torch._logging.set_logs()


def what_dynamo_said(kept: list) -> dict:
    """The lines about the input x: recompile reasons, symbols created, x's size in each graph, shape guards."""
    said = {artifact: [m for name, m in kept if name == logger] for artifact, logger in LOGGERS.items()}
    guards = []
    for tree in (m for m in said["guards"] if "TREE_GUARD_MANAGER" in m):  # not the Python shape function
        lines = [re.sub(r"\s+# .*$", "", line).strip(" |+-") for line in tree.splitlines()]
        guards.append([line for line in lines if "L['x']" in line and ("TENSOR_MATCH" in line or "size()" in line)])
    return {
        "recompile_reasons": said["recompiles"],
        "symbols": [
            m for text in said["dynamic"] for m in re.findall(r"create_symbol \S+ = \S+ for \S+ \[[^\]]*\]", text)
        ],
        "x_in_graph": [m for text in said["graph_code"] for m in re.findall(r'L_x_: "([^"]+)"', text)],
        "x_guards": [g for g in guards if g],
    }


# --8<-- [end:captured]


# --8<-- [start:sweep]
def compile_seconds() -> list[float]:
    """Dynamo's own timing of every frame it compiled since the last reset, in seconds."""
    return list(compilation_time_metrics.get("_compile.compile_inner", []))


def sweep(model, order: list[int], d: int, backend: str, dev: str, dtype) -> dict:
    """Call a fresh compile of model at each batch size in order, CALLS_PER_SIZE times: each call's wall time,
    and whether Dynamo compiled a graph for it."""
    torch._dynamo.reset()  # no graphs, no record of sizes seen: as in a fresh process
    counters.clear()
    step = compile_step(model, backend)
    calls = []
    with fresh_cache(), captured() as kept:  # empty Inductor and Triton caches: every compile is cold
        for batch in order:
            x = torch.randn(batch, d, device=dev, dtype=dtype)
            for repeat in range(1, CALLS_PER_SIZE + 1):
                graphs, compiles = counters["stats"]["unique_graphs"], len(compile_seconds())
                wall_us = host_us(lambda: step(x), calls=1, repeats=1, warmup=0)["median"]  # device drained both ends
                calls.append(
                    {
                        "call": len(calls) + 1,
                        "batch": batch,
                        "repeat": repeat,
                        "seconds": wall_us / 1e6,
                        "compiled": counters["stats"]["unique_graphs"] > graphs,
                        "graphs_after": counters["stats"]["unique_graphs"],
                        "compile_s": sum(compile_seconds()[compiles:]),
                    }
                )
    return {
        "graphs": counters["stats"]["unique_graphs"],
        "frames_compiled": counters["frames"]["ok"],
        "compiled_at": [c["batch"] for c in calls if c["compiled"]],
        "calls": calls,
        **what_dynamo_said(kept),
    }


# --8<-- [end:sweep]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype, d = ("cuda", torch.bfloat16, 1024) if cuda else ("cpu", torch.float32, 64)
    backend = "inductor" if cuda else "aot_eager"
    orders = SMALL_ORDERS if small else ORDERS
    torch.manual_seed(0)
    model = MLP(d).to(dev, dtype).eval()
    with torch.no_grad():
        torch._dynamo.reset()  # the unrecorded first compile: the process's one-time start-up costs
        with fresh_cache():
            warm = compile_step(model, backend)
            warmup_s = host_us(lambda: warm(torch.randn(3, d, device=dev, dtype=dtype)), 1, 1, 0)["median"] / 1e6
        runs = {name: sweep(model, order, d, backend, dev, dtype) for name, order in orders.items()}
    torch._dynamo.reset()
    points = []
    for name, run in runs.items():
        steady = [c["seconds"] * 1e6 for c in run["calls"] if c["repeat"] > 1]
        spikes = [c["seconds"] for c in run["calls"] if c["compiled"]]
        points.append(
            {
                "order": name,
                "sizes": orders[name],
                **run,
                "steady_us": summarize(steady, "us", "host"),  # calls after the first at a size
                "compile_call_s": summarize(spikes, "s", "host"),  # the calls that compiled
            }
        )
    return {
        "repetitions": CALLS_PER_SIZE,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": backend,
        "d_model": d,
        "torch": torch.__version__,
        "automatic_dynamic_shapes": torch._dynamo.config.automatic_dynamic_shapes,
        "assume_static_by_default": torch._dynamo.config.assume_static_by_default,
        "warmup_compile_s": warmup_s,
        "orders": points,
        "notes": [
            "seconds: one call's wall time, device drained before and after (host_us, calls=1, repeats=1)",
            "compiled: counters['stats']['unique_graphs'] grew during the call; compile_s: Dynamo's "
            "compilation_time_metrics['_compile.compile_inner'] for it (the call also runs, and on a GPU "
            "autotunes, the new kernels)",
            "each order: torch._dynamo.reset() and fresh_cache(), so every compile is cold",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"MLP block d={r['d_model']} {r['dtype']}, backend {r['backend']}, on {device_name()}")
    print(f"  first compile in the process (unrecorded size 3): {r['warmup_compile_s']:.2f} s")
    for o in r["orders"]:
        print(f"order {o['order']}: {o['graphs']} graphs, compiled at batch {o['compiled_at']}")
        print(
            "  " + " ".join(f"{c['batch']}:{c['seconds'] * 1e3:.1f}{'*' if c['compiled'] else ''}" for c in o["calls"])
        )
        print(f"  (batch:ms per call, * compiled) steady {o['steady_us']['median']:.1f} us per call")
        for line in o["symbols"] + o["x_in_graph"]:
            print("  " + line)
        for reason in o["recompile_reasons"]:
            print("  " + reason.replace("\n", "\n  "))
