"""Module 11's MoE layer, shared by its snippets: the two stated shapes, a router (random, or skewed by a
per-expert logit bias), the sort that groups the tokens by expert, and the four ways to run the experts
of one layer once the routing is known.

Shapes (bf16 on the GPU): "mixtral", Mixtral-8x7B-like, hidden 4096, expert FFN 14336, 8 experts,
top-2 (few large experts); "qwen3", Qwen3-30B-A3B-like, hidden 2048, expert FFN 768, 128 experts, top-8
(many small experts). Each expert is a SwiGLU FFN, w2(silu(x w1) * (x w3)); w1 and w3 are stored side
by side as one [hidden, 2 ffn] matrix per expert, w13 (one GEMM instead of two, as vLLM's fused MoE
stores them), w2 as [ffn, hidden]: weights [experts, in, out], row-major, x @ w[e].

The router is the one Mixtral and Qwen3 use: a linear gate, a softmax over the experts, the top-k
kept and renormalised to sum to one. "Random": random activations (N(0, 1)) and gate weights (N(0,
1/hidden)), so every logit is about N(0, 1) and no expert is favoured except by chance. "Skewed": the
same plus a per-expert logit bias -alpha ln(r), r the expert's place (1 to E) in a random ranking,
so exp(bias) = r^-alpha: with Gumbel-distributed logit noise the top-1 choice would follow that Zipf
law of exponent alpha exactly; with these Gaussian logits it is only near it (the snippets store the
counts measured, not the law).

On the CPU (small=True) the snippets run tiny matrices in float16 (the Triton interpreter's tl.dot
mistakes bfloat16; module 07; compiled.py runs bfloat16 without Triton) and torch._grouped_mm takes
its CPU path: a loop of mm over the groups (ATen's GroupedMMUtils.h, _grouped_mm_fallback)."""

# --8<-- [start:imports]
import math

import torch
import torch.nn.functional as F

# --8<-- [end:imports]
# isort: split
from _grouped_gemm import grouped_mm

from coursekit.bench import gpu_us_each, host_us

# --8<-- [start:shapes]
SHAPES = {
    "mixtral": {"hidden": 4096, "ffn": 14336, "experts": 8, "top_k": 2},  # Mixtral-8x7B: few large experts
    "qwen3": {"hidden": 2048, "ffn": 768, "experts": 128, "top_k": 8},  # Qwen3-30B-A3B: many small experts
}
TOKENS = [4096, 16384]  # tokens per layer call: a prefill chunk or a training micro-batch
# --8<-- [end:shapes]
SMALL_SHAPES = {  # the CPU path: tiny matrices and few experts (the interpreter runs a program per tile)
    "mixtral": {"hidden": 64, "ffn": 96, "experts": 4, "top_k": 2},
    "qwen3": {"hidden": 32, "ffn": 48, "experts": 8, "top_k": 4},
}
SMALL_TOKENS = 96
SKEW_ALPHA = 0.5  # "the skewed router": the bias exponent used wherever one skewed routing is shown


def expert_flops(tokens: int, shape: dict) -> int:
    """FLOPs of the experts for one layer call: every (token, expert) pair runs x @ w13 (2 h 2f) and
    a @ w2 (2 f h)."""
    return 6 * tokens * shape["top_k"] * shape["hidden"] * shape["ffn"]


def make_gate(shape: dict, dev: str, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """The router's weight [hidden, experts], N(0, 1/hidden): each logit about N(0, 1)."""
    torch.manual_seed(seed)
    return torch.randn(shape["hidden"], shape["experts"], device=dev, dtype=dtype).mul_(1 / math.sqrt(shape["hidden"]))


def make_layer(shape: dict, dev: str, dtype: torch.dtype, seed: int = 0) -> dict:
    """The gate and the experts' weights, scaled by 1/sqrt(fan-in) so activations stay near unit size."""
    h, f, e = shape["hidden"], shape["ffn"], shape["experts"]
    gate = make_gate(shape, dev, dtype, seed)  # seeds the generator: the same gate as make_gate's
    return {
        "gate": gate,
        "w13": torch.randn(e, h, 2 * f, device=dev, dtype=dtype).mul_(1 / math.sqrt(h)),
        "w2": torch.randn(e, f, h, device=dev, dtype=dtype).mul_(1 / math.sqrt(f)),
    }


# --8<-- [start:router]
def skew_bias(experts: int, alpha: float, dev: str, seed: int = 1) -> torch.Tensor:
    """Logit bias -alpha ln(r) for expert ranks r = 1..E in a random order: the skewed router."""
    rank = torch.randperm(experts, generator=torch.Generator().manual_seed(seed)) + 1
    return (-alpha * torch.log(rank.double())).float().to(dev)


def route(x: torch.Tensor, gate: torch.Tensor, top_k: int, bias: torch.Tensor | None = None):
    """Each token's top_k experts [T, k] and their weights [T, k]: softmax over the gate's logits,
    the top k kept and renormalised (Mixtral; Qwen3 with norm_topk_prob)."""
    logits = (x @ gate).float()
    if bias is not None:
        logits = logits + bias
    weights, ids = logits.softmax(dim=-1).topk(top_k, dim=-1)
    return ids, (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)


# --8<-- [end:router]


# --8<-- [start:permute]
def sort_by_expert(ids: torch.Tensor, experts: int):
    """The T*k (token, expert) assignments grouped by expert, on the device: row i of the sorted batch
    is assignment order[i] (its token is order[i] // k), and expert e owns rows offsets[e-1] to
    offsets[e] (int32 cumulative ends, as torch._grouped_mm takes them). No count reaches the host."""
    sorted_ids, order = ids.flatten().sort(stable=True)  # stable: each expert's rows stay in token order
    wanted = torch.arange(experts, device=ids.device, dtype=sorted_ids.dtype)
    offsets = torch.searchsorted(sorted_ids, wanted, right=True, out_int32=True)
    return order, offsets


def permute(x: torch.Tensor, order: torch.Tensor, top_k: int) -> torch.Tensor:
    """x_sorted [T*k, h]: each token's row once per expert it goes to, grouped by expert (a gather)."""
    return x[order // top_k]


def unpermute(out_sorted: torch.Tensor, order: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Each sorted row back to its (token, slot) place (a scatter), then every token's k expert
    outputs summed with the router's weights: [T, h]."""
    tokens, top_k = weights.shape
    out = torch.empty_like(out_sorted).index_copy_(0, order, out_sorted)
    return (out.view(tokens, top_k, -1) * weights.unsqueeze(-1)).sum(dim=1)


def queue_slots(ids: torch.Tensor, order: torch.Tensor, offsets: torch.Tensor):
    """For each sorted row: its expert, and its place in that expert's queue (0, 1, ... in token
    order). With a capacity C, the rows at places >= C are the dropped ones (first come, first served)."""
    expert = ids.flatten()[order]
    starts = F.pad(offsets[:-1], (1, 0))  # where each expert's rows begin
    slot = torch.arange(order.numel(), device=ids.device) - starts[expert]
    return expert, slot


# --8<-- [end:permute]


# --8<-- [start:routes]
def swiglu(h: torch.Tensor) -> torch.Tensor:
    """silu(x w1) * (x w3), from h = x w13 with the two halves side by side."""
    f = h.shape[-1] // 2
    return F.silu(h[..., :f]) * h[..., f:]


def experts_loop(x, ids, weights, w13, w2, ends: list[int] | None = None):
    """(a) One expert at a time: Python slices each expert's rows, so it needs the counts on the host.
    (ends given: the counts already on the host, to time the layer without its sync.)"""
    order, offsets = sort_by_expert(ids, w13.shape[0])
    x_sorted = permute(x, order, ids.shape[1])
    if ends is None:
        ends = offsets.tolist()  # the host sync: the CPU waits here for the GPU to finish the sort
    outs, start = [], 0
    for e, end in enumerate(ends):
        if end > start:  # an expert with no tokens launches nothing
            outs.append(swiglu(x_sorted[start:end] @ w13[e]) @ w2[e])
        start = end
    return unpermute(torch.cat(outs), order, weights)


def experts_padded(x, ids, weights, w13, w2, capacity: int):
    """(b) Every expert gets exactly `capacity` rows: tokens past it are dropped, empty rows are zeros;
    then one batched matmul over the experts (static shapes, no sync)."""
    experts, rows = w13.shape[0], capacity * w13.shape[0]
    order, offsets = sort_by_expert(ids, experts)
    expert, slot = queue_slots(ids, order, offsets)
    kept = slot < capacity
    dest = torch.where(kept, expert * capacity + slot, rows)  # a dropped row goes to a spare row
    buf = x.new_zeros(rows + 1, x.shape[1]).index_copy_(0, dest, permute(x, order, ids.shape[1]))
    h = torch.bmm(buf[:rows].view(experts, capacity, -1), w13)
    out = torch.bmm(swiglu(h), w2).view(rows, -1)
    out_sorted = out[dest.clamp(max=rows - 1)] * kept.unsqueeze(-1)  # a dropped row: no expert output
    return unpermute(out_sorted, order, weights)


def experts_grouped(x, ids, weights, w13, w2, mm=torch._grouped_mm):
    """(c), (d) Sort-permute, then one grouped GEMM per weight over all experts' rows at once (dropless,
    MegaBlocks-style): torch._grouped_mm, or the course's Triton grouped_mm (mm=grouped_mm)."""
    order, offsets = sort_by_expert(ids, w13.shape[0])
    x_sorted = permute(x, order, ids.shape[1])
    out_sorted = mm(swiglu(mm(x_sorted, w13, offsets)), w2, offsets)
    return unpermute(out_sorted, order, weights)


def experts_grouped_triton(x, ids, weights, w13, w2):
    """(d) experts_grouped with the course's Triton grouped GEMM."""
    return experts_grouped(x, ids, weights, w13, w2, mm=grouped_mm)


def dense_ffn(x_rows, w13_one, w2_one):
    """The yardstick: one expert's SwiGLU FFN over all T*k rows, the same FLOPs as the layer's experts."""
    return swiglu(x_rows @ w13_one) @ w2_one


# --8<-- [end:routes]


def capacity_for(tokens: int, shape: dict, factor: float) -> int:
    """Rows per expert at a capacity factor: factor x (T k / E, the mean load), rounded up."""
    return math.ceil(factor * tokens * shape["top_k"] / shape["experts"])


def timed(calls: dict, rounds: int = 15) -> dict:
    """Device microseconds of every call, all in the same interleaved rounds (gpu_us_each). Without a
    GPU, the calls that run Triton kernels (named triton...) are timed apart, three calls each: in the
    interpreter the ten calls each of the CPU's gpu_us_each would take minutes."""
    if torch.cuda.is_available():
        return gpu_us_each(calls, rounds=rounds)
    interpreted = {name for name in calls if name.startswith("triton")}
    times = gpu_us_each({name: fn for name, fn in calls.items() if name not in interpreted})
    return times | {name: host_us(calls[name], calls=1, repeats=3, warmup=0) for name in interpreted}


if __name__ == "__main__":
    for name, shape in SHAPES.items():
        for tokens in TOKENS:
            print(
                f"{name}: {shape}, {tokens} tokens: {expert_flops(tokens, shape) / 1e12:.2f} TFLOP in the experts, "
                f"capacity at factor 1.25: {capacity_for(tokens, shape, 1.25)} rows per expert"
            )
