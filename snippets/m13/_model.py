"""The module's one model: a GPT-style decoder (nanoGPT's shape, gpt-fast's static KV cache).

Token and position embeddings, LAYERS pre-norm blocks (RMSNorm; causal attention through
F.scaled_dot_product_attention; an MLP with tanh-GELU), a final RMSNorm and an LM head. On the GPU:
d_model 1,024, 16 heads, 8 layers, a 32,768-token vocabulary, bf16: about 168 M parameters (100 M in
the blocks, 34 M in each of the two untied tables). Small enough that a decode step at batch 1 is
host-bound (about 100 launches for 340 MB of weights) and its training step (8 x 1,024 tokens,
AdamW) is GPU-bound. On the CPU path: d_model 32, 4 heads, 2 layers, vocabulary 256, float32.

Two ways in: forward(idx) for a whole sequence (training; with targets it returns the mean
cross-entropy loss), and forward(idx, pos) for one decode step: idx is (batch, 1) and pos a (1,)
int64 tensor on the device, so one graph serves every position. The step writes its keys and values
into a static KV cache, [layers, 2, batch, heads, max_len, head_dim], allocated once by
setup_cache(batch) (index_copy_ at pos), and attends over all of it under a mask built from pos.
"""

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int = 32768
    d: int = 1024
    heads: int = 16
    layers: int = 8
    max_len: int = 1024


GPU = Config()
CPU = Config(vocab=256, d=32, heads=4, layers=2, max_len=32)


# --8<-- [start:block]
class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.heads = cfg.heads
        self.norm1, self.norm2 = nn.RMSNorm(cfg.d), nn.RMSNorm(cfg.d)
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d, bias=False)
        self.proj = nn.Linear(cfg.d, cfg.d, bias=False)
        self.up = nn.Linear(cfg.d, 4 * cfg.d, bias=False)
        self.down = nn.Linear(4 * cfg.d, cfg.d, bias=False)

    def forward(self, x, cache=None, pos=None):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if cache is None:  # a whole sequence: causal attention over itself
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one decode step: write k, v at pos, attend to every position written so far
            cache[0].index_copy_(2, pos, k)
            cache[1].index_copy_(2, pos, v)
            seen = torch.arange(cache.shape[3], device=x.device) <= pos
            y = F.scaled_dot_product_attention(q, cache[0], cache[1], attn_mask=seen.view(1, 1, 1, -1))
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))


# --8<-- [end:block]


# --8<-- [start:model]
class GPT(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.embed, self.pos_embed = nn.Embedding(cfg.vocab, cfg.d), nn.Embedding(cfg.max_len, cfg.d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.d)
        self.head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        self.register_buffer("kv", None, persistent=False)  # the static KV cache: setup_cache(batch)

    def setup_cache(self, batch: int) -> None:
        c, p = self.cfg, self.head.weight
        shape = (c.layers, 2, batch, c.heads, c.max_len, c.d // c.heads)
        self.kv = torch.zeros(shape, device=p.device, dtype=p.dtype)  # allocated once: fixed address

    def forward(self, idx, pos=None, targets=None):
        if pos is None:  # training or prefill: positions 0 .. t-1
            x = self.embed(idx) + self.pos_embed(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
        else:  # decode: idx is (batch, 1), pos a (1,) tensor
            x = self.embed(idx) + self.pos_embed(pos)
            for i, block in enumerate(self.blocks):
                x = block(x, self.kv[i], pos)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


# --8<-- [end:model]


def build(cfg: Config, device: str, dtype: torch.dtype, layers: int | None = None) -> GPT:
    """The model with seeded random weights (N(0, 0.02^2), as GPT-2 initialises), on device."""
    torch.manual_seed(0)
    model = GPT(cfg if layers is None else replace(cfg, layers=layers))
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    return model.to(device, dtype)


def params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    for name, cfg in (("GPU", GPU), ("CPU", CPU)):
        print(f"{name}: {cfg}, {params(GPT(cfg)) / 1e6:.1f} M parameters")
    model = build(CPU, "cpu", torch.float32)
    model.setup_cache(1)
    idx = torch.randint(CPU.vocab, (1, 8))
    with torch.no_grad():
        full = model(idx)[0]
        steps = torch.cat([model(idx[:, i : i + 1], torch.tensor([i]))[0] for i in range(8)])
    print(f"decode with the static cache against a full forward: max |diff| {(full - steps).abs().max():.2e}")
