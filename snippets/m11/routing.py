"""How unevenly a router spreads tokens over experts, and what a fixed capacity then drops.

The router of _moe.py (linear gate, softmax, top-k renormalised) at both stated shapes, "mixtral"
(8 experts, top-2) and "qwen3" (128 experts, top-8), for 4,096 and 16,384 tokens, with random
activations and gate weights: the random router (alpha 0) and the skewed one, a per-expert logit bias
-alpha ln(rank), at alpha 0.25, 0.5 (the course's skewed router) and 1.0. For each routing: every
expert's count of (token, expert) assignments, max/mean, min/mean, the coefficient of variation
(std/mean), the empty experts, and the capacity factor that would drop nothing (max/mean). For
capacity factors 1 to 4 (capacity = ceil(factor T k / E) rows per expert, first come first served in
token order, as the padded route runs it): assignments dropped, tokens that lose at least one of
their k experts, tokens that lose all k, and the share of the padded batch that is padding (rows
computed for nothing). The counts are exact for one seed.

Timed on the device clock (coursekit.bench.gpu_us_each, interleaved rounds) with the random router:
the router itself (gate GEMM, softmax, top-k) and the sort that groups the assignments by expert.
On the CPU: hidden 256 instead of 4,096 or 2,048 (the logits have the same N(0, 1) spread), 1,024
and 4,096 tokens, the same experts and top-k."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
# isort: split
from _moe import SHAPES, SKEW_ALPHA, TOKENS, capacity_for, make_gate, queue_slots, route, skew_bias, sort_by_expert

from coursekit.bench import device_name, gpu_us_each

PROCESSES = 1  # one process: the counts are exact for the seed, the times are device-side (CUDA events)
ALPHAS = [0.0, 0.25, SKEW_ALPHA, 1.0]  # 0: the random router
CAPACITY_FACTORS = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0]
SMALL_HIDDEN, SMALL_TOKENS = 256, [1024, 4096]


# --8<-- [start:imbalance]
def load(ids: torch.Tensor, experts: int) -> dict:
    """Assignments per expert and how uneven they are."""
    counts = torch.bincount(ids.flatten(), minlength=experts).double()
    mean = counts.mean()
    return {
        "tokens_per_expert": [int(c) for c in counts.tolist()],
        "max_over_mean": (counts.max() / mean).item(),
        "min_over_mean": (counts.min() / mean).item(),
        "cv": (counts.std(correction=0) / mean).item(),
        "empty_experts": int((counts == 0).sum()),
        "dropless_capacity_factor": (counts.max() / mean).item(),  # the capacity that fits the busiest expert
    }


def drops(ids: torch.Tensor, experts: int, capacity: int) -> dict:
    """What a capacity of `capacity` rows per expert drops (first come, first served in token order)."""
    order, offsets = sort_by_expert(ids, experts)
    _, slot = queue_slots(ids, order, offsets)
    place = torch.empty_like(slot).index_copy_(0, order, slot).view(ids.shape)  # back in (token, k) order
    dropped = place >= capacity
    lost = dropped.sum(dim=1)  # per token: how many of its k experts it loses
    n_dropped = int(dropped.sum())
    return {
        "capacity": capacity,
        "dropped_assignments": n_dropped,
        "dropped_fraction": n_dropped / ids.numel(),
        "tokens_losing_one_or_more": int((lost > 0).sum()),
        "tokens_losing_all": int((lost == ids.shape[1]).sum()),
        "padding_fraction": 1 - (ids.numel() - n_dropped) / (capacity * experts),
    }


# --8<-- [end:imbalance]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    token_counts = SMALL_TOKENS if small else TOKENS
    points, timings = [], []
    for name, full in SHAPES.items():
        shape = {**full, "hidden": SMALL_HIDDEN} if small else full
        experts, top_k = shape["experts"], shape["top_k"]
        gate = make_gate(shape, dev, dtype)
        for tokens in token_counts:
            x = torch.randn(tokens, shape["hidden"], device=dev, dtype=dtype)  # random activations
            for alpha in ALPHAS:
                bias = skew_bias(experts, alpha, dev) if alpha else None
                ids, _ = route(x, gate, top_k, bias)
                point = {"shape": name, "tokens": tokens, "alpha": alpha, "router": "skewed" if alpha else "random"}
                point |= {"assignments": ids.numel(), "mean_per_expert": ids.numel() / experts, **load(ids, experts)}
                point["capacity"] = [
                    {"capacity_factor": cf, **drops(ids, experts, capacity_for(tokens, shape, cf))}
                    for cf in CAPACITY_FACTORS
                ]
                points.append(point)
            ids, _ = route(x, gate, top_k)
            times = gpu_us_each({"router": lambda: route(x, gate, top_k), "sort": lambda: sort_by_expert(ids, experts)})
            timings.append({"shape": name, "tokens": tokens, "router_us": times["router"], "sort_us": times["sort"]})
    return {
        "repetitions": min(t[k]["n"] for t in timings for k in ("router_us", "sort_us")),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shapes": {name: ({**s, "hidden": SMALL_HIDDEN} if small else s) for name, s in SHAPES.items()},
        "alphas": ALPHAS,
        "skew_alpha": SKEW_ALPHA,
        "capacity_factors": CAPACITY_FACTORS,
        "points": points,
        "timings": timings,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"router load on {device_name()} ({r['dtype']}); capacity factor -> assignments dropped")
    print(
        f"{'shape':>8} {'tokens':>6} {'alpha':>5} {'max/mean':>8} {'cv':>5} {'empty':>5}  "
        + "  ".join(f"cf {cf:<4}" for cf in r["capacity_factors"])
    )
    for p in r["points"]:
        dropped = "  ".join(f"{c['dropped_fraction']:7.1%}" for c in p["capacity"])
        print(
            f"{p['shape']:>8} {p['tokens']:>6} {p['alpha']:>5} {p['max_over_mean']:8.2f} {p['cv']:5.2f} "
            f"{p['empty_experts']:>5}  {dropped}"
        )
    for t in r["timings"]:
        print(
            f"{t['shape']:>8} {t['tokens']:>6}: router {t['router_us']['median']:.1f} us, "
            f"sort by expert {t['sort_us']['median']:.1f} us"
        )
