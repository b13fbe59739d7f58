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
from torch.profiler import ProfilerActivity, profile

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
    if compiled:  # the recipe in PyTorch's docs: compile the model, and the optimizer step apart
        # dynamic=False: the second model size would otherwise get a dynamic-shape graph.
        forward, update = torch.compile(model, dynamic=False), torch.compile(opt.step, dynamic=False)

    def step(x, y):
        loss = F.mse_loss(forward(x), y)
        loss.backward()  # runs the backward graph AOTAutograd compiled with the forward
        update()
        opt.zero_grad()
        return loss

    return step


# --8<-- [end:torch_step]


# --8<-- [start:jax_step]
def mlp(params, x):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:  # a Python `if` on the list's length, not on data: fine under jit
            x = jax.nn.gelu(x, approximate=False)  # the exact erf form, as torch.nn.GELU()
    return x


def sgd_step(params, x, y):  # pure: the new weights come back as a value
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((mlp(p, x) - y) ** 2))(params)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads), loss


jax_step = jax.jit(sgd_step, donate_argnums=0)  # donate: reuse the old weights' buffers, as torch does
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
            flops = 6 * params * batch  # forward 2*params*batch, backward twice that (GELU, loss, SGD ignored)
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
                **({"eager_parts": eager_step_parts(hidden, batch, dev, dtype, calls)} if name == "small_mlp" else {}),
                "hidden": hidden,
                "layers": LAYERS,
                "batch": batch,
                "params": params,
                "flops_per_step": flops,
                "variants": variants,
            }
    return {
        "repetitions": repeats,
        "device": dev,
        "jax_device": jax_dev.platform,
        "dtype": str(dtype)[6:],
        "flops_formula": "6 * params * batch",
        "configs": configs,
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
