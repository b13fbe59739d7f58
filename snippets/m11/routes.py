"""Four ways to run the experts of one MoE layer forward, the routing given, each as TFLOP/s against a
dense GEMM chain of the same FLOPs; and the parts: the sort-permute, the unpermute, the host sync.

The layer (_moe.py): "mixtral", hidden 4096, FFN 14336, 8 experts, top-2; "qwen3", hidden 2048, FFN
768, 128 experts, top-8; SwiGLU experts, bf16; 4,096 and 16,384 tokens, routed by the random router
(random activations and gate). The routes, all from _moe.py, all ending in the same weighted sum of
each token's k expert outputs:

- "loop": sort by expert, copy the counts to the host (offsets.tolist(), the host sync), then one
  expert at a time: its rows' x @ w13[e], SwiGLU, @ w2[e];
- "padded_bmm": every expert gets capacity = ceil(1.25 T k / E) rows (capacity factor 1.25), tokens
  past it dropped (first come, first served), empty rows zeros; two torch.bmm over [E, capacity, .];
- "grouped_torch": sort-permute, then torch._grouped_mm for w13 and for w2 (dropless, no sync);
- "triton_grouped": the same with the course's Triton grouped GEMM (_grouped_gemm.py, autotuned).

"dense": swiglu(x_rows @ w13[0]) @ w2[0] on T k random rows: the FLOPs of the experts (6 T k h f) in
two big GEMMs, the yardstick. TFLOP/s count those useful FLOPs for every route (padded_bmm also
computes its padding: its executed FLOPs are stored). The parts, timed in the same rounds:
"permute" (sort by expert and gather the rows) and "unpermute" (scatter back, weighted sum), and
"loop_counts_known", the loop given the counts already on the host: per round, loop minus it is what
the sync costs the layer on the device clock. The sync alone on the host clock: offsets.tolist() with
the GPU idle (coursekit.bench.host_us). Device clock otherwise: gpu_us_each, 10 interleaved rounds,
so that the ratios are paired. Also stored: each route's largest difference from an fp32 loop over
the experts (padded_bmm: over the tokens it kept whole), the tokens the capacity dropped, and, on a
GPU, the synchronizing calls in one call of each route (torch.cuda.set_sync_debug_mode("warn"),
messages verbatim) and its kernel launches (torch.profiler, counted after all timing).

The races: sort-permute + grouped GEMM (whole layer, torch's and Triton's) against the loop at both
shapes: at the qwen3 shape (many small experts) the target is 3x, at the mixtral shape (8 large
experts, where the loop's launches are few) it is 1x, level with the loop. On the CPU: tiny shapes
(_moe.SMALL_SHAPES) in float16, one token count."""

# --8<-- [start:imports]
import os
import warnings

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
# isort: split
from _moe import (
    SHAPES,
    SMALL_SHAPES,
    SMALL_TOKENS,
    TOKENS,
    capacity_for,
    dense_ffn,
    expert_flops,
    experts_grouped,
    experts_grouped_triton,
    experts_loop,
    experts_padded,
    make_layer,
    permute,
    queue_slots,
    route,
    sort_by_expert,
    timed,
    unpermute,
)

from coursekit.bench import device_name, host_us, rate, summarize

try:  # Liger Kernel's fused MoE (pure Triton; pip install liger-kernel): raced where it is installed
    if not torch.cuda.is_available():  # its autotuner would time candidates on a GPU: one config each
        os.environ.setdefault("LIGER_FUSED_MOE_AUTOTUNE", "0")
    from liger_kernel.ops.fused_moe import LigerFusedMoEFunction
except ImportError:
    LigerFusedMoEFunction = None
else:
    from importlib.metadata import version

    LIGER_MOE = f"Liger Kernel {version('liger-kernel')} fused MoE"

PROCESSES = 1  # one process: the route times are device-side (CUDA events); the sync's host time is one number of many
CAPACITY_FACTOR = 1.25
ROUNDS = 10
ROUTES = ["loop", "padded_bmm", "grouped_torch", "triton_grouped"] + (["liger_fused"] if LigerFusedMoEFunction else [])
RACE_TARGETS = {"qwen3": 3.0, "mixtral": 1.0}  # many small experts: 3x the loop; 8 large ones: level with it


# --8<-- [start:variants]
def variants(x, ids, weights, layer, capacity) -> dict:
    """Every timed call for one routing: the four routes, the yardstick and the parts."""
    w13, w2 = layer["w13"], layer["w2"]
    order, offsets = sort_by_expert(ids, w13.shape[0])
    ends = offsets.tolist()  # for the loop without its sync: the counts fetched once, here
    out_sorted = torch.randn(ids.numel(), x.shape[1], device=x.device, dtype=x.dtype)  # an unpermute's input
    x_rows = torch.randn(ids.numel(), x.shape[1], device=x.device, dtype=x.dtype)  # the dense chain's input
    liger = {}
    if LigerFusedMoEFunction is not None:  # its layout: w13 as [E, 2f, h], w2 as [E, h, f]; int32 ids
        w13_t, w2_t, ids32 = w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous(), ids.int()
        liger["liger_fused"] = lambda: LigerFusedMoEFunction.apply(x, w13_t, w2_t, ids32, weights)
    return {
        "dense": lambda: dense_ffn(x_rows, w13[0], w2[0]),
        "loop": lambda: experts_loop(x, ids, weights, w13, w2),
        "loop_counts_known": lambda: experts_loop(x, ids, weights, w13, w2, ends),
        "padded_bmm": lambda: experts_padded(x, ids, weights, w13, w2, capacity),
        "grouped_torch": lambda: experts_grouped(x, ids, weights, w13, w2),
        "triton_grouped": lambda: experts_grouped_triton(x, ids, weights, w13, w2),
        "permute": lambda: permute(x, sort_by_expert(ids, w13.shape[0])[0], ids.shape[1]),
        "unpermute": lambda: unpermute(out_sorted, order, weights),
        **liger,
    }


# --8<-- [end:variants]


# --8<-- [start:syncs]
def synchronizing_calls(fn) -> list[str]:
    """The warnings of torch.cuda.set_sync_debug_mode("warn") during one call of fn: one per call
    that made the host wait for the GPU (a copy to the host, .item(), .tolist(), ...)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message)]


# --8<-- [end:syncs]


def kernels_per_call(fn) -> int:
    """CUDA kernels (and copies) one call of fn launches, from the profiler."""
    fn()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)


def setup(name, shape, tokens, dev, dtype):
    layer = make_layer(shape, dev, dtype)
    x = torch.randn(tokens, shape["hidden"], device=dev, dtype=dtype)
    ids, weights = route(x, layer["gate"], shape["top_k"])
    return layer, x, ids, weights, capacity_for(tokens, shape, CAPACITY_FACTOR)


def paired(a: dict, b: dict, op, unit="x") -> dict:
    """A summary of op(a_i, b_i) over the rounds two variants were timed in together."""
    return summarize([op(x, y) for x, y in zip(a["rounds"], b["rounds"])], unit, a.get("clock"))


def time_case(name, shape, tokens, dev, dtype) -> dict:
    cuda = dev == "cuda"
    layer, x, ids, weights, capacity = setup(name, shape, tokens, dev, dtype)
    experts, k = shape["experts"], shape["top_k"]
    calls = variants(x, ids, weights, layer, capacity)
    # The reference: the loop in float32. Dropped tokens: the ones padded_bmm cannot get right.
    expected = experts_loop(x.float(), ids, weights.float(), layer["w13"].float(), layer["w2"].float())
    order, offsets = sort_by_expert(ids, experts)
    slot = queue_slots(ids, order, offsets)[1]
    dropped = torch.empty_like(slot).index_copy_(0, order, slot).view(ids.shape) >= capacity  # in (token, k) order
    whole = ~dropped.any(dim=1)  # tokens that kept all k experts
    errors = {}
    for r in ROUTES:
        diff = (calls[r]().float() - expected).abs()  # the first call also tunes the Triton kernel
        errors[r] = (diff[whole] if r == "padded_bmm" else diff).max().item()
    largest = expected.abs().max().item()
    del expected, diff
    syncs = {r: synchronizing_calls(calls[r]) for r in ROUTES} if cuda else {}
    untimed = [] if cuda else ["liger_fused"]  # in Triton's interpreter: checked above, not timed
    times = timed({k: f for k, f in calls.items() if k not in untimed}, rounds=ROUNDS)
    sync_host = host_us(lambda: offsets.tolist(), calls=100, repeats=15, warmup=10)
    flops = expert_flops(tokens, shape)
    padded_flops = 6 * experts * capacity * shape["hidden"] * shape["ffn"]
    dense = times["dense"]
    routes = {}
    for r in ["dense", *ROUTES]:
        if r in untimed:
            routes[r] = {"max_abs_error": errors[r]}
            continue
        routes[r] = {"time_us": times[r], "TFLOPs": rate(times[r], flops / 1e12, "TFLOP/s")}
        if r != "dense":
            routes[r] |= {
                "vs_dense": paired(dense, times[r], lambda d, t: d / t),  # above 1: faster than the dense chain
                "vs_loop": paired(times["loop"], times[r], lambda lo, t: lo / t),  # above 1: faster than the loop
                "max_abs_error": errors[r],
                **({"synchronizing_calls": syncs[r]} if cuda else {}),
            }
    routes["padded_bmm"]["executed_TFLOPs"] = rate(times["padded_bmm"], padded_flops / 1e12, "TFLOP/s")
    return {
        "shape": name,
        "tokens": tokens,
        "rows": tokens * k,
        "flops": flops,
        "capacity_factor": CAPACITY_FACTOR,
        "capacity": capacity,
        "padded_flops": padded_flops,
        "dropped_assignments": int(dropped.sum()),
        "tokens_with_a_drop": int((~whole).sum()),
        "routes": routes,
        "parts": {p: times[p] for p in ("permute", "unpermute", "loop_counts_known")},
        "sync": {
            "tolist_host_us": sync_host,
            "loop_minus_counts_known_us": paired(times["loop"], times["loop_counts_known"], lambda a, b: a - b, "us"),
        },
        "max_abs_reference": largest,
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float16)
    shapes, token_counts = (SMALL_SHAPES, [SMALL_TOKENS]) if small else (SHAPES, TOKENS)
    cases = [time_case(name, shape, t, dev, dtype) for name, shape in shapes.items() for t in token_counts]
    kernels = []
    if cuda:  # last: once the profiler has traced kernels, launches stay slower in the process (m03/modes)
        for name, shape in shapes.items():
            layer, x, ids, weights, capacity = setup(name, shape, token_counts[0], dev, dtype)
            calls = variants(x, ids, weights, layer, capacity)
            kernels.append({"shape": name, "tokens": token_counts[0]} | {r: kernels_per_call(calls[r]) for r in ROUTES})
    races = [  # the scoreboard's rows (coursekit/scoreboard.py): the whole layer against the loop
        {
            "name": f"MoE experts, sort-permute + {label}, {c['shape']}-like, {c['tokens']} tokens",
            "peer": "loop over experts (one host sync)",
            "ours": c["routes"][r]["time_us"],
            "theirs": c["routes"]["loop"]["time_us"],
            "bar": RACE_TARGETS[c["shape"]],
            "chapter": "part-m/11-moe.md",
        }
        for c in cases
        if c["shape"] in RACE_TARGETS
        for r, label in (("triton_grouped", "Triton grouped GEMM"), ("grouped_torch", "torch._grouped_mm"))
    ]
    if "liger_fused" in ROUTES and cuda:  # the whole layer against Liger Kernel's fused MoE, the routing given
        races += [
            {
                "name": f"MoE experts, sort-permute + Triton grouped GEMM, {c['shape']}-like, {c['tokens']} tokens",
                "peer": LIGER_MOE,
                "ours": c["routes"]["triton_grouped"]["time_us"],
                "theirs": c["routes"]["liger_fused"]["time_us"],
                "bar": 1.0,
                "chapter": "part-m/11-moe.md",
            }
            for c in cases
        ]
    return {
        "repetitions": min(t["time_us"]["n"] for c in cases for t in c["routes"].values() if "time_us" in t),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shapes": shapes,
        "routes": ROUTES,
        "liger": LIGER_MOE if LigerFusedMoEFunction else None,  # raced where installed
        "cases": cases,
        "kernels_per_call": kernels,
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"MoE experts on {device_name()} ({r['dtype']}): TFLOP/s of useful FLOPs (x dense chain, x loop)")
    for c in r["cases"]:
        print(f"  {c['shape']} {c['tokens']} tokens (capacity {c['capacity']}, {c['dropped_assignments']} dropped):")
        for name, route_ in ((n, r_) for n, r_ in c["routes"].items() if "TFLOPs" in r_):
            ratios = "" if name == "dense" else f" ({route_['vs_dense']['median']:.2f}x dense, "
            ratios += "" if name == "dense" else f"{route_['vs_loop']['median']:.2f}x loop)"
            print(f"    {name:>15} {route_['TFLOPs']['median']:8.2f}{ratios}")
        parts = ", ".join(f"{p} {t['median']:.1f} us" for p, t in c["parts"].items())
        sync = c["sync"]
        print(
            f"    parts: {parts}; tolist {sync['tolist_host_us']['median']:.1f} us (host), "
            f"loop minus counts known {sync['loop_minus_counts_known_us']['median']:.1f} us (device)"
        )
    for kc in r["kernels_per_call"]:
        print(f"  kernels per call, {kc['shape']}: " + ", ".join(f"{x} {kc[x]}" for x in r["routes"]))
