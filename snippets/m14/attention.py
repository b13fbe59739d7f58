"""Decode attention over a paged KV cache, two ways, at the server's head configuration (16 query
heads and 4 key/value heads of 64, bfloat16, blocks of 16 tokens): our Triton kernel, which reads the
blocks where they lie through the block table (_paged.paged_attention), against SDPA over the blocks
gathered into a contiguous [B, Hkv, L, D] first (_paged.gathered_sdpa; the gather is timed with it,
since a server using it pays it every layer of every step). FlexAttention was not tried (its paged
use needs a mask over a logical-to-physical block map; the page says so).

One layer's call at batch 1, 16, 64 and 256, each sequence's context its workload prompt length plus
64 decoded tokens (about 340 on average, from 128 to 576), its blocks scattered over the cache in a
random order (what a server's free list hands out after a while). At batch 256 the K and V read are
about 90 MB, past the H200's 60 MB L2. Device time per call (bench.gpu_us_each: CUDA events, L2
flushed, the two in the same interleaved rounds); also the bytes of K and V read per call (to turn
time into bandwidth) and each variant's max abs error against a dense float32 reference.

On the CPU (small=True): 4 and 2 heads of 16, float32, batches 1 and 4, contexts 9 to 40 tokens in
blocks of 4; the kernel runs in Triton's interpreter, so its timing there means nothing."""

# --8<-- [start:imports]
import torch
from _paged import PagedCache, gathered_sdpa, paged_attention
from _workload import requests

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each

PROCESSES = 1  # device time, L2 flushed; the rounds are interleaved within one process
GPU = {"heads": 16, "kv_heads": 4, "head_dim": 64, "block_size": 16, "batches": [1, 16, 64, 256], "decoded": 64}
CPU = {"heads": 4, "kv_heads": 2, "head_dim": 16, "block_size": 4, "batches": [1, 4], "decoded": 0}


# --8<-- [start:setup]
def scattered_batch(lens: list[int], p: dict, dtype, device):
    """One layer's cache holding these contexts in randomly placed blocks, a query per sequence."""
    bs = p["block_size"]
    need = [-(-n // bs) for n in lens]
    cache = PagedCache(1, sum(need) + 1, bs, p["kv_heads"], p["head_dim"], dtype, device)
    cache.k.normal_()
    cache.v.normal_()
    order = (torch.randperm(sum(need)) + 1).tolist()  # the free list, shuffled
    table = torch.zeros(len(lens), max(need), dtype=torch.int32)
    for i, n in enumerate(need):
        table[i, :n] = torch.tensor(order[sum(need[:i]) : sum(need[: i + 1])])
    q = torch.randn(len(lens), p["heads"], p["head_dim"], dtype=dtype, device=device)
    lens_t = torch.tensor(lens, dtype=torch.int32, device=device)
    return q, cache, table.to(device), lens_t


def dense_reference(q, cache, table, lens):
    """Per sequence: its tokens in order, float32 softmax attention, GQA by repeating K and V."""
    out, group = [], q.shape[1] // cache.k.shape[3]
    for i, n in enumerate(lens.tolist()):
        k = cache.k[0][table[i].long()].flatten(0, 1)[:n].float().repeat_interleave(group, 1)
        v = cache.v[0][table[i].long()].flatten(0, 1)[:n].float().repeat_interleave(group, 1)
        w = torch.softmax(torch.einsum("hd,lhd->hl", q[i].float(), k) * q.shape[-1] ** -0.5, -1)
        out.append(torch.einsum("hl,lhd->hd", w, v))
    return torch.stack(out)


# --8<-- [end:setup]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available() and not small
    p, device = (CPU, "cpu") if not cuda else (GPU, "cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    if cuda:
        prompt_lens = [len(r["prompt"]) for r in requests()]
    else:
        prompt_lens = [len(r["prompt"]) for r in requests(8, 9, 40, vocab=128)]
    points = []
    for batch in p["batches"]:
        lens = [n + p["decoded"] for n in prompt_lens[:batch]]
        q, cache, table, lens_t = scattered_batch(lens, p, dtype, device)
        k, v = cache.k[0], cache.v[0]
        variants = {
            "triton_paged": lambda: paged_attention(q, k, v, table, lens_t),
            "gathered_sdpa": lambda: gathered_sdpa(q, k, v, table, lens_t),
        }
        ref = dense_reference(q, cache, table, lens_t)
        errors = {name: (fn().float() - ref).abs().max().item() for name, fn in variants.items()}
        times = gpu_us_each(variants)
        kv_bytes = 2 * sum(lens) * p["kv_heads"] * p["head_dim"] * cache.k.element_size()
        points.append({
            "batch": batch, "mean_context": sum(lens) / batch, "max_context": max(lens), "kv_bytes": kv_bytes,
            "gathered_bytes": 2 * batch * table.shape[1] * p["block_size"] * p["kv_heads"] * p["head_dim"]
            * cache.k.element_size(),
            "us": times, "max_abs_error": errors,
            "programs": batch * p["kv_heads"],  # the kernel's grid: one program per (sequence, kv head)
        })  # fmt: skip
    return {
        "device": device_name(),
        "dtype": str(dtype),
        "config": p,
        "kernel": "_paged_decode_kernel",
        "flex_attention": "not tried",
        "points": points,
        "repetitions": points[0]["us"]["triton_paged"]["n"],
    }


if __name__ == "__main__":
    data = measure(small=not torch.cuda.is_available())
    print(f"decode attention over a paged cache, {data['device']}, {data['dtype']}")
    print(f"{'batch':>6} {'context':>8} {'triton us':>10} {'gather us':>10} {'err triton':>11} {'err gather':>11}")
    for pt in data["points"]:
        t, e = pt["us"], pt["max_abs_error"]
        print(
            f"{pt['batch']:>6} {pt['mean_context']:>8.0f} {t['triton_paged']['median']:>10.1f} "
            f"{t['gathered_sdpa']['median']:>10.1f} {e['triton_paged']:>11.2e} {e['gathered_sdpa']:>11.2e}"
        )
