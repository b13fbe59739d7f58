"""One small model (four MLP blocks) across token batch sizes in eager mode, eager captured
in a CUDA graph, and three torch.compile modes: wall time per forward, then a profile of every
variant (kernels per forward, GPU busy time, the span from first kernel start to last kernel
end, the kernels themselves), and the FLOPs and bytes that the chapter turns into floors.
Compile times are m03/costs's."""

# --8<-- [start:imports]
import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_rounds, summarize

PROCESSES = 3  # host-bound at small sizes: three fresh processes give the run-to-run spread
BLOCKS = 4
CUDA_ONLY_MODES = ["eager-cudagraph", "reduce-overhead", "max-autotune-no-cudagraphs"]
AUTOTUNED_TOKENS = (1, 4096)  # max-autotune only here: a cold autotune costs 15 s to a minute per size (m03/costs)
KERNEL_LIST_TOKENS = (1, 4096)  # where each variant's kernels are stored by name


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


def profile_step(step, steps: int, cuda: bool) -> dict:
    """Profile steps calls of step(): per call, the device kernels (and copies) it ran, their
    summed device time, the part in matrix-multiplication kernels, and the span from the first
    kernel's start to the last one's end (busy time plus the GPU's idle time between them), in us."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    per_call = len(kernels) // steps  # every call runs the same kernels (none on a CPU)
    calls = [kernels[i * per_call : (i + 1) * per_call] for i in range(steps)]
    return {
        "kernels": per_call,
        "busy_us": [sum(e.time_range.elapsed_us() for e in c) for c in calls],
        "gemm_us": [sum(e.time_range.elapsed_us() for e in c if any(g in e.name for g in GEMM_KERNELS)) for c in calls],
        "span_us": [c[-1].time_range.end - c[0].time_range.start if c else 0 for c in calls],
        "names": [e.name for e in calls[0]],
        "kernel_us": [sum(c[i].time_range.elapsed_us() for c in calls) / steps for i in range(per_call)],
    }


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


def variants(model, x, modes: list[str]) -> dict:
    """mode -> a function running one forward of that variant on x, compiled (or captured) and warm."""
    runs = {}
    for mode in modes:
        if mode == "eager-cudagraph":
            graph = graphed(model, x)
            run = lambda graph=graph: graph.replay()  # reads x from the captured buffer
        else:
            fn = compiled(model, mode)
            run = lambda fn=fn: fn(x)
        for _ in range(4):
            run()  # the first call compiles; reduce-overhead then warms up and records its graph
        runs[mode] = run
    return runs


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    d = 256 if small else 1024
    token_counts = [1, 16] if small else [1, 16, 64, 256, 1024, 4096]
    autotuned = (1,) if small else AUTOTUNED_TOKENS
    calls, repeats, steps, profiles = (5, 5, 3, 2) if small else (100, 15, 20, 3)
    modes = MODES if cuda else [m for m in MODES if m not in CUDA_ONLY_MODES]
    notes = [] if cuda else [f"{m}: skipped, it needs CUDA" for m in CUDA_ONLY_MODES]
    notes += [
        *(
            [f"max-autotune-no-cudagraphs is compiled at {' and '.join(map(str, autotuned))} tokens only"]
            if cuda
            else []
        ),
        "every variant is profiled after all timing, compiled again from Inductor's caches: once CUPTI "
        "has traced kernels, launches stay slower in the process; kernels and GPU busy time count CUDA "
        "kernels and copies" + ("" if cuda else ", so with no GPU they are 0"),
    ]
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(BLOCKS)]).to(dev, dtype).eval()
    linear_weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    params = sum(p.numel() for p in model.parameters())
    elem = torch.finfo(dtype).bits // 8
    modes_at = {t: [m for m in modes if m != "max-autotune-no-cudagraphs" or t in autotuned] for t in token_counts}

    results = {t: {} for t in token_counts}
    with torch.no_grad():
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            torch._dynamo.reset()  # a fresh compile per batch size: one static graph each
            runs = variants(model, x, modes_at[tokens])
            # Interleaved, round by round, so drift in the host's speed lands on every variant alike;
            # the speedup is taken within each round, then summarised over the rounds.
            timed = host_us_rounds({m: (f, torch.no_grad) for m, f in runs.items()}, calls, repeats, 10)["host_us"]
            for mode in runs:
                results[tokens][mode] = {
                    "time_us": summarize(timed[mode], "us", "host"),
                    "speedup": summarize([e / t for e, t in zip(timed["eager"], timed[mode])], "x", "host"),
                }
            del runs, x
        # Profile last: once CUPTI has traced kernels, launches stay slower in this process.
        profile_step(lambda: model(torch.randn(1, d, device=dev, dtype=dtype)), 1, cuda)  # start-up
        for tokens in token_counts:
            x = torch.randn(tokens, d, device=dev, dtype=dtype)
            torch._dynamo.reset()
            for mode, run in variants(model, x, modes_at[tokens]).items():
                prof = [profile_step(run, steps, cuda) for _ in range(profiles)]
                cell = results[tokens][mode]
                for stored, key in (("gpu_busy_us", "busy_us"), ("gemm_busy_us", "gemm_us"), ("span_us", "span_us")):
                    cell[stored] = summarize([v for p in prof for v in p[key]], "us", "device")
                cell["kernels_per_step"] = max(p["kernels"] for p in prof)
                if tokens in KERNEL_LIST_TOKENS or small:
                    cell["kernels"] = [[n, round(t, 2)] for n, t in zip(prof[-1]["names"], prof[-1]["kernel_us"])]
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
        "autotuned_tokens": list(autotuned),
        "notes": notes,
        "points": points,
    }


def report(r: dict) -> None:
    print(f"{r['blocks']} MLP blocks, d={r['d_model']}, {r['dtype']}, on {device_name()}")
    print("us per forward, back to back (speedup over eager)")
    print(f"{'tokens':>6} " + " ".join(f"{m[:26]:>26}" for m in r["modes"]))
    for p in r["points"]:
        cells = [
            f"{p['modes'][m]['time_us']['median']:7.1f} ({p['modes'][m]['speedup']['median']:4.2f}x)"
            if m in p["modes"]
            else "-"
            for m in r["modes"]
        ]
        print(f"{p['tokens']:>6} " + " ".join(f"{c:>26}" for c in cells))
    print("profile per forward: GPU busy / first-to-last-kernel span (us), kernels")
    for p in r["points"]:
        cells = [
            f"{s['gpu_busy_us']['median']:7.1f}/{s['span_us']['median']:7.1f} {s['kernels_per_step']:3}"
            for s in (p["modes"][m] for m in r["modes"] if m in p["modes"])
        ]
        print(f"{p['tokens']:>6} " + " ".join(f"{c:>26}" for c in cells))
    for note in r["notes"]:
        print("note:", note)


if __name__ == "__main__":
    report(measure(small=not torch.cuda.is_available()))
