"""What Inductor makes of a norm + activation + residual block, y = x + gelu(layer_norm(x) * w + b),
on a tensor larger than the H200's L2 (16,384 x 4,096 bf16, 128 MiB): the kernels it generates
(read from its output code), the bytes its scheduler counts for them against the least the math
needs (read x once, write y once, read w and b), the scheduler's refusals to fuse (its debug log),
and device time for the compiled block, the same block in eager mode (one kernel per op) and a
copy of x of the same size. GB/s are the minimum bytes over the time; the chapter sets them
against the copy peak of methodology/ceilings.

On a GPU the block compiles to one Triton reduction kernel: rows of 4,096 are past the 1,024
up to which Inductor keeps a whole row in registers (a "persistent" reduction, InductorChoices.
should_use_persistent_reduction in torch/_inductor/choices.py), so the kernel loops over each row
twice, once for the mean and variance and once to write y, loading x again the second time (the
first pass loads it with an evict_last hint, so that the second finds it in L2). The kernels'
source is stored. On a CPU Inductor writes C++ instead, and one C++ function can hold several
loop nests."""

# --8<-- [start:imports]
import logging
import re

import torch
import torch.nn.functional as F
from torch._inductor import metrics
from torch._inductor.utils import run_and_get_code

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us, rate

PROCESSES = 1  # one process: the times are device times (CUDA events); kernel and byte counts are deterministic


# --8<-- [start:block]
def block(x, w, b):
    return x + F.gelu(F.layer_norm(x, x.shape[-1:], w, b))


def min_bytes(x, *params) -> int:
    """The least any implementation moves: x read once, y (x's size) written once, parameters read once."""
    return 2 * x.numel() * x.element_size() + sum(p.numel() * p.element_size() for p in params)


# --8<-- [end:block]


# --8<-- [start:inspect]
class FusionLog(logging.Handler):
    """While installed (a context manager): keeps the scheduler's refusals to fuse ("cannot fuse
    op3 with op4: memory deps did not match", its `fusion` debug log), and has Inductor count the
    bytes its kernels read and write into metrics.num_bytes_accessed (it does so only while its
    `inductor_metrics` log is on)."""

    LOGGERS = ("torch._inductor.scheduler.__fusion", "torch._inductor.compile_fx.__inductor_metrics")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.refused = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("cannot fuse"):
            self.refused.append(message)

    def __enter__(self):
        self.before = [(logging.getLogger(n), logging.getLogger(n).level) for n in self.LOGGERS]
        for log, _ in self.before:
            log.setLevel(logging.DEBUG)
            log.addHandler(self)
        return self

    def __exit__(self, *exc):
        for log, level in self.before:
            log.removeHandler(self)
            log.setLevel(level)


KERNEL = re.compile(r"^(\w+) = async_compile\.(?:triton|cpp_pybinding)\(", re.M)  # a generated kernel
SOURCE = re.compile(r"async_compile\.(?:triton|cpp_pybinding)\(.*?'''\n?(.*?)'''", re.S)  # its source


def inductor_view(fn, *args) -> tuple:
    """Compile fn for these inputs, bypassing the compiled-graph cache so that the scheduler runs
    and logs: the compiled function, and what Inductor made of it."""
    metrics.reset()
    with FusionLog() as log, torch._inductor.config.patch(fx_graph_cache=False):
        compiled = torch.compile(fn, fullgraph=True, dynamic=False)
        _, (code,) = run_and_get_code(compiled, *args)  # one graph, one module of output code
    reasons = {}
    for message in log.refused:
        why = message.split(": ", 1)[1]
        reasons[why] = reasons.get(why, 0) + 1
    return compiled, {
        "kernels": KERNEL.findall(code),
        "sources": SOURCE.findall(code),
        "inductor_bytes": metrics.num_bytes_accessed,
        "refused": sorted(set(log.refused)),
        "refusal_reasons": reasons,
    }


# --8<-- [end:inspect]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    rows, d = (64, 256) if small else (16384, 4096)
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    x = torch.randn(rows, d, device=dev, dtype=dtype)
    w, b = torch.randn(d, device=dev, dtype=dtype), torch.randn(d, device=dev, dtype=dtype)
    with torch.no_grad():
        compiled, found = inductor_view(block, x, w, b)
        torch.testing.assert_close(compiled(x, w, b), block(x, w, b), atol=5e-2, rtol=2e-2)
        out = torch.empty_like(x)
        times = {
            "compiled": gpu_us(lambda: compiled(x, w, b)),
            "eager": gpu_us(lambda: block(x, w, b)),
            "copy": gpu_us(lambda: out.copy_(x)),  # the same bytes as the minimum, less w and b
        }
    torch._dynamo.reset()
    need = min_bytes(x, w, b)
    tensor = x.numel() * x.element_size()
    return {
        "repetitions": min(t["n"] for t in times.values()),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "rows": rows,
        "d": d,
        "tensor_bytes": tensor,
        "min_bytes": need,
        "eager_bytes": 7 * tensor + 2 * w.numel() * w.element_size(),
        **found,
        "kernel_count": len(found["kernels"]),
        "time_us": times,
        "copy_bytes": 2 * tensor,
        "GBps": {name: rate(t, (2 * tensor if name == "copy" else need) / 1e9, "GB/s") for name, t in times.items()},
        "notes": [
            "min_bytes: x read once, y written once, w and b read once",
            "eager_bytes: layer_norm reads x and writes h, gelu reads h and writes g, the add reads x and g and "
            "writes y: 7 tensors (layer_norm's per-row mean and rstd left out)",
            "inductor_bytes: torch._inductor.metrics.num_bytes_accessed, what the scheduler counts for its kernels "
            "(each buffer a kernel reads or writes, once per kernel: a second pass over x in one kernel is not in it)",
            "GBps: min_bytes over the block's times (compiled, eager); copy_bytes (x read, out written) over the copy",
            "on a CPU the generated kernels are C++ (cpp_fused_*), and the times are host times at a small size",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"x + gelu(layer_norm(x)), {r['rows']} x {r['d']} {r['dtype']}, on {device_name()}")
    print(f"  kernels ({r['kernel_count']}): {', '.join(r['kernels'])}")
    mib = 2**20
    print(f"  MiB: minimum {r['min_bytes'] / mib:.2f}, as Inductor counts {r['inductor_bytes'] / mib:.2f}", end="")
    print(f", eager {r['eager_bytes'] / mib:.2f}")
    print(f"  fusions refused: {r['refusal_reasons'] or 'none'}")
    for name, t in r["time_us"].items():
        print(f"  {name:<9} {t['median']:9.1f} us  {r['GBps'][name]['median']:8.1f} GB/s")
