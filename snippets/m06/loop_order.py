"""Does a transposed read stop a fusion? Inductor's loop ordering after fusion, on and off.

Two nodes fuse when the scheduler finds data they share: a buffer one writes and the other reads,
or an input both read, indexed the same way. A node that walks a buffer in transposed order has
indices that do not match, and on that test alone the fusion is refused. From torch 2.10,
Inductor's scheduler tries one more thing before it gives up (config.loop_ordering_after_fusion,
on by default outside fbcode; Scheduler.shared_data_after_reordering_loop in
torch/_inductor/scheduler.py): where two nodes share a buffer that they walk in different orders,
it reorders the loops of the pointwise node to the other's order, and asks again. On a CPU it is
skipped, so this measurement is a GPU's.

Two cases, each compiled with the setting on and off, on 8,192 x 8,192 bf16 (128 MiB, beyond the
L2), all four timed in the same interleaved rounds:
- "sum_and_t": a row sum of x and x transposed into a new tensor, two outputs of one graph. Both
  read x; the transposed copy walks it column by column.
- "out_and_add_t": b = y * 3 is an output, and x + b.t() reads it transposed.
For each: the kernels Inductor generated, the bytes its kernels move as it counts them, and the
device time per call."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
# isort: split
from norm_block import inductor_view  # noqa: E402  (the same inspection as norm_block.py)

from coursekit.bench import device_name, gpu_us_each  # noqa: E402

PROCESSES = 1  # one process: the times are device times (CUDA events); kernel and byte counts are deterministic


# --8<-- [start:cases]
def sum_and_t(x, y):
    return x.sum(dim=-1), x.t().contiguous()


def out_and_add_t(x, y):
    b = y * 3
    return b, x + b.t()


# --8<-- [end:cases]
CASES = {"sum_and_t": sum_and_t, "out_and_add_t": out_and_add_t}


def compiled_with(fn, args, reorder: bool):
    """fn compiled with loop ordering after fusion on or off, and what Inductor made of it."""
    torch._dynamo.reset()  # the setting is not part of a compiled graph's guards: compile afresh
    with torch._inductor.config.patch(loop_ordering_after_fusion=reorder):
        return inductor_view(fn, *args)


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    n = 64 if small else 8192
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    x, y = (torch.randn(n, n, device=dev, dtype=dtype) for _ in range(2))
    tensor = x.numel() * x.element_size()
    cases, calls = {}, {}
    with torch.no_grad():
        for case, fn in CASES.items():
            expected = fn(x, y)
            for reorder in (True, False):
                compiled, found = compiled_with(fn, (x, y), reorder)
                for got, want in zip(compiled(x, y), expected):
                    torch.testing.assert_close(got, want, atol=0.5, rtol=2e-2)  # a bf16 sum of 8,192
                name = f"{case}/{'reorder' if reorder else 'no_reorder'}"
                cases[name] = {
                    "kernels": found["kernels"],
                    "kernel_count": len(found["kernels"]),
                    "sources": found["sources"],
                    "inductor_bytes": found["inductor_bytes"],
                    "refused": found["refused"],
                }
                calls[name] = lambda compiled=compiled: compiled(x, y)
        times = gpu_us_each(calls, rounds=15)
    torch._dynamo.reset()
    for name, c in cases.items():
        c["time_us"] = times[name]
    return {
        "repetitions": min(t["n"] for t in times.values()),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "n": n,
        "tensor_bytes": tensor,
        "default": torch._inductor.config.loop_ordering_after_fusion,
        "cases": cases,
        "notes": [
            "name: case/reorder (torch._inductor.config.loop_ordering_after_fusion=True, the default) or "
            "case/no_reorder (False); each compiled afresh (torch._dynamo.reset) with the FX graph cache off",
            "inductor_bytes: torch._inductor.metrics.num_bytes_accessed, each buffer once per kernel that reads or "
            "writes it",
            "tensor_bytes: one n x n tensor; sum_and_t must read x once and write x's size once (the row sums "
            "are small); out_and_add_t must read x and y once and write two tensors",
            "on a CPU the scheduler skips loop reordering (Scheduler.shared_data_after_reordering_loop returns "
            "early for CPU nodes), so both settings give the same code there",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"loop ordering after fusion, {r['n']} x {r['n']} {r['dtype']} on {device_name()} (default: {r['default']})")
    print(f"{'case':<26}{'kernels':>8}{'MiB moved':>11}{'µs':>9}")
    for name, c in r["cases"].items():
        mib = c["inductor_bytes"] / 2**20
        print(f"{name:<26}{c['kernel_count']:>8}{mib:>11.0f}{c['time_us']['median']:>9.1f}")
