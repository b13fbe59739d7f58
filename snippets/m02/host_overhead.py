"""Host microseconds per torch.add on tiny tensors, removing one layer of eager mode at a time."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # host-side numbers: the build job runs this snippet in three fresh processes

# --8<-- [start:constants]
NUMEL = 1024  # 4 KB per tensor: a tiny kernel, so we see the host's work


# --8<-- [end:constants]


# --8<-- [start:variants]
def variants(dev: str) -> dict:
    """Tiny adds on dev, each variant without one more layer.
    name -> (what is timed, its grad mode)."""
    a, b = torch.randn(NUMEL, device=dev), torch.randn(NUMEL, device=dev)
    a_grad, b_grad = a.clone().requires_grad_(), b.clone().requires_grad_()
    out = torch.empty_like(a)
    cpu_a, cpu_b = a.cpu(), b.cpu()
    aten_add = torch.ops.aten.add.Tensor
    return {
        "requires_grad": (
            lambda: torch.add(a_grad, b_grad),
            contextlib.nullcontext,
        ),
        "no_grad": (lambda: torch.add(a, b), torch.no_grad),
        "inference_mode": (lambda: torch.add(a, b), torch.inference_mode),
        "out_no_alloc": (
            lambda: torch.add(a, b, out=out),
            torch.inference_mode,
        ),
        "aten_op_direct": (lambda: aten_add(a, b), torch.inference_mode),
        "cpu_tensors": (lambda: torch.add(cpu_a, cpu_b), torch.inference_mode),
        "python_call": (lambda: None, contextlib.nullcontext),
    }


# --8<-- [end:variants]


def measure(small: bool = False) -> dict:
    calls, repeats = (50, 5) if small else (2000, 50)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    host = host_us_each(variants(dev), calls=calls, repeats=repeats)
    return {"repetitions": repeats, "calls_per_repetition": calls, "numel": NUMEL, "device": dev, "host_us": host}


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"host us per torch.add of {r['numel']} floats on {device_name()}")
    for name, s in r["host_us"].items():
        print(f"  {name:<16} {s['median']:7.2f} us   (p10 {s['p10']:.2f}, p90 {s['p90']:.2f})")
