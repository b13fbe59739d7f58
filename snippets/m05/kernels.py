"""The bottom rung of the ladder: what Inductor makes of the transformer block of ladder.py for one
training step. Its IR before fusion (the scheduler's nodes: each a loop nest over one buffer, or a
call into a library, with pointwise ops already inlined into their consumers), and its output code:
the kernels it generates (Triton on a GPU, C++ on a CPU) and the library calls left between them
(matrix products, attention), forward and backward. Timed: one training step, compiled and eager
(device time on a GPU; host time at a small size on a CPU)."""

# --8<-- [start:imports]
import re

import torch
from torch._inductor import metrics
from torch._inductor.utils import run_and_get_code

# --8<-- [end:imports]
# isort: split
from ladder import Block  # the block of ladder.py

from coursekit.bench import device_name, gpu_us

PROCESSES = 1  # counts are deterministic; the step times are device times (CUDA events) on a GPU


# --8<-- [start:kernels]
KERNEL = re.compile(r"^(\w+) = async_compile\.(?:triton|cpp_pybinding)\(", re.M)  # a generated kernel
LIBRARY = re.compile(r"(extern_kernels\.\w+|torch\.ops\.aten\.\w+\.\w+)\(")  # a library call: cuBLAS, attention


def inductor_code(model, x) -> list[str]:
    """The Python modules Inductor writes for one training step: forward, then backward."""

    def step():
        model.zero_grad(set_to_none=True)
        torch.compile(model, fullgraph=True)(x).sum().backward()

    return run_and_get_code(step)[1]  # run_and_get_code resets Dynamo first


def calls(code: str) -> dict:
    """The kernels one output module defines, and the library calls it makes, by name."""
    return {"kernels": KERNEL.findall(code), "library_calls": LIBRARY.findall(code)}


# --8<-- [end:kernels]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    batch, seq, d, heads = (2, 16, 64, 4) if small else (4, 2048, 2048, 16)
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    model = Block(d, heads).to(dev, dtype)
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype, requires_grad=True)

    metrics.reset()
    fw_code, bw_code = inductor_code(model, x)
    ir_nodes = metrics.ir_nodes_pre_fusion  # read before anything else compiles
    graphs = {"forward": calls(fw_code), "backward": calls(bw_code)}
    compiled = torch.compile(model, fullgraph=True)

    def step(fn):
        model.zero_grad(set_to_none=True)
        fn(x).sum().backward()

    step(compiled)  # compiles again, from Inductor's caches, before any timing
    times = {"compiled": gpu_us(lambda: step(compiled)), "eager": gpu_us(lambda: step(model))}
    torch._dynamo.reset()
    return {
        "repetitions": min(t["n"] for t in times.values()),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": {"batch": batch, "seq": seq, "d_model": d, "heads": heads},
        "ir_nodes_before_fusion": ir_nodes,
        "graphs": graphs,
        "kernel_count": {part: len(g["kernels"]) for part, g in graphs.items()},
        "library_call_count": {part: len(g["library_calls"]) for part, g in graphs.items()},
        "step_time_us": times,
        "notes": [
            "ir_nodes_before_fusion: torch._inductor.metrics.ir_nodes_pre_fusion, the scheduler's nodes before it "
            "fuses, forward and backward together (pointwise ops are inlined into consumers before that)",
            "kernels: the kernel definitions in each output module (Triton on a GPU; C++ on a CPU, where one C++ "
            "function can hold several loop nests); library_calls: extern kernels and ATen ops called from it",
            "step_time_us: forward + backward + zeroing the gradients, compiled and eager",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    s = r["shape"]
    print(
        f"transformer block, batch {s['batch']} x seq {s['seq']} x d {s['d_model']}, {r['dtype']}, on {device_name()}"
    )
    print(f"  Inductor IR before fusion: {r['ir_nodes_before_fusion']} nodes (forward + backward)")
    for part, g in r["graphs"].items():
        print(f"  {part:<8} {len(g['kernels']):>3} kernels, {len(g['library_calls']):>3} library calls")
        print(f"           {', '.join(g['kernels'])}")
    for name, t in r["step_time_us"].items():
        print(f"  training step, {name:<8} {t['median']:10.1f} us")
