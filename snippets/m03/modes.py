"""One small model (four MLP blocks) across token batch sizes in eager mode, eager captured
in a CUDA graph, and three torch.compile modes: wall time per forward, compile time, kernels
per step, GPU busy time, host issue time, and the FLOPs and bytes that the chapter turns
into floors."""

import time

# --8<-- [start:imports]
import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_rounds, summarize

PROCESSES = 1  # for device time only (cold max-autotune compiles, about 340 s a process); host numbers need 3
BLOCKS = 4
CUDA_ONLY_MODES = ["eager-cudagraph", "reduce-overhead", "max-autotune-no-cudagraphs"]


# --8<-- [start:model]
class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(self.gelu(self.up(self.norm(x))))


# --8<-- [end:model]


# --8<-- [start:bytes]
def eager_bytes(tokens: int, d: int, elem: int) -> int:
    """HBM bytes that eager mode moves: every op reads its inputs and writes its output.

    Per block, in elements (T = tokens):
      layer_norm  read x, write y          2*T*d    + weight, bias   2*d
      up (addmm)  read y, write h          5*T*d    + weight, bias   4*d*d + 4*d
      gelu        read h, write g          8*T*d
      down        read g, write o          5*T*d    + weight, bias   4*d*d + d
      add         read x and o, write      3*T*d
      total                               23*T*d    + 8*d*d + 7*d  (all parameters, once)
    (layer_norm's fp32 mean and rstd, 8 bytes per token, are left out: under 0.2%.)
    """
    return BLOCKS * (23 * tokens * d + 8 * d * d + 7 * d) * elem


def min_bytes(tokens: int, d: int, elem: int) -> int:
    """The ideal fused forward: every parameter read once, input read once, output written once."""
    return (BLOCKS * (8 * d * d + 7 * d) + 2 * tokens * d) * elem


# --8<-- [end:bytes]


# --8<-- [start:compile]
MODES = ["eager", "eager-cudagraph", "default", "reduce-overhead", "max-autotune-no-cudagraphs"]


def compiled(model, mode: str):
    """The model as one of MODES runs it; "eager-cudagraph" is the exception: see graphed() below."""
    if mode == "eager":
        return model
    return torch.compile(model, mode=mode, dynamic=False)  # compiles on its first call, for that input's shape


# --8<-- [end:compile]


# --8<-- [start:profile]
GEMM_KERNELS = ("gemm", "nvjet", "splitKreduce", "triton_tem", "cutlass", "xmma")  # cuBLAS, Triton templates


def profile_step(step, steps: int, cuda: bool) -> tuple[float, float, float]:
    """Device kernels (and copies) per call of step(), their summed device time per call and the
    part of it spent in matrix-multiplication kernels, in us."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    busy_us = sum(e.time_range.elapsed_us() for e in kernels)
    gemm_us = sum(e.time_range.elapsed_us() for e in kernels if any(g in e.name for g in GEMM_KERNELS))
    return len(kernels) / steps, busy_us / steps, gemm_us / steps


# --8<-- [end:profile]


# --8<-- [start:graphed]
def graphed(model, x):
    """The eager model captured once into a CUDA graph: no compiler, no fusion, no host per kernel."""
    side = torch.cuda.Stream()  # warm up outside the capture, on a side stream (torch.cuda.graph docs)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)  # recorded, not run; replay() reruns these kernels on the same buffers
    return graph


# --8<-- [end:graphed]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    d = 256 if small else 1024
    token_counts = [1, 16] if small else [1, 16, 64, 256, 1024, 4096]
    calls, repeats, steps, profiles = (5, 5, 3, 2) if small else (100, 15, 20, 3)
    modes = MODES if cuda else [m for m in MODES if m not in CUDA_ONLY_MODES]
    notes = [] if cuda else [f"{m}: skipped, it needs CUDA" for m in CUDA_ONLY_MODES]
    notes += [
        "eager and the compiled default mode are profiled, after all timing: once CUPTI has traced kernels, "
        "launches stay slower in the process; kernels and GPU busy time count CUDA kernels and copies"
        + ("" if cuda else ", so with no GPU they are 0"),
        "first_call_s is a cold compile (Inductor caches off); the first one also pays "
        "the compiler's one-time start-up",
    ]

    # Compile times are cold: no on-disk cache from an earlier run may answer for the compiler.
    torch._inductor.config.force_disable_caches = True
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(BLOCKS)]).to(dev, dtype).eval()
    linear_weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    params = sum(p.numel() for p in model.parameters())
    elem = torch.finfo(dtype).bits // 8

    results = {t: {} for t in token_counts}
    with torch.no_grad():
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            torch._dynamo.reset()  # a fresh compile per batch size: one static graph each
            steps_by_mode, compiled_in = {}, {}
            for mode in modes:
                if mode == "eager-cudagraph":
                    graph = graphed(model, x)
                    run = lambda _x, graph=graph: graph.replay()  # reads x from the captured buffer
                else:
                    run = compiled(model, mode)
                start = time.perf_counter()
                run(x)  # the first call compiles
                if cuda:
                    torch.cuda.synchronize()
                if mode not in ("eager", "eager-cudagraph"):
                    compiled_in[mode] = {"first_call_s": summarize([time.perf_counter() - start], "s", "host")}
                for _ in range(3):
                    run(x)  # reduce-overhead: warm-up, then CUDA graph recording; outputs not kept
                steps_by_mode[mode] = lambda run=run: run(x)
            # Interleaved, round by round, so drift in the host's speed lands on every mode alike;
            # the speedup is taken within each round, then summarised over the rounds. Each round
            # also times two calls of every mode from an idle GPU (the host's issue time).
            rounds = host_us_rounds(
                {m: (f, torch.no_grad) for m, f in steps_by_mode.items()},
                calls=calls,
                repeats=repeats,
                warmup=10,
                issue_per_round=2,
            )
            timed, issued = rounds["host_us"], rounds["issue_us"]
            for mode in steps_by_mode:
                results[tokens][mode] = {
                    "time_us": summarize(timed[mode], "us", "host"),
                    "issue_us": summarize(issued[mode], "us", "host"),
                    "speedup": summarize([e / t for e, t in zip(timed["eager"], timed[mode])], "x", "host"),
                    **compiled_in.get(mode, {}),
                }
            del steps_by_mode, run, x
            graph = None  # frees the captured graph and its memory pool
        torch._dynamo.reset()

        # Profile eager last: once CUPTI has traced kernels, launches stay slower in this process.
        profile_step(lambda: model(torch.randn(1, d, device=dev, dtype=dtype)), 1, cuda)  # start-up
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            kernels, busy, gemm = zip(*(profile_step(lambda: model(x), steps, cuda) for _ in range(profiles)))
            results[tokens]["eager"]["gpu_busy_us"] = summarize(list(busy), "us", "device")
            results[tokens]["eager"]["gemm_busy_us"] = summarize(list(gemm), "us", "device")
            results[tokens]["eager"]["kernels_per_step"] = round(max(kernels))
        # The compiled default mode's kernels (reduce-overhead replays the same ones in a graph).
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            torch._dynamo.reset()
            run = torch.compile(model, mode="default", dynamic=False)
            run(x)
            kernels, busy, gemm = zip(*(profile_step(lambda: run(x), steps, cuda) for _ in range(profiles)))
            results[tokens]["default"]["gpu_busy_us"] = summarize(list(busy), "us", "device")
            results[tokens]["default"]["gemm_busy_us"] = summarize(list(gemm), "us", "device")
            results[tokens]["default"]["kernels_per_step"] = round(max(kernels))
        torch._dynamo.reset()

    points = []
    for tokens in token_counts:
        points.append(
            {
                "tokens": tokens,
                "flops": 2 * tokens * linear_weights,  # the matmuls; elementwise FLOPs are negligible
                "bytes_min": min_bytes(tokens, d, elem),
                "bytes_eager": eager_bytes(tokens, d, elem),
                "modes": results[tokens],
            }
        )
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "profiled_steps": steps * profiles,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "d_model": d,
        "blocks": BLOCKS,
        "params": params,
        "linear_weights": linear_weights,
        "modes": modes,
        "notes": notes,
        "points": points,
    }


def report(r: dict) -> None:
    print(f"{r['blocks']} MLP blocks, d={r['d_model']}, {r['dtype']}, on {device_name()}")
    print("us per forward (speedup over eager; first call = compile, s)")
    print(f"{'tokens':>6} " + " ".join(f"{m[:24]:>24}" for m in r["modes"]))
    for p in r["points"]:
        cells = [
            f"{s['time_us']['median']:7.1f} ({s['speedup']['median']:4.2f}x"
            + (f";{s['first_call_s']['median']:4.1f}s)" if "first_call_s" in s else ")")
            for s in (p["modes"][m] for m in r["modes"])
        ]
        print(f"{p['tokens']:>6} " + " ".join(f"{c:>24}" for c in cells))
    print("per forward: eager host issue vs GPU busy time (us) and kernels; compiled default's")
    for p in r["points"]:
        e, c = p["modes"]["eager"], p["modes"]["default"]
        print(
            f"{p['tokens']:>6} issue {e['issue_us']['median']:7.1f}  busy {e['gpu_busy_us']['median']:7.1f}"
            f"  kernels {e['kernels_per_step']:3}  | compiled busy {c['gpu_busy_us']['median']:7.1f}"
            f"  kernels {c['kernels_per_step']:3}"
        )
    for note in r["notes"]:
        print("note:", note)


if __name__ == "__main__":
    report(measure(small=not torch.cuda.is_available()))
