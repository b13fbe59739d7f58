"""Module 14's paged KV cache and the decode attention that reads it, shared by its snippets.

The cache (vLLM's PagedAttention layout): keys and values for all layers in two tensors
[layers, num_blocks, block_size, kv_heads, head_dim]; a sequence owns a list of blocks (its row of
the block table), so its tokens need not be contiguous and a finished sequence's blocks go back to a
free list at once. Block 0 is never handed out: padding slots of a decode batch (a CUDA graph's
bucket is larger than the batch) write into it and read one token of it, masked out of the result.

Decode attention, two ways (attention.py times them):
- ``paged_attention``: a Triton kernel of ours, one program per (sequence, key/value head) that
  handles that head's whole GQA group of query heads (4 here, padded to 16 rows for tl.dot), loops
  over the sequence's tokens 64 at a time, looking each token's block up in the block table, with
  an online softmax (the production choice: vLLM's paged attention and FlashInfer's decode kernels
  read the blocks where they lie, the same way).
- ``gathered_sdpa``: the blocks gathered into a contiguous [B, Hkv, L, D] with the block table (an
  index, then SDPA with a length mask and enable_gqa): correct with no kernel of one's own, but it
  copies the whole context of every sequence every layer and step.
On the CPU the kernel runs in Triton's interpreter (switched on below when CUDA is absent); its
tl.dot mistakes bfloat16 there, so the CPU tests run the cache in float32 (module 11 says how)."""

# --8<-- [start:imports]
import os

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton runs the kernels in its interpreter, on the CPU
import triton  # noqa: E402  (imported after the switch above, as Triton's documentation has it)
import triton.language as tl  # noqa: E402

# --8<-- [end:imports]


# --8<-- [start:cache]
class PagedCache:
    """K and V of every layer in fixed blocks, a free list of blocks, block 0 kept as the dummy."""

    def __init__(self, layers, num_blocks, block_size, kv_heads, head_dim, dtype, device):
        shape = (layers, num_blocks, block_size, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size, self.num_blocks = block_size, num_blocks
        self.free = list(range(num_blocks - 1, 0, -1))  # block 0: the padding slots' dummy

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, n: int) -> list[int]:
        assert n <= len(self.free), "admission must check free blocks first"
        return [self.free.pop() for _ in range(n)]

    def release(self, blocks: list[int]) -> None:
        self.free.extend(blocks)

    def write(self, layer: int, slots, k, v) -> None:
        """k, v [N, Hkv, D] into flat slots [N] (slot = block * block_size + offset), on the device."""
        self.k[layer].view(-1, *k.shape[1:]).index_copy_(0, slots, k)
        self.v[layer].view(-1, *v.shape[1:]).index_copy_(0, slots, v)


# --8<-- [end:cache]


# --8<-- [start:kernel]
@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, table_ptr, lens_ptr,
    stride_qb, stride_qh, stride_kb, stride_kt, stride_kh, stride_tb, scale,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    seq, kvh = tl.program_id(0), tl.program_id(1)
    g, d, n = tl.arange(0, BLOCK_G), tl.arange(0, HEAD_DIM), tl.arange(0, BLOCK_N)
    heads = kvh * GROUP + g  # the query heads that share this key/value head
    q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + d[None, :], mask=(g < GROUP)[:, None], other=0.0)
    length = tl.load(lens_ptr + seq)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    for start in range(0, length, BLOCK_N):
        t = start + n
        valid = t < length
        block = tl.load(table_ptr + seq * stride_tb + t // BLOCK_SIZE, mask=valid, other=0)
        offs = block[:, None] * stride_kb + (t % BLOCK_SIZE)[:, None] * stride_kt + kvh * stride_kh + d[None, :]
        k = tl.load(k_ptr + offs, mask=valid[:, None], other=0.0)
        v = tl.load(v_ptr + offs, mask=valid[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale  # [BLOCK_G, BLOCK_N], float32
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + seq * stride_qb + heads[:, None] * stride_qh + d[None, :], out, mask=(g < GROUP)[:, None])


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, block_n: int = 64, out=None):
    """q [B, H, D]; k_cache, v_cache [num_blocks, block_size, Hkv, D] (one layer); block_table
    [B, max_blocks] int32; seq_lens [B] int32 -> out [B, H, D] (or into out, contiguous like q).
    Launch: (B, Hkv) programs."""
    b, h, d = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    group = h // kv_heads
    out = torch.empty_like(q) if out is None else out
    _paged_decode_kernel[(b, kv_heads)](
        q, k_cache, v_cache, out, block_table, seq_lens,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_table.stride(0),
        d**-0.5, GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), HEAD_DIM=d, BLOCK_SIZE=block_size,
        BLOCK_N=block_n,
    )  # fmt: skip
    return out


# --8<-- [end:kernel]


# --8<-- [start:gathered]
def gathered_sdpa(q, k_cache, v_cache, block_table, seq_lens):
    """The alternative: gather each sequence's blocks into a contiguous [B, Hkv, L, D] (L = the
    table's width in tokens), mask positions >= seq_len, and run SDPA (GQA by enable_gqa)."""
    b, h, d = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    length = block_table.shape[1] * block_size
    k = k_cache[block_table].view(b, length, kv_heads, d).transpose(1, 2)  # a copy: the gather
    v = v_cache[block_table].view(b, length, kv_heads, d).transpose(1, 2)
    mask = (torch.arange(length, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    return F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, enable_gqa=True)[:, :, 0]


# --8<-- [end:gathered]


def layer_attention(kind: str):
    """The model's decode attention callback for kind "triton" or "gather": (i, q, cache, table, lens) -> out."""
    fn = paged_attention if kind == "triton" else gathered_sdpa
    return lambda i, q, cache, table, lens: fn(q, cache.k[i], cache.v[i], table, lens)


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cache = PagedCache(1, 9, 4, 2, 16, torch.float32, dev)
    cache.k.normal_()
    cache.v.normal_()
    table = torch.tensor([[3, 7, 1, 0], [2, 5, 8, 4]], dtype=torch.int32, device=dev)
    lens = torch.tensor([10, 16], dtype=torch.int32, device=dev)
    q = torch.randn(2, 4, 16, device=dev)
    diff = paged_attention(q, cache.k[0], cache.v[0], table, lens) - gathered_sdpa(
        q, cache.k[0], cache.v[0], table, lens
    )
    print(f"paged kernel against gathered SDPA, 2 sequences of 10 and 16 tokens: max |diff| {diff.abs().max():.2e}")
