"""Bucketing and padding, the way out of recompiles, and what it costs: a workload of 64 requests whose
lengths (tokens) are drawn, seeded, from a lognormal distribution (median 256 tokens, sigma 1 in log space,
clipped to 1..2048), served by one MLP block (d=4096, bf16: every request reads the 268 MB of weights, so
each call is device-bound) in four ways:

- exact: dynamic=False, each request at its own length. Each new length compiles a graph until
  torch._dynamo.config.recompile_limit (8) is reached; every later new length runs eagerly.
- pow2: dynamic=False, each request padded up to the next power of two (rows of zeros; the output's extra
  rows are dropped).
- ladder: dynamic=False, padded to a finer set, two steps per octave (1, 2, 3, 4, 6, 8, 12, ..., 1536, 2048).
- dynamic: dynamic=True, no padding: one graph with a symbolic length (and one more for a length of 1).

The bucketed runs raise recompile_limit to their number of buckets while they compile (with more buckets
than the limit, the rest would run eagerly). For each: graphs compiled (Dynamo's counters), total compile
seconds (Dynamo's own timing, compilation_time_metrics["_compile.compile_inner"]; cold: each way compiles
in fresh, empty Inductor and Triton caches, torch._inductor.utils.fresh_cache, after one unrecorded compile
has taken the process's one-time start-up), padding waste (padded tokens over real tokens, minus 1),
requests run eagerly, and the device time of the whole workload (coursekit.bench.gpu_us_each: the four
ways in interleaved rounds, inputs padded beforehand). On a CPU
(small): 4 requests (median 24, sigma 0.5, at most 64 tokens), d=64, backend aot_eager, host times."""

# --8<-- [start:imports]
import math
import types

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import compilation_time_metrics, counters
from torch._inductor.utils import fresh_cache

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, summarize

PROCESSES = 1  # device times in interleaved rounds; the compile seconds are one cold sample per compile (say so)
REQUESTS, MEDIAN_TOKENS, SIGMA, MAX_TOKENS = 64, 256, 1.0, 2048
POW2 = [2**k for k in range(12)]  # 1 .. 2048
LADDER = sorted(set(POW2) | {3 * 2**k for k in range(10)})  # 1, 2, 3, 4, 6, 8, 12, ..., 1536, 2048


# --8<-- [start:model]
class MLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


# --8<-- [end:model]


# --8<-- [start:workload]
def request_lengths(count: int, median: int, sigma: float, most: int, seed: int = 0) -> list[int]:
    """Lognormal lengths: exp(log(median) + sigma * z), z standard normal (seeded), rounded, clipped to 1..most."""
    z = torch.randn(count, generator=torch.Generator().manual_seed(seed))
    return [min(most, max(1, round(math.exp(math.log(median) + sigma * float(v))))) for v in z]


def bucket(length: int, buckets: list[int] | None) -> int:
    """The smallest bucket that holds length (the length itself without buckets)."""
    return length if buckets is None else next(b for b in buckets if b >= length)


# --8<-- [end:workload]


# --8<-- [start:serve]
def compile_seconds() -> list[float]:
    return list(compilation_time_metrics.get("_compile.compile_inner", []))


def own_step(model):
    """A function calling model, with a code object of its own: Dynamo keeps graphs, guards and the count that
    the recompile limit caps per code object, so each way's are its own."""

    def step(x):
        return model(x)

    return types.FunctionType(step.__code__.replace(), step.__globals__, step.__name__, None, step.__closure__)


def serve(model, inputs: list, buckets: list[int] | None, dynamic: bool, backend: str) -> dict:
    """A compiled copy of model, run once over the requests (padded to buckets): it compiles what it needs.
    Returns the compiled function, the padded inputs, and what compiling cost."""

    run = torch.compile(own_step(model), dynamic=dynamic, backend=backend)
    padded = [F.pad(x, (0, 0, 0, bucket(x.shape[0], buckets) - x.shape[0])) for x in inputs]  # zero rows at the end
    graphs, compiles = counters["stats"]["unique_graphs"], len(compile_seconds())
    limit = max(len(buckets or []), torch._dynamo.config.recompile_limit)  # room for a graph per bucket
    with fresh_cache(), torch._dynamo.config.patch(recompile_limit=limit):
        sizes_compiled = []
        for x in padded:
            before = counters["stats"]["unique_graphs"]
            run(x)
            if counters["stats"]["unique_graphs"] > before:
                sizes_compiled.append(x.shape[0])
    seconds = compile_seconds()[compiles:]
    real = sum(x.shape[0] for x in inputs)
    return {
        "run": run,
        "padded": padded,
        "facts": {
            "graphs": counters["stats"]["unique_graphs"] - graphs,
            "compiled_at": sizes_compiled,
            "compile_s": sum(seconds),
            "compile_s_each": seconds,
            "buckets_used": sorted({x.shape[0] for x in padded}) if buckets else None,
            "real_tokens": real,
            "padded_tokens": sum(x.shape[0] for x in padded),
            "padding_waste": sum(x.shape[0] for x in padded) / real - 1,
            "eager_requests": 0 if dynamic else sum(x.shape[0] not in sizes_compiled for x in padded),
        },
    }


# --8<-- [end:serve]

WAYS = {"exact": (None, False), "pow2": (POW2, False), "ladder": (LADDER, False), "dynamic": (None, True)}


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    backend = "inductor" if cuda else "aot_eager"
    d = 64 if small else 4096
    count, median, sigma, most = (4, 24, 0.5, 64) if small else (REQUESTS, MEDIAN_TOKENS, SIGMA, MAX_TOKENS)
    lengths = request_lengths(count, median, sigma, most)
    torch.manual_seed(0)
    model = MLP(d).to(dev, dtype).eval()
    inputs = [torch.randn(n, d, device=dev, dtype=dtype) for n in lengths]
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        with fresh_cache():  # one unrecorded compile first: the process's one-time start-up costs
            torch.compile(own_step(model), backend=backend)(torch.randn(3, d, device=dev, dtype=dtype))
        served = {name: serve(model, inputs, buckets, dynamic, backend) for name, (buckets, dynamic) in WAYS.items()}
        reference = model(inputs[0])  # padding changes no real row: each way's first answer against eager's
        for s in served.values():
            s["facts"]["max_abs_diff_vs_eager"] = (
                (s["run"](s["padded"][0])[: lengths[0]] - reference).abs().max().item()
            )
        workloads = {name: lambda s=s: [s["run"](x) for x in s["padded"]] for name, s in served.items()}
        times = gpu_us_each(workloads, rounds=3 if small else 10, rep_ms=50)
    torch._dynamo.reset()
    ways = []
    for name, s in served.items():
        paired = [t / base for t, base in zip(times[name]["rounds"], times["dynamic"]["rounds"])]
        ways.append(
            {
                "way": name,
                "buckets": WAYS[name][0],
                "dynamic": WAYS[name][1],
                **s["facts"],
                "time_us": times[name],
                "time_over_dynamic": summarize(paired, "x", times[name].get("clock")),
            }
        )
    return {
        "repetitions": times["dynamic"]["n"],
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": backend,
        "d_model": d,
        "torch": torch.__version__,
        "recompile_limit": torch._dynamo.config.recompile_limit,
        "workload": {
            "requests": count,
            "median_tokens": median,
            "sigma": sigma,
            "max_tokens": most,
            "lengths": lengths,
            "distinct_lengths": len(set(lengths)),
        },
        "ways": ways,
        "notes": [
            "padding_waste: padded tokens / real tokens - 1; eager_requests: requests at a length with no graph",
            "compile_s: Dynamo's compile_inner seconds, summed over the graphs, each compiled cold (fresh_cache)",
            "time_us: one pass over the whole workload, inputs already padded; time_over_dynamic paired by round",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    w = r["workload"]
    print(f"MLP d={r['d_model']} {r['dtype']}, backend {r['backend']}, on {device_name()}")
    print(f"{w['requests']} requests, lognormal median {w['median_tokens']}, {w['distinct_lengths']} distinct lengths")
    print(f"  {'way':<8} {'graphs':>6} {'compile s':>9} {'waste':>6} {'eager':>5} {'us':>10} {'vs dynamic':>10}")
    for way in r["ways"]:
        print(
            f"  {way['way']:<8} {way['graphs']:>6} {way['compile_s']:>9.2f} {way['padding_waste']:>6.1%}"
            f" {way['eager_requests']:>5} {way['time_us']['median']:>10.1f} {way['time_over_dynamic']['median']:>10.3f}"
        )
