"""The fair control for the decode race (decode.py): the same decode step at batch 1, with the
kernel set held fixed. Three variants, each replaying a CUDA graph:

- "eager_graph": the eager model captured by hand with torch.cuda.graph (eager's kernels);
- "default_graph": torch.compile(model, mode="default") (Inductor's fused kernels, no CUDA graphs
  of its own), warmed up, then captured by hand with torch.cuda.graph in the same way;
- "reduce_overhead": torch.compile(model, mode="reduce-overhead") (Inductor's fused kernels, replayed
  by CUDA graph trees).

default_graph and reduce_overhead run Inductor's kernels; eager_graph and default_graph share the
hand-written wrapper (one graph.replay() per step). So default_graph against eager_graph is what the
kernels change, and reduce_overhead against default_graph is what the trees' wrapper changes.

Clock: host wall time per step (the forward, then the next token fed back and the position
advanced, as in decode.py), back to back with a device synchronize at both ends, the three
variants in the same interleaved rounds (bench.host_us_rounds), as tokens/s; in the same rounds,
the host time for one step to return from an idle GPU (issue time: an upper bound on the host's
work per step). After all timing (once CUPTI has traced kernels, launches stay slower in the process), a
torch.profiler pass over steps of each variant: the CUDA kernels and copies one step runs, their
summed device time (GPU busy time), and the span from the first kernel's start to the last one's
end. Also: the logits over 8 teacher-forced steps against eager, each compile's first call, the
hand captures' pool bytes, and what the trees' log says was recorded or skipped.

On a CPU, at small sizes (decode.CPU): no CUDA graphs and no kernels. The hand captures are
constraints.StandInGraph (reruns the function on the captured tensors), both compiles use
backend="eager" (Dynamo only), and the profile counts no kernels; the data says so."""

# --8<-- [start:imports]
import time

import torch
from apis import TreesLog  # what CUDA graph trees log, kept (apis.py)
from chain import pool_bytes  # bytes of a private pool (chain.py)
from constraints import capture  # warm up on a side stream, then capture (constraints.py)
from decode import CPU, GPU, Decoder, step, teacher_forced_logits  # the decode model and step (decode.py)
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_rounds, rate, summarize

PROCESSES = 3  # host-bound at batch 1: three fresh processes give the run-to-run spread
BATCH = 1  # the batch where the host's share of the step is largest
CHECK_STEPS = 8  # teacher-forced steps over which the variants' logits are compared with eager
VARIANTS = ["eager_graph", "default_graph", "reduce_overhead"]


# --8<-- [start:variants]
def first_call(fn, cuda: bool) -> float:
    """Seconds for fn's first call to finish: a compile (and, for the trees, their warm-up run)."""
    start = time.perf_counter()  # a one-off event: perf_counter (bench times repeated calls)
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def compiled(model, mode: str, cuda: bool):
    """torch.compile of the whole step in mode; on a CPU, Dynamo only (Inductor's compile is slow there)."""
    if not cuda:
        return torch.compile(model, backend="eager", fullgraph=True, dynamic=False)
    return torch.compile(model, mode=mode, fullgraph=True, dynamic=False)


def variants(model, token, pos, cuda: bool) -> tuple[dict, dict]:
    """name -> a function running one forward on the current token and pos tensors; and facts."""
    graph, eager_out = capture(model, token, pos)  # the eager kernels, recorded once
    runs = {"eager_graph": lambda: (graph.replay(), eager_out)[1]}

    default = compiled(model, "default", cuda)
    default_first_s = first_call(lambda: default(token, pos), cuda)  # compile outside the capture
    default_graph, default_out = capture(default if cuda else model, token, pos)  # Inductor's kernels, by hand
    if not cuda:  # the stand-in checks its capture eagerly (Dynamo traces under no dispatch mode); replays compiled
        default_graph.fn = default
    runs["default_graph"] = lambda: (default_graph.replay(), default_out)[1]

    trees = compiled(model, "reduce-overhead", cuda)
    with TreesLog() as log:
        trees_first_s = first_call(lambda: trees(token, pos), cuda)  # compile, then the trees' warm-up run
        for _ in range(3):
            trees(token, pos)  # the recording, then replays
    runs["reduce_overhead"] = lambda: trees(token, pos)
    return runs, {
        "graph_pool_bytes": {
            "eager_graph": pool_bytes(graph.pool()) if cuda else 0,
            "default_graph": pool_bytes(default_graph.pool()) if cuda else 0,
        },
        "first_call_s": {
            "default": summarize([default_first_s], "s", "host"),
            "reduce_overhead": summarize([trees_first_s], "s", "host"),
        },
        "trees_recordings": log.count("Recording function="),
        "trees_warmup_runs": log.count("Running warmup function="),
        "cudagraph_skips": [m for m in log.seen if m.startswith("skipping cudagraph")],
    }


# --8<-- [end:variants]


# --8<-- [start:profile]
def profile_steps(run, token, pos, steps: int, cuda: bool) -> dict:
    """Profile steps decode steps of run: per step, the device kernels (and copies) it ran, their
    summed device time (busy), and the span from the first kernel's start to the last one's end."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(run, token, pos)
        if cuda:
            torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    per_step = len(kernels) // steps  # every step runs the same kernels (none on a CPU)
    each = [kernels[i * per_step : (i + 1) * per_step] for i in range(steps)]
    return {
        "kernels": per_step,
        "busy_us": [sum(e.time_range.elapsed_us() for e in s) for s in each],
        "span_us": [s[-1].time_range.end - s[0].time_range.start if s else 0 for s in each],
        "names": [[e.name, round(e.time_range.elapsed_us(), 2)] for e in each[0]] if each else [],
    }


# --8<-- [end:profile]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    shape = CPU if small or not cuda else GPU
    calls, repeats, issue, steps = (3, 5, 2, 3) if small else (50, 30, 5, 20)
    if not cuda:
        torch.set_num_threads(1)  # steady host timings on a small machine
    torch._dynamo.reset()
    with torch.no_grad():
        torch.manual_seed(0)  # the decode race's weights
        model = Decoder(**shape, batch=BATCH).to(dev, dtype).eval()
        token = torch.zeros(BATCH, 1, dtype=torch.long, device=dev)
        pos = torch.zeros(1, dtype=torch.long, device=dev)
        runs, facts = variants(model, token, pos, cuda)
        tokens = torch.randint(shape["vocab"], (BATCH, CHECK_STEPS), device=dev)
        eager = teacher_forced_logits(lambda: model(token, pos), token, pos, tokens)
        logits = {name: teacher_forced_logits(run, token, pos, tokens) for name, run in runs.items()}
        pos.zero_()
        timed = host_us_rounds(
            {name: (lambda run=run: step(run, token, pos), torch.no_grad) for name, run in runs.items()},
            calls=calls,
            repeats=repeats,
            warmup=calls,
            issue_per_round=issue,
        )
        raw = timed["host_us"]
        # Profile last: once CUPTI has traced kernels, launches stay slower in this process.
        profile_steps(runs["eager_graph"], token, pos, 1, cuda)  # the profiler's own start-up
        profiled = {name: profile_steps(run, token, pos, steps, cuda) for name, run in runs.items()}
        del runs
    torch._dynamo.reset()
    base = "eager_graph"
    return {
        "batch": BATCH,
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "issue_samples_per_round": issue,
        "profiled_steps": steps,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        **shape,
        "variants": VARIANTS,
        "step_us": {k: summarize(v, "us", "host", rounds=True) for k, v in raw.items()},
        "tokens_per_s": {k: rate(summarize(v, "us", "host"), BATCH, "tokens/s") for k, v in raw.items()},
        "speedup_over_eager_graph": {
            k: summarize([b / t for b, t in zip(raw[base], raw[k])], "x", "host") for k in VARIANTS if k != base
        },
        "reduce_overhead_over_default_graph": summarize(
            [d / t for d, t in zip(raw["default_graph"], raw["reduce_overhead"])], "x", "host"
        ),
        "issue_us": {k: summarize(v, "us", "host") for k, v in timed["issue_us"].items()},
        "kernels_per_step": {k: p["kernels"] for k, p in profiled.items()},
        "gpu_busy_us": {k: summarize(p["busy_us"], "us", "device") for k, p in profiled.items()},
        "span_us": {k: summarize(p["span_us"], "us", "device") for k, p in profiled.items()},
        "kernels": {k: p["names"] for k, p in profiled.items()},
        "max_abs_logit_diff": {k: (v - eager).abs().max().item() for k, v in logits.items()},
        "same_greedy_tokens": {k: torch.equal(v.argmax(-1), eager.argmax(-1)) for k, v in logits.items()},
        **facts,
        "notes": [
            "first_call_s: cold in the first process; later processes compile from Inductor's caches",
            "every step also runs two small eager ops shared by all variants (the next token copied into "
            "the input, the position advanced); the profile counts them too",
        ]
        + (
            []
            if cuda
            else [
                "no CUDA graphs on a CPU: the hand captures are constraints.StandInGraph (reruns the function "
                "on the captured tensors); both compiles are torch.compile(backend='eager'): Dynamo only, no "
                "Inductor, no CUDA graph trees; no kernels to profile"
            ]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"decode step, batch {r['batch']}: {r['layers']} blocks, d={r['d']}, {r['dtype']}, on {device_name()}")
    print(f"{'variant':>16} {'us/step':>8} {'tokens/s':>9} {'issue us':>9}", end="")
    print(f" {'kernels':>8} {'busy us':>8} {'span us':>8}")
    for k in r["variants"]:
        print(f"{k:>16} {r['step_us'][k]['median']:>8.1f} {r['tokens_per_s'][k]['median']:>9.0f}", end="")
        print(f" {r['issue_us'][k]['median']:>9.1f} {r['kernels_per_step'][k]:>8}", end="")
        print(f" {r['gpu_busy_us'][k]['median']:>8.1f} {r['span_us'][k]['median']:>8.1f}")
    ratio = r["reduce_overhead_over_default_graph"]["median"]
    print(f"reduce-overhead over the hand-captured compiled module: {ratio:.2f}x")
    print(f"max |logit - eager|: {r['max_abs_logit_diff']}, trees recorded {r['trees_recordings']},", end="")
    print(f" skipped: {r['cudagraph_skips'] or 'none'}")
    for note in r["notes"]:
        print("note:", note)
