"""One small training step three ways (PyTorch eager, torch.compile, jax.jit): the first call with its
compile, the steady time per step, and the number of steps after which the compile has paid for itself."""

import contextlib
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # else JAX takes 75% of GPU memory

# --8<-- [start:jax_imports]
import jax
import jax.numpy as jnp

# --8<-- [end:jax_imports]
# --8<-- [start:torch_imports]
import torch
import torch.nn.functional as F
from torch._inductor.utils import fresh_cache

# --8<-- [end:torch_imports]
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from coursekit.bench import device_name, host_us, host_us_each, rate, summarize

PROCESSES = 3  # host-bound at the small size: three fresh processes give the run-to-run spread

# --8<-- [start:constants]
LAYERS, LR = 4, 1e-3


# --8<-- [end:constants]


def torch_mlp(hidden: int, dev: str, dtype: torch.dtype) -> torch.nn.Sequential:
    torch.manual_seed(0)  # every variant starts from the same weights
    layers = [m for _ in range(LAYERS) for m in (torch.nn.Linear(hidden, hidden), torch.nn.GELU())]
    return torch.nn.Sequential(*layers[:-1]).to(dev, dtype)  # no GELU after the last Linear


# --8<-- [start:torch_step]
def make_torch_step(model, compiled: bool):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    forward, update = model, opt.step
    if compiled:  # model and opt.step apart, as the optimizer recipe does
        # dynamic=False: else the second size gets a dynamic-shape graph
        forward, update = (
            torch.compile(model, dynamic=False),
            torch.compile(opt.step, dynamic=False),
        )

    def step(x, y):
        loss = F.mse_loss(forward(x), y)
        loss.backward()  # compiled: runs the compiled backward graph
        update()
        opt.zero_grad()
        return loss

    return step


# --8<-- [end:torch_step]


# --8<-- [start:jax_step]
def mlp(params, x):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:  # on the list's length: fine under jit
            x = jax.nn.gelu(x, approximate=False)  # as nn.GELU()
    return x


def sgd_step(params, x, y):  # pure: new weights come back as a value
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((mlp(p, x) - y) ** 2))(params)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads), loss


# donate: reuse the old weights' buffers, as torch does
jax_step = jax.jit(sgd_step, donate_argnums=0)
# --8<-- [end:jax_step]


def runners(hidden: int, batch: int, dev: str, dtype, jax_dev) -> dict:
    """name -> a function that runs one full training step and waits for the device to finish it."""
    x, y = (torch.randn(batch, hidden, device=dev, dtype=dtype) for _ in range(2))

    def torch_runner(compiled: bool):
        step = make_torch_step(torch_mlp(hidden, dev, dtype), compiled)  # compiles on its first call

        def run():
            step(x, y)
            if dev == "cuda":
                torch.cuda.synchronize()  # wait for the whole step, the optimizer's update included

        return run

    def jax_runner():
        # The torch model's initial weights and the same data, as JAX arrays on jax_dev.
        to_jax = lambda t: jax.device_put(jnp.asarray(t.detach().float().cpu().numpy(), str(dtype)[6:]), jax_dev)
        linears = [m for m in torch_mlp(hidden, dev, dtype) if isinstance(m, torch.nn.Linear)]
        params, jx, jy = [(to_jax(m.weight.T), to_jax(m.bias)) for m in linears], to_jax(x), to_jax(y)

        def run():
            nonlocal params
            params, _ = jax_step(params, jx, jy)
            jax.block_until_ready(params)  # JAX dispatches asynchronously: wait for the update

        return run

    return {"eager": torch_runner(False), "torch_compile": torch_runner(True), "jax_jit": jax_runner()}


# --8<-- [start:parts]
def eager_step_parts(hidden: int, batch: int, dev: str, dtype, steps: int) -> dict:
    """Where the wall time of one eager training step goes, phase by phase on the host clock:
    the host returns from each phase once its kernels are queued, and the final synchronize
    waits for whatever the GPU has not finished. Then the same steps back to back with no
    synchronize in between, as a real training loop runs them, and the kernels a step launches."""
    model = torch_mlp(hidden, dev, dtype)
    step = make_torch_step(model, compiled=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = (torch.randn(batch, hidden, device=dev, dtype=dtype) for _ in range(2))
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    phases = {"forward_and_loss": [], "backward": [], "optimizer_step": [], "zero_grad": [], "synchronize": []}
    for i in range(steps + 10):  # the first 10 are warm-up
        t = [time.perf_counter()]
        loss = F.mse_loss(model(x), y)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        opt.zero_grad()
        t.append(time.perf_counter())
        sync()
        t.append(time.perf_counter())
        if i >= 10:
            for phase, start, end in zip(phases, t, t[1:]):
                phases[phase].append((end - start) * 1e6)
    parts = {phase: summarize(us, "us", "host") for phase, us in phases.items()}
    parts["step_synchronized"] = summarize([sum(p) for p in zip(*phases.values())], "us", "host")
    parts["step_back_to_back"] = host_us(lambda: step(x, y), calls=steps, repeats=10, warmup=10)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])) as prof:
        for _ in range(10):
            step(x, y)
        sync()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    parts["kernels_per_step"] = len(kernels) / 10
    parts["gpu_busy_us"] = sum(e.time_range.elapsed_us() for e in kernels) / 10
    return parts


# --8<-- [end:parts]


def gpu_parts(run, steps: int) -> dict:
    """The GPU's side of one step, from a profile of `steps` calls of `run` (each waits for its step).
    The profiler's CUDA activity (CUPTI) records every kernel and copy on the GPU in this process, not
    only PyTorch's: XLA's kernels for the JAX step are seen too. Per step: how many, the time the GPU
    was busy with them (their intervals merged, so overlapping kernels count once) and the span from
    the step's first kernel start to its last kernel end."""
    mark = "one_training_step"  # on the host; its copy on the GPU's side of the trace is no kernel
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            with record_function(mark):
                run()
    events = prof.events()
    marks = sorted(e.time_range.start for e in events if e.name == mark and e.device_type == DeviceType.CPU)
    gpu = sorted(
        (e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CUDA and e.name != mark
    )
    busy, end = 0.0, float("-inf")
    for start, stop in gpu:  # the union of the intervals
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    per_step = [[k for k in gpu if a <= k[0] < b] for a, b in zip(marks, marks[1:] + [float("inf")])]
    spans = [max(k[1] for k in ks) - ks[0][0] for ks in per_step if ks]
    return {
        "kernels_per_step": len(gpu) / steps,
        "gpu_busy_us": busy / steps,
        "steps_profiled": steps,
        **({"gpu_span_us": sorted(spans)[len(spans) // 2]} if spans else {}),  # the median step's
    }


def first_call_s(run) -> float:
    start = time.perf_counter()
    run()  # tracing and compiling happen here
    return time.perf_counter() - start


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    jax_dev = jax.devices("gpu" if dev == "cuda" else "cpu")[0]  # the same kind of device as torch
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    # name: (hidden, batch, steps per timed repetition); small_mlp is overhead-bound, large_mlp GEMM-bound
    sizes = (
        {"small_mlp": (64, 16, 20), "large_mlp": (256, 64, 5)}
        if small
        else {"small_mlp": (1024, 256, 200), "large_mlp": (4096, 4096, 20)}
    )
    repeats = 5 if small else 20
    # Initialise CUDA, cuBLAS and JAX's backend before any timing, so no variant's first call pays for it.
    (torch.randn(64, 64, device=dev, requires_grad=True) @ torch.randn(64, 64, device=dev)).sum().backward()
    jax.device_put(jnp.ones(8), jax_dev).block_until_ready()

    configs = {}
    # Empty Inductor and Triton caches: the first call times a cold compile, as a new user's first
    # run. The small (CPU test) run keeps them: a cold Inductor cache spends ~16 s probing CPU ISAs.
    with contextlib.nullcontext() if small else fresh_cache():
        for name, (hidden, batch, calls) in sizes.items():
            params = LAYERS * (hidden * hidden + hidden)
            # Counted exactly for this model: each Linear's forward matmul and its weight gradient cost
            # 2*batch*hidden**2 each; the input gradient too, except the first layer's (the data needs
            # none). Each bias adds batch*hidden in the forward, and its gradient sums as many.
            # GELU, loss and the SGD update (elementwise) are not counted.
            flops = (6 * LAYERS - 2) * hidden * hidden * batch + 2 * LAYERS * hidden * batch
            runs = runners(hidden, batch, dev, dtype, jax_dev)
            first_s = {variant: first_call_s(run) for variant, run in runs.items()}
            # Steady time per step, the variants interleaved round by round so host drift hits all alike.
            # A step waits for the device each time: a training step is host work (Python, dispatch,
            # launches) plus device work, and neither hides behind the next step's.
            step_us = host_us_each(
                {variant: (run, contextlib.nullcontext) for variant, run in runs.items()},
                calls=calls,
                repeats=repeats,
                warmup=max(3, calls // 4),
            )
            variants = {
                variant: {
                    "first_call_s": first_s[variant],
                    "step_us": step_us[variant],
                    "TFLOPs": rate(step_us[variant], flops / 1e12, "TFLOP/s"),
                }
                for variant in runs
            }
            # Like a second run of the program: compiled code forgotten, Inductor's caches kept.
            torch._dynamo.reset()
            rerun = runners(hidden, batch, dev, dtype, jax_dev)["torch_compile"]
            variants["torch_compile"]["first_call_warm_cache_s"] = first_call_s(rerun)
            eager = variants["eager"]
            for v in (variants["torch_compile"], variants["jax_jit"]):
                # The k where first_call + (k-1)*step, summed wall time, drops below eager's; -1 if never.
                saved_s = (eager["step_us"]["median"] - v["step_us"]["median"]) * 1e-6
                v["amortises"] = saved_s > 0
                extra_s = v["first_call_s"] - eager["first_call_s"]
                v["steps_to_amortise"] = max(1.0, 1 + extra_s / saved_s) if saved_s > 0 else -1
            configs[name] = {
                "hidden": hidden,
                "layers": LAYERS,
                "batch": batch,
                "params": params,
                "flops_per_step": flops,
                "flops_6_params_batch": 6 * params * batch,  # the usual rule of thumb, for comparison
                "variants": variants,
            }
        # Profile last, after every size is timed: once the profiler has run, launches in this
        # process stay slower. The small step only: that is where the host sets the pace.
        hidden, batch, calls = sizes["small_mlp"]
        small_cfg = configs["small_mlp"]
        small_cfg["eager_parts"] = eager_step_parts(hidden, batch, dev, dtype, calls)  # times, then profiles
        if dev == "cuda":
            small_cfg["gpu_parts"] = {}
            for variant, run in runners(hidden, batch, dev, dtype, jax_dev).items():
                for _ in range(10):
                    run()  # compile (torch.compile's caches are warm by now) and warm up
                small_cfg["gpu_parts"][variant] = gpu_parts(run, steps=20)
    return {
        "repetitions": repeats,
        "device": dev,
        "jax_device": jax_dev.platform,
        "dtype": str(dtype)[6:],
        "flops_formula": "(6 * layers - 2) * hidden**2 * batch + 2 * layers * hidden * batch",
        "configs": configs,
        "notes": [] if dev == "cuda" else ["gpu_parts skipped: no GPU to profile"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"MLP training step ({r['dtype']}, SGD) on {device_name()}; JAX on {r['jax_device']}")
    for name, c in r["configs"].items():
        print(f"{name}: {c['layers']} x Linear({c['hidden']}), batch {c['batch']}, {c['params'] / 1e6:.2f} M params")
        for variant, v in c["variants"].items():
            s, k = v["step_us"], v.get("steps_to_amortise")
            pays = "" if k is None else f"  pays off after {k:,.0f} steps" if k > 0 else "  never pays off"
            print(
                f"  {variant:<14} first call {v['first_call_s']:6.2f} s   step {s['median']:9.1f} us "
                f"(p10 {s['p10']:.1f}, p90 {s['p90']:.1f})  {v['TFLOPs']['median']:7.3f} TFLOP/s{pays}"
            )
        if "eager_parts" in c:
            parts = c["eager_parts"]
            print("  eager step, phase by phase (host us, median):")
            for phase, v in parts.items():
                print(f"    {phase:<18} {v['median'] if isinstance(v, dict) else v:9.1f}")
        for variant, g in c.get("gpu_parts", {}).items():
            print(
                f"  {variant:<14} GPU per step: {g['kernels_per_step']:.0f} kernels and copies, busy "
                f"{g['gpu_busy_us']:.1f} us, first kernel start to last end {g['gpu_span_us']:.1f} us"
            )
