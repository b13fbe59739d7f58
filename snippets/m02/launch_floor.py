"""What the launch itself costs the host, separated from dispatch and allocation: the variants
module 02's first figure could not tell apart."""

# --8<-- [start:imports]
import contextlib

import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # host-side numbers: the build job runs this snippet in three fresh processes

# --8<-- [start:constants]
NUMEL = 1024  # the same tiny add as host_overhead.py


# --8<-- [end:constants]


# --8<-- [start:variants]
def variants(dev: str) -> dict:
    """name -> (what is timed, the grad mode it runs under)."""
    a, b = torch.randn(NUMEL, device=dev), torch.randn(NUMEL, device=dev)
    out = torch.empty_like(a)
    found = {
        # grad mode on, but no input requires grad: the common case in eager inference code
        "add_grad_mode_plain_inputs": (lambda: torch.add(a, b), contextlib.nullcontext),
        "add_inference_out": (lambda: torch.add(a, b, out=out), torch.inference_mode),
        # dispatcher and caching allocator, but no kernel: the launch is what is missing
        "empty_no_launch": (lambda: torch.empty(NUMEL, device=dev), torch.inference_mode),
    }
    if dev == "cuda":
        # a kernel launch with almost nothing around it: no dispatcher, no TensorIterator
        found["bare_launch"] = (lambda: torch.cuda._sleep(0), contextlib.nullcontext)
    return found


# --8<-- [end:variants]


def measure(small: bool = False) -> dict:
    calls, repeats = (50, 5) if small else (2000, 50)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "numel": NUMEL,
        "device": dev,
        "host_us": host_us_each(variants(dev), calls=calls, repeats=repeats),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"host us per call on {device_name()}")
    for name, s in r["host_us"].items():
        print(f"  {name:<28} {s['median']:7.2f} us   (p10 {s['p10']:.2f}, p90 {s['p90']:.2f})")
