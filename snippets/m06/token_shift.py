"""A partition that leaves bytes on the table, and a rewrite that recovers them. The block is a
norm, a token shift and an activation with a residual, as RWKV's time mixing does it: each row
t of the normalized input is mixed with row t - 1, h + (shift(h) - h) * mu, before the GELU.

Inductor cannot fuse the norm into its consumer: the consumer reads the norm's output at two
rows, t and t - 1, and the write (row t) and the reads do not match, so Scheduler.can_fuse_vertical
(torch/_inductor/scheduler.py) refuses ("memory deps did not match"). The normalized tensor is
written out whole and read back: x is read twice and h written once and read once, five tensors
of traffic where two would do. The rewrite uses the fact that the norm is per row: shift(norm(x))
is norm(shift(x)) (row 0 zeroed), so the consumer computes both rows' norms itself from x, reading
x at t and t - 1, and every read matches a write again. Same values, a second reduction per row,
and one kernel on a GPU. Device times on 4 x 4,096 x 4,096 bf16 (128 MiB), beyond the L2."""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F

# --8<-- [end:imports]
# isort: split
from norm_block import inductor_view, min_bytes  # the same inspection as norm_block.py

from coursekit.bench import device_name, gpu_us, rate

PROCESSES = 1  # one process: the times are device times (CUDA events); kernel and byte counts are deterministic

# How Inductor's scheduler decides (torch 2.11, torch/_inductor/): Scheduler.get_possible_fusions lists
# the pairs that Scheduler.can_fuse allows and sorts them by Scheduler.score_fusion_key, that is by
# InductorChoices.score_fusion (choices.py: template, then same kind, then the bytes both nodes touch as
# Scheduler.score_fusion_memory counts them, then closeness); can_fuse asks InductorChoices.can_fuse,
# then Scheduler.can_fuse_vertical for producer and consumer, then the backend (SIMDScheduling.can_fuse
# in codegen/simd.py for Triton, CppScheduling.can_fuse_vertical in codegen/cpp.py for C++).
# The rules behind the refusals the scheduler logs:
RULES = {
    "memory deps did not match": "Scheduler.can_fuse_vertical (scheduler.py): a read of node1's output "
    "that no write of node1 matches index for index",
    "intermediate nodes between node1 & node2": "Scheduler.can_fuse_vertical (scheduler.py): node2 also "
    "needs a node that itself depends on node1",
    "no shared data": "InductorChoices.can_fuse (choices.py): Scheduler.score_fusion_memory found no buffer "
    "both nodes touch",
}


# --8<-- [start:blocks]
def shift(h):
    """Row t gets row t - 1 of h; row 0 gets zeros (RWKV's nn.ZeroPad2d((0, 0, 1, -1)))."""
    return F.pad(h, (0, 0, 1, -1))


def token_shift(x, w, b, mu):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    return x + F.gelu(h + (shift(h) - h) * mu)


def token_shift_rewritten(x, w, b, mu):
    """The same values: the norm of the shifted rows instead of the shifted norm, row 0 zeroed."""
    h = F.layer_norm(x, x.shape[-1:], w, b)
    hs = F.layer_norm(shift(x), x.shape[-1:], w, b)
    first = torch.arange(x.shape[-2], device=x.device)[:, None] == 0
    return x + F.gelu(h + (hs.masked_fill(first, 0.0) - h) * mu)


# --8<-- [end:blocks]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    batch, seq, d = (2, 16, 256) if small else (4, 4096, 4096)
    if not cuda:
        torch.set_num_threads(1)  # compiled C++ kernels bring their own OpenMP pool; two would fight
    torch.manual_seed(0)
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype)
    w, b, mu = (torch.randn(d, device=dev, dtype=dtype) for _ in range(3))
    args = (x, w, b, mu)
    variants = {}
    with torch.no_grad():
        reference = token_shift(*args).float()
        for name, fn in (("original", token_shift), ("rewritten", token_shift_rewritten)):
            compiled, found = inductor_view(fn, *args)
            error = (compiled(*args).float() - reference).abs().max().item()
            variants[name] = {
                **found,
                "kernel_count": len(found["kernels"]),
                "rules": {why: RULES.get(why, "") for why in found["refusal_reasons"]},
                "max_abs_error": error,
                "time_us": gpu_us(lambda compiled=compiled: compiled(*args)),
            }
        eager_us = gpu_us(lambda: token_shift(*args))
    torch._dynamo.reset()
    need = min_bytes(x, w, b, mu)
    for v in variants.values():
        v["GBps"] = rate(v["time_us"], need / 1e9, "GB/s")
    return {
        "repetitions": min(v["time_us"]["n"] for v in variants.values()),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": {"batch": batch, "seq": seq, "d": d},
        "tensor_bytes": x.numel() * x.element_size(),
        "min_bytes": need,
        "variants": variants,
        "eager_time_us": eager_us,
        "notes": [
            "min_bytes: x read once, y written once, w, b and mu read once; GBps: min_bytes over each time",
            "inductor_bytes: torch._inductor.metrics.num_bytes_accessed, each buffer once per kernel that reads or "
            "writes it (x read again for row t - 1 inside the same kernel is not counted twice)",
            "max_abs_error: compiled variant against eager token_shift, in float32",
            "refusal_reasons: the scheduler's fusion log, reason -> times logged; rules: where the reason is decided",
            "on a CPU, Inductor generates C++ and fuses differently (one C++ function can hold several loop nests, "
            "and the rewrite does not save bytes there); the kernel counts and times that make the point are a GPU's",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    s = r["shape"]
    print(f"norm, token shift, GELU, residual: {s['batch']} x {s['seq']} x {s['d']} {r['dtype']}, on {device_name()}")
    print(f"  minimum bytes {r['min_bytes'] / 2**20:.1f} MiB; eager {r['eager_time_us']['median']:.1f} us")
    print(f"  {'variant':<10}{'kernels':>8}{'tensors moved':>15}{'us':>10}{'GB/s':>9}{'max error':>11}")
    for name, v in r["variants"].items():
        moved = v["inductor_bytes"] / r["tensor_bytes"]  # in tensors of x's size, as Inductor counts them
        print(
            f"  {name:<10}{v['kernel_count']:>8}{moved:>15.2f}{v['time_us']['median']:>10.1f}"
            f"{v['GBps']['median']:>9.1f}{v['max_abs_error']:>11.1e}"
        )
        for why, rule in v["rules"].items():
            print(f"    refused {v['refusal_reasons'][why]}x: {why}  [{rule.split(' (')[0]}]")
