"""Where a compiled forward spends its host time at one token, where the host binds: the
torch.compile backend ladder (Dynamo alone, + AOTAutograd, + Inductor), with and without
CUDA graphs, timed interleaved; then device kernels per forward for each, and their names."""

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from coursekit.bench import device_name, host_us_each
from modes import BLOCKS, Block, graphed  # the same model as modes.py

# --8<-- [start:ladder]
LADDER = {  # name: keyword arguments to torch.compile, or None for plain eager
    "eager": None,
    "dynamo (backend=eager)": {"backend": "eager"},  # Dynamo's guards + the captured FX graph, run eagerly
    "dynamo+aot (backend=aot_eager)": {"backend": "aot_eager"},  # + AOTAutograd's runtime wrappers
    "inductor (default)": {"mode": "default"},  # + Inductor's generated wrapper and kernels
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
            runs[name] = (lambda run=run: run(x))
        if cuda:
            graph = graphed(model, x)
            runs["eager in a CUDA graph"] = graph.replay
        host = host_us_each({n: (f, torch.no_grad) for n, f in runs.items()},
                            calls=calls, repeats=repeats, warmup=10)
        # Profile last: once CUPTI has traced kernels, launches in this process stay slower.
        kernels, names = {}, {}
        for name, fn in runs.items():
            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                for _ in range(10):
                    fn()
                if cuda:
                    torch.cuda.synchronize()
            launched = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                              key=lambda e: e.time_range.start)
            kernels[name] = len(launched) / 10
            names[name] = [e.name for e in launched[:len(launched) // 10]]  # one forward's, in order
    notes = [] if cuda else [f"{n}: skipped, it needs CUDA" for n in CUDA_ONLY] + ["no device kernels on a CPU"]
    return {"tokens": tokens, "d_model": d, "blocks": BLOCKS, "dtype": str(dtype).removeprefix("torch."),
            "repetitions": repeats, "calls_per_repetition": calls,
            "host_us": host, "kernels_per_forward": kernels, "kernel_names": names, "notes": notes}


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['blocks']} MLP blocks, d={r['d_model']}, {r['tokens']} token, {r['dtype']}, on {device_name()}")
    for name, s in r["host_us"].items():
        print(f"  {name:<40} {s['median']:7.1f} us per forward (p10 {s['p10']:.1f}, p90 {s['p90']:.1f})"
              f"  {r['kernels_per_forward'][name]:4.1f} kernels")
    for note in r["notes"]:
        print("note:", note)
