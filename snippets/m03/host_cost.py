"""Where a compiled forward spends its host time at one token, where the host binds: the
torch.compile backend ladder (Dynamo alone, + AOTAutograd, + Inductor with its Python wrapper,
with a C++ wrapper, with CUDA graphs), timed interleaved back to back; the host time to issue
one forward from an idle GPU, each rung on its own after a warm-up; then the device kernels of
each: how many, their names, their busy time, and the GPU's idle time between them."""

import torch
from modes import BLOCKS, Block, graphed  # the same model as modes.py
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from coursekit.bench import device_name, host_us_rounds, issue_us, summarize

PROCESSES = 3  # host-bound: the one-token ladder, repeated in fresh processes for run-to-run spread

# --8<-- [start:ladder]
LADDER = {  # name: keyword arguments to torch.compile, or None for plain eager
    "eager": None,
    "dynamo (backend=eager)": {"backend": "eager"},  # Dynamo's guards + the captured FX graph, run eagerly
    "dynamo+aot (backend=aot_eager)": {"backend": "aot_eager"},  # + AOTAutograd's runtime wrappers
    "inductor (default)": {"mode": "default"},  # + Inductor's generated Python wrapper and kernels
    "inductor (cpp_wrapper)": {"options": {"cpp_wrapper": True}},  # the same kernels, the wrapper in C++
    "inductor (reduce-overhead)": {"mode": "reduce-overhead"},  # + CUDA graph trees
    "inductor (max-autotune-no-cudagraphs)": {"mode": "max-autotune-no-cudagraphs"},
}
# --8<-- [end:ladder]
CUDA_ONLY = ["inductor (reduce-overhead)", "inductor (max-autotune-no-cudagraphs)", "eager in a CUDA graph"]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    d, tokens = (256, 1) if small else (1024, 1)
    calls, repeats = (5, 3) if small else (100, 20)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(BLOCKS)]).to(dev, dtype).eval()
    x = torch.randn(tokens, d, device=dev, dtype=dtype)
    runs = {}
    with torch.no_grad():
        for name, kwargs in LADDER.items():
            if name in CUDA_ONLY and not cuda:
                continue
            run = model if kwargs is None else torch.compile(model, dynamic=False, **kwargs)
            for _ in range(3):
                run(x)  # compile; reduce-overhead: warm up, then record the CUDA graph
            runs[name] = lambda run=run: run(x)
        if cuda:
            graph = graphed(model, x)
            runs["eager in a CUDA graph"] = graph.replay
        # Interleaved round by round, as in modes.py; the raw rounds are kept so that differences
        # between rungs can be taken within a round.
        timed = host_us_rounds({n: (f, torch.no_grad) for n, f in runs.items()}, calls, repeats, warmup=10)["host_us"]
        # One forward from an idle GPU, each rung on its own after warm-up calls of the same rung:
        # taken interleaved, the first call after another rung's ran up to twice as slow.
        issued = {n: issue_us(f, repeats=3 * repeats, warmup=5) for n, f in runs.items()}
        # Profile last: once CUPTI has traced kernels, launches in this process stay slower.
        kernels, names, busy, gaps, spans = {}, {}, {}, {}, {}
        for name, fn in runs.items():
            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                for _ in range(10):
                    fn()
                if cuda:
                    torch.cuda.synchronize()
            launched = sorted(
                (e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start
            )
            per_forward = len(launched) // 10
            kernels[name] = len(launched) / 10
            names[name] = [e.name for e in launched[:per_forward]]  # one forward's, in order
            busy[name] = sum(e.time_range.elapsed_us() for e in launched) / 10
            # the GPU's idle time between consecutive kernels of one forward
            idle = [
                launched[i + 1].time_range.start - launched[i].time_range.end
                for i in range(len(launched) - 1)
                if (i + 1) % per_forward
            ]
            # one forward's span: its first kernel's start to its last kernel's end
            forwards = [launched[i : i + per_forward] for i in range(0, len(launched), per_forward or 1)]
            span = [f[-1].time_range.end - f[0].time_range.start for f in forwards if len(f) == per_forward]
            spans[name] = summarize(span or [0.0], "us", "device")
            if idle:
                gaps[name] = summarize(idle, "us", "device")
    notes = [] if cuda else [f"{n}: skipped, it needs CUDA" for n in CUDA_ONLY] + ["no device kernels on a CPU"]
    return {
        "tokens": tokens,
        "d_model": d,
        "blocks": BLOCKS,
        "dtype": str(dtype).removeprefix("torch."),
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "rounds_us": timed,
        "host_us": {n: summarize(t, "us", "host") for n, t in timed.items()},
        "issue_us": issued,
        "kernels_per_forward": kernels,
        "gpu_busy_us": busy,
        "kernel_gap_us": gaps,
        "span_us": spans,
        "kernel_names": names,
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['blocks']} MLP blocks, d={r['d_model']}, {r['tokens']} token, {r['dtype']}, on {device_name()}")
    print(f"  {'':<40} {'us per forward':>14} {'issue us':>9} {'GPU busy':>9} {'kernels':>8}")
    for name, s in r["host_us"].items():
        print(
            f"  {name:<40} {s['median']:14.1f} {r['issue_us'][name]['median']:9.1f}"
            f" {r['gpu_busy_us'][name]:9.1f} {r['kernels_per_forward'][name]:8.1f}"
        )
    for note in r["notes"]:
        print("note:", note)
