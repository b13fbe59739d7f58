"""Why is torch.compile's default mode slower than eager on module 01's small training step?
The same step with only the model compiled, only the optimizer compiled, both, and both with
CUDA graphs (mode="reduce-overhead"): steady time per step and device kernels per step."""

# --8<-- [start:imports]
import contextlib

import torch
import torch.nn.functional as F

# --8<-- [end:imports]
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from train_step import LR, torch_mlp  # the same model and learning rate as train_step.py

from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # host-side numbers: the build job runs this snippet in three fresh processes


# --8<-- [start:variants]
def make_step(model, compile_model: str | None, compile_optimizer: bool, lr: float):
    """compile_model: None (eager) or a torch.compile mode;
    compile_optimizer: compile opt.step."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    forward = model if compile_model is None else torch.compile(model, mode=compile_model, dynamic=False)
    update = torch.compile(opt.step, dynamic=False) if compile_optimizer else opt.step

    def step(x, y):
        F.mse_loss(forward(x), y).backward()
        update()
        opt.zero_grad()

    return step


# name: (model's compile mode or None, compile the optimizer step?)
VARIANTS = {
    "eager": (None, False),
    "model_only": ("default", False),
    "optimizer_only": (None, True),
    "both": ("default", True),
    "both_reduce_overhead": ("reduce-overhead", True),
}
# --8<-- [end:variants]


def kernels_per_step(run, steps: int, cuda: bool) -> float:
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            run()
    return sum(e.device_type == DeviceType.CUDA for e in prof.events()) / steps


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    hidden, batch = (64, 16) if small else (1024, 256)  # train_step.py's small_mlp
    calls, repeats = (5, 3) if small else (200, 20)
    names = [n for n in VARIANTS if cuda or "reduce_overhead" not in n]  # CUDA graphs need CUDA
    x, y = (torch.randn(batch, hidden, device=dev, dtype=dtype) for _ in range(2))
    runs = {}
    for name in names:
        step = make_step(torch_mlp(hidden, dev, dtype), *VARIANTS[name], lr=LR)

        def run(step=step):
            step(x, y)
            if cuda:
                torch.cuda.synchronize()

        for _ in range(5):
            run()  # compile, and for reduce-overhead, record the CUDA graphs
        runs[name] = run
    step_us = host_us_each(
        {n: (r, contextlib.nullcontext) for n, r in runs.items()},
        calls=calls,
        repeats=repeats,
        warmup=max(3, calls // 4),
    )
    # Profile last: once the profiler has run, launches in this process stay slower.
    kernels = {n: kernels_per_step(r, 5 if small else 20, cuda) for n, r in runs.items()}
    return {
        "repetitions": repeats,
        "hidden": hidden,
        "batch": batch,
        "dtype": str(dtype)[6:],
        "step_us": step_us,
        "kernels_per_step": kernels,
        "notes": [] if cuda else ["reduce-overhead skipped: it needs CUDA; no device kernels on a CPU"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"training step, hidden {r['hidden']}, batch {r['batch']}, {r['dtype']}, on {device_name()}")
    for name, s in r["step_us"].items():
        print(
            f"  {name:<22} {s['median']:9.1f} us/step (p10 {s['p10']:.1f}, p90 {s['p90']:.1f})"
            f"  {r['kernels_per_step'][name]:5.1f} kernels/step"
        )
