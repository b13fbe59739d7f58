"""Module 14's model, shared by its snippets: a random-initialised Llama (RMSNorm, RoPE, GQA, SwiGLU),
built twice over the same weights: Hugging Face's LlamaForCausalLM (the peer) and ours (the server's).

CONFIG is about 200 M parameters (12 layers, hidden 1,024, 16 query heads and 4 key/value heads of
64, SwiGLU 2,816, a 32,000-token vocabulary, untied head): big enough that a decode step is real GPU
work, small enough that one H200 races both sides in minutes. TINY is the CPU tests' model.

Ours computes what HF's computes, op for op where the numerics can differ: RMSNorm in float32, cast
back, then times the weight; RoPE's cos and sin computed in float32 and cast to the model's dtype;
rotate_half on [first half | second half] of the head dimension; GQA by key/value-head groups. Its
parameters have HF's names (so the state dict loads as is, sharing HF's tensors); it adds two fused
copies per layer (q|k|v and gate|up as one matrix each: one GEMM instead of three and two, as vLLM
fuses them), which can round a bfloat16 product differently from HF's separate GEMMs.

Three entry points: ``forward(ids)`` (the whole sequence, causal SDPA, no cache: the oracle's),
``prefill`` (packed new prompts, written into the paged cache) and ``decode`` (one token per sequence,
read through the paged cache: fixed shapes, no host sync, so one CUDA graph per batch size captures
it)."""

# --8<-- [start:imports]
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.varlen import varlen_attn

# --8<-- [end:imports]

# --8<-- [start:config]
CONFIG = dict(
    vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12, num_attention_heads=16,
    num_key_value_heads=4, head_dim=64, max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)  # ~200 M parameters  # fmt: skip
TINY = dict(
    CONFIG, vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
)  # fmt: skip
# --8<-- [end:config]


def hf_model(config: dict = CONFIG, seed: int = 0, device="cuda", dtype=torch.bfloat16):
    """transformers.LlamaForCausalLM(LlamaConfig(**config)), random weights from torch.manual_seed(seed), eval()."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(LlamaConfig(**config))
    return model.to(dtype).eval()


# --8<-- [start:model]
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        d, hd = c["hidden_size"], c["head_dim"]
        self.q_proj = nn.Linear(d, c["num_attention_heads"] * hd, bias=False)
        self.k_proj = nn.Linear(d, c["num_key_value_heads"] * hd, bias=False)
        self.v_proj = nn.Linear(d, c["num_key_value_heads"] * hd, bias=False)
        self.o_proj = nn.Linear(c["num_attention_heads"] * hd, d, bias=False)


class MLP(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)


class Layer(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.self_attn, self.mlp = Attention(c), MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Body(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, weight, eps: float):
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def attention_in(x, positions, norm_w, eps: float, qkv_w, cos_table, sin_table, kv_heads: int):
    """A layer's piece before attention (pure: weights are arguments, so one compile serves every layer)."""
    d = cos_table.shape[-1]
    qkv = F.linear(rms_norm(x, norm_w, eps), qkv_w)
    q, k, v = qkv.view(x.shape[0], -1, d).split([qkv_w.shape[0] // d - 2 * kv_heads, kv_heads, kv_heads], dim=1)
    cos, sin = cos_table[positions][:, None, :], sin_table[positions][:, None, :]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v


def attention_out(x, attn, o_w, norm_w, gate_up_w, down_w, eps: float):
    """A layer's piece after attention: o-projection, residual, norm, SwiGLU MLP, residual."""
    x = x + F.linear(attn.reshape(attn.shape[0], -1), o_w)
    gate, up = F.linear(rms_norm(x, norm_w, eps), gate_up_w).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, down_w)


PIECES = (attention_in, attention_out)  # a layer's two pieces around attention, uncompiled


def varlen_attention(q, k, v, cu_seqlens, max_len: int):
    """Causal attention within each sequence of a packed row: q [N, H, D], k and v [N, Hkv, D];
    sequence j is rows cu_seqlens[j]:cu_seqlens[j + 1] (int32, on the device), none longer than
    max_len. On a GPU, FlashAttention's variable-length kernel (window (-1, 0): causal), capturable;
    on a CPU, one SDPA call per sequence."""
    if q.is_cuda:
        return varlen_attn(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, window_size=(-1, 0))
    out, cu = torch.zeros_like(q), cu_seqlens.tolist()
    for s, e in zip(cu, cu[1:]):
        if e > s:
            qs, ks, vs = (y[s:e].transpose(0, 1)[None] for y in (q, k, v))
            out[s:e] = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=True)[0].transpose(0, 1)
    return out


@functools.cache
def compiled_pieces():
    """The two pieces compiled once for every layer (weights are arguments) and every batch size
    (dynamic=True): Inductor fuses each piece's element-wise work into a few kernels."""
    return torch.compile(attention_in, dynamic=True), torch.compile(attention_out, dynamic=True)


class Llama(nn.Module):
    """Ours: HF's parameter names (model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = c = dict(config)
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.model = Body(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    @classmethod
    def from_hf(cls, hf) -> "Llama":
        """The same weights: HF's tensors themselves (load_state_dict(assign=True) into a meta model)."""
        hc = hf.config
        config = {k: getattr(hc, k) for k in CONFIG if k != "rope_theta"}
        config["rope_theta"] = hc.rope_parameters["rope_theta"]
        with torch.device("meta"):
            model = cls(config)
        model.load_state_dict(hf.state_dict(), strict=True, assign=True)
        return model.prepare()

    @torch.no_grad()
    def prepare(self) -> "Llama":
        """RoPE's tables (as HF computes them: float32, cast to the dtype) and the fused weights."""
        w = self.lm_head.weight
        d = self.head_dim
        inv_freq = 1.0 / (self.config["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float) / d))
        pos = torch.arange(self.config["max_position_embeddings"], dtype=torch.float, device=w.device)
        freqs = pos[:, None] * inv_freq.to(w.device)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(w.dtype), emb.sin().to(w.dtype)  # [max_positions, head_dim]
        for layer in self.model.layers:
            a, m = layer.self_attn, layer.mlp
            layer.qkv_weight = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
            layer.gate_up_weight = torch.cat([m.gate_proj.weight, m.up_proj.weight])
        return self.eval()

    # -- one layer in two pieces around attention, shared by the three entry points (and by buckets.py)
    def pre_attention(self, i: int, x, positions, fn=attention_in):
        """Norm, fused q|k|v projection, RoPE: x [N, hidden] -> q [N, H, D], k and v [N, Hkv, D].
        fn: attention_in itself, or a compiled attention_in (PIECES, compiled_pieces)."""
        layer = self.model.layers[i]
        norm = layer.input_layernorm
        return fn(x, positions, norm.weight, norm.eps, layer.qkv_weight, self.cos, self.sin, self.kv_heads)

    def post_attention(self, i: int, x, attn, fn=attention_out):
        """o-projection and residual, then norm, SwiGLU MLP and residual: attn [N, H, D] -> x [N, hidden]."""
        layer = self.model.layers[i]
        norm, mlp = layer.post_attention_layernorm, layer.mlp
        w = (layer.self_attn.o_proj.weight, norm.weight, layer.gate_up_weight, mlp.down_proj.weight)
        return fn(x, attn, *w, norm.eps)

    def logits(self, x):
        return self.lm_head(self.model.norm(x))

    def forward(self, ids):
        """ids [B, T] -> logits [B, T, vocab]: the whole sequences, causal, no cache."""
        b, t = ids.shape
        positions = torch.arange(t, device=ids.device).repeat(b)
        x = self.model.embed_tokens(ids.reshape(-1))
        for i in range(len(self.model.layers)):
            q, k, v = (y.view(b, t, -1, self.head_dim).transpose(1, 2) for y in self.pre_attention(i, x, positions))
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = self.post_attention(i, x, attn.transpose(1, 2).reshape(b * t, -1, self.head_dim))
        return self.logits(x).view(b, t, -1)

    def prefill(self, tokens, positions, seq_ranges: list[tuple[int, int]], cache, slot_mapping, pieces=PIECES,
                one_call=True, last=None, varlen=None):  # fmt: skip
        """New prompts packed into one row: tokens, positions and cache slots [N]. Attention is causal
        per prompt: with varlen (cu_seqlens, max_len), one varlen_attention call a layer (capturable);
        else per seq_ranges, one padded SDPA call a layer (one_call) or one per prompt. last: each
        prompt's last token [P]. Returns each prompt's greedy next token [P]."""
        pre, post = pieces
        pad = PaddedPrompts(seq_ranges, positions) if one_call and varlen is None else None
        x = self.model.embed_tokens(tokens)
        for i in range(len(self.model.layers)):
            q, k, v = self.pre_attention(i, x, positions, pre)
            cache.write(i, slot_mapping, k, v)
            if varlen is not None:
                attn = varlen_attention(q, k, v, *varlen)
            elif one_call:
                attn = pad.attention(q, k, v)
            else:
                attn = torch.empty_like(q)
                for s, e in seq_ranges:
                    qs, ks, vs = (y[s:e].transpose(0, 1)[None] for y in (q, k, v))
                    out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=True)
                    attn[s:e] = out[0].transpose(0, 1)
            x = self.post_attention(i, x, attn, post)
        if last is None:
            last = torch.tensor([e - 1 for _, e in seq_ranges], device=x.device)
        return self.logits(x[last]).argmax(-1)

    def decode(self, tokens, positions, block_table, seq_lens, cache, attention, pieces=PIECES):
        """One new token per sequence: tokens, positions, seq_lens [B] and block_table [B, blocks], on
        the device; nothing here reads the host, so a graph captures it. Returns the greedy tokens [B]."""
        pre, post = pieces
        bs = cache.block_size
        slots = block_table.gather(1, (positions // bs)[:, None])[:, 0] * bs + positions % bs
        x = self.model.embed_tokens(tokens)
        for i in range(len(self.model.layers)):
            q, k, v = self.pre_attention(i, x, positions, pre)
            cache.write(i, slots, k, v)
            x = self.post_attention(i, x, attention(i, q, cache, block_table, seq_lens), post)
        return self.logits(x).argmax(-1)


class PaddedPrompts:
    """Packed prompts as a padded batch [P, L, heads, D] (L the longest), for one causal attention
    call per layer: a query at position p sees positions 0..p, all real; padding rows are dropped."""

    def __init__(self, seq_ranges: list[tuple[int, int]], positions):
        lengths = torch.tensor([e - s for s, e in seq_ranges])
        which = torch.repeat_interleave(torch.arange(len(seq_ranges)), lengths)
        self.which = which.to(positions.device, non_blocking=True) if positions.is_cuda else which
        self.positions, self.shape = positions, (len(seq_ranges), int(lengths.max()))

    def attention(self, q, k, v):
        """q [N, H, D], k and v [N, Hkv, D] -> [N, H, D]: one causal SDPA call, GQA by enable_gqa."""

        def padded(y):
            out = y.new_zeros(*self.shape, *y.shape[1:])
            out[self.which, self.positions] = y
            return out.transpose(1, 2)  # [P, heads, L, D]

        out = F.scaled_dot_product_attention(padded(q), padded(k), padded(v), is_causal=True, enable_gqa=True)
        return out.transpose(1, 2)[self.which, self.positions]


# --8<-- [end:model]


# --8<-- [start:reference]
@torch.no_grad()
def reference_greedy(model_or_hf, prompt: list[int], max_new_tokens: int) -> list[int]:
    """The plain loop: full recompute of the whole sequence every step, argmax; the correctness oracle."""
    device = next(model_or_hf.parameters()).device
    seq = list(prompt)
    for _ in range(max_new_tokens):
        out = model_or_hf(torch.tensor([seq], device=device))
        logits = out.logits if hasattr(out, "logits") else out
        seq.append(int(logits[0, -1].argmax()))
    return seq[len(prompt) :]


# --8<-- [end:reference]


if __name__ == "__main__":
    hf = hf_model(TINY, device="cpu", dtype=torch.float32)
    ours = Llama.from_hf(hf)
    ids = torch.randint(0, TINY["vocab_size"], (1, 12))
    with torch.no_grad():
        print(f"TINY: max |ours - HF| over the logits of 12 tokens: {(hf(ids).logits - ours(ids)).abs().max():.2e}")
    print(f"greedy, 8 tokens after [1, 2, 3]: {reference_greedy(ours, [1, 2, 3], 8)}")
    params = sum(p.numel() for p in hf_model(CONFIG, device="meta").parameters())
    print(f"CONFIG: {params / 1e6:.1f} M parameters")
